// The group commit's send path in C++ (fixgw/sendpath.py; docs/decisions/
// 2026-12-07-halving-the-cpu-an-order-needs-a-native-order-path.md).
//
// QuickFIX calls its application's toApp for every message it sends. Through the Python
// bindings that is a call back into the interpreter per message (the director), plus the
// wrappers of setString and sendToTarget around it: ~27 us a message of a dispatcher's CPU.
// Here a committed message is sent from C++ and checked by a C++ application put in front of
// the Python one: if QuickFIX is sending the bytes that were committed (SendingTime put back),
// nothing more is done; anything else (a miss, an admin message, every other callback) goes
// to the Python application exactly as before.
//
// Beside it, QuickFIX's message store for the gateway's sessions (``committed_store``): Redis
// holds every message QuickFIX stores before it is sent, so the store writes nothing; it keeps
// the numbers in memory and answers a ResendRequest from Redis.
//
// Built against QuickFIX 1.16.0's headers (third_party/quickfix), the version of the
// quickfix-tls wheel, whose library (_quickfix.so) provides every symbol used here: it is
// loaded, its symbols made global, before this module (fixgw/sendpath.py).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "Application.h"
#include "Message.h"
#include "MessageStore.h"
#include "Session.h"
#include "SessionID.h"

namespace {

// SWIG 4's SwigPyObject (the bindings are not built in SWIG's built-in mode): the C++ pointer
// behind a binding's object, and how an object the bindings accept is made for our own.
struct SwigPointer {
  PyObject_HEAD
  void* ptr;
  void* type;
  int own;
  PyObject* next;
};

// The sends of one call of send_committed on this thread: which message is going, what was
// committed for it, and what became of it.
struct Batch {
  const std::vector<std::string>* raws = nullptr;
  const std::vector<std::string>* stamps = nullptr;
  size_t current = 0;
  bool in_flight = false;  // set around each send: toApp pairs with this message only
  char outcome = 'n';      // 'm' sent as committed, 'p' handed to Python, 'n' not through toApp
  PyObject* miss = nullptr;  // called with the index before a miss goes to Python's toApp
};

thread_local Batch* batch = nullptr;

class Front : public FIX::Application {
 public:
  Front(FIX::Application* inner, PyObject* owner) : inner_(inner), owner_(owner) { Py_INCREF(owner_); }

  void onCreate(const FIX::SessionID& s) override { inner_->onCreate(s); }
  void onLogon(const FIX::SessionID& s) override { inner_->onLogon(s); }
  void onLogout(const FIX::SessionID& s) override { inner_->onLogout(s); }
  void toAdmin(FIX::Message& m, const FIX::SessionID& s) override { inner_->toAdmin(m, s); }
  void fromAdmin(const FIX::Message& m, const FIX::SessionID& s) override { inner_->fromAdmin(m, s); }
  void fromApp(const FIX::Message& m, const FIX::SessionID& s) override { inner_->fromApp(m, s); }

  void toApp(FIX::Message& m, const FIX::SessionID& s) override {
    Batch* b = batch;
    if (b == nullptr || !b->in_flight) {
      inner_->toApp(m, s);  // not one of ours (a reject, an answer sent from Python)
      return;
    }
    b->in_flight = false;
    const std::string& raw = (*b->raws)[b->current];
    if (!raw.empty()) {  // committed: only SendingTime is QuickFIX's own, put back
      m.getHeader().setField(FIX::FIELD::SendingTime, (*b->stamps)[b->current]);
      std::string sent;
      m.toString(sent);
      if (sent == raw) {
        b->outcome = 'm';
        return;
      }
    }
    b->outcome = 'p';
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* result = PyObject_CallFunction(b->miss, "n", static_cast<Py_ssize_t>(b->current));
    if (result == nullptr) {
      PyErr_WriteUnraisable(b->miss);
    }
    Py_XDECREF(result);
    PyGILState_Release(gil);
    inner_->toApp(m, s);  // the miss: stored as QuickFIX numbered it (GatewayApplication.toApp)
  }

 private:
  FIX::Application* inner_;
  PyObject* owner_;  // the Python application: alive as long as QuickFIX may call it
};

void* pointer_of(PyObject* obj, const char* what) {
  PyObject* self = PyObject_GetAttrString(obj, "this");
  if (self == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s: not an object of QuickFIX's bindings", what);
    return nullptr;
  }
  void* ptr = reinterpret_cast<SwigPointer*>(self)->ptr;
  Py_DECREF(self);
  return ptr;
}

// front(application) -> an object QuickFIX's acceptors take as their application: a C++ one in
// front of ``application`` (a quickfix.Application).
PyObject* front(PyObject*, PyObject* args) {
  PyObject* app;
  if (!PyArg_ParseTuple(args, "O", &app)) return nullptr;
  PyObject* self = PyObject_GetAttrString(app, "this");
  if (self == nullptr) return nullptr;
  auto* src = reinterpret_cast<SwigPointer*>(self);
  auto* made = PyObject_New(SwigPointer, Py_TYPE(self));
  if (made != nullptr) {
    // Never freed: QuickFIX keeps calling it until the process ends.
    made->ptr = static_cast<FIX::Application*>(new Front(static_cast<FIX::Application*>(src->ptr), app));
    made->type = src->type;
    made->own = 0;
    made->next = nullptr;
  }
  Py_DECREF(self);
  return reinterpret_cast<PyObject*>(made);
}

// The store QuickFIX keeps for one session (DESIGN §4: Redis is the source of truth). Every
// message QuickFIX stores has been written to Redis first (the group commit, or toApp/toAdmin
// for the rest), so ``set`` writes nothing, where the FileStore wrote each message twice (body
// and index) and the numbers once more, a system call each: 12 % of the gateway's CPU at
// 2,000 orders/s. The session's files, written from Redis when the gateway takes over (or when
// it puts a session's copy back: ``restore_local_copy``), give the numbers and the creation time
// at ``create``, ``refresh`` and ``reset``; after that the numbers live here. A ResendRequest
// reads the messages from Redis (``fetch``, in Python: a round trip per 16 chunks); a failure
// there fails the resend as a file error would: QuickFIX disconnects, the client asks again.
class CommittedStore : public FIX::MessageStore {
 public:
  CommittedStore(FIX::MessageStore* files, const FIX::SessionID& sid, PyObject* fetch)
      : files_(files), sid_(sid.toString()), fetch_(fetch) {
    take_numbers();
  }

  FIX::MessageStore* files() const { return files_; }

  bool set(FIX::SEQNUM, const std::string&) EXCEPT(FIX::IOException) override { return true; }

  void get(FIX::SEQNUM begin, FIX::SEQNUM end, std::vector<std::string>& out) const
      EXCEPT(FIX::IOException) override {
    std::string error;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* found = PyObject_CallFunction(fetch_, "s#KK", sid_.data(), static_cast<Py_ssize_t>(sid_.size()),
                                            static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
    if (found == nullptr || !PyList_Check(found)) {
      error = "the stored messages could not be read from the session store";
      if (found == nullptr) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
        if (text != nullptr && PyUnicode_Check(text)) error += std::string(": ") + PyUnicode_AsUTF8(text);
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
      }
    } else {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
        char* data;
        Py_ssize_t size;
        if (PyBytes_AsStringAndSize(PyList_GET_ITEM(found, i), &data, &size) < 0) {
          PyErr_Clear();
          error = "a stored message is not bytes";
          break;
        }
        out.emplace_back(data, size);
      }
    }
    Py_XDECREF(found);
    PyGILState_Release(gil);
    if (!error.empty()) {
      out.clear();
      throw FIX::IOException(error);
    }
  }

  FIX::SEQNUM getNextSenderMsgSeqNum() const EXCEPT(FIX::IOException) override { return sender_; }
  FIX::SEQNUM getNextTargetMsgSeqNum() const EXCEPT(FIX::IOException) override { return target_; }
  void setNextSenderMsgSeqNum(FIX::SEQNUM n) EXCEPT(FIX::IOException) override { sender_ = n; }
  void setNextTargetMsgSeqNum(FIX::SEQNUM n) EXCEPT(FIX::IOException) override { target_ = n; }
  void incrNextSenderMsgSeqNum() EXCEPT(FIX::IOException) override { ++sender_; }
  void incrNextTargetMsgSeqNum() EXCEPT(FIX::IOException) override { ++target_; }

  FIX::UtcTimeStamp getCreationTime() const EXCEPT(FIX::IOException) override { return files_->getCreationTime(); }

  // A new session period or an operator's reset: the files start again (numbers 1), and so do we.
  void reset(const FIX::UtcTimeStamp& now) EXCEPT(FIX::IOException) override {
    files_->reset(now);
    take_numbers();
  }

  // The gateway calls it only once it has written the session's files from Redis again.
  void refresh() EXCEPT(FIX::IOException) override {
    files_->refresh();
    take_numbers();
  }

 private:
  void take_numbers() {
    sender_ = files_->getNextSenderMsgSeqNum();
    target_ = files_->getNextTargetMsgSeqNum();
  }

  FIX::MessageStore* files_;
  std::string sid_;
  PyObject* fetch_;  // owned by the factory
  FIX::SEQNUM sender_ = 1;
  FIX::SEQNUM target_ = 1;
};

class CommittedStoreFactory : public FIX::MessageStoreFactory {
 public:
  CommittedStoreFactory(FIX::MessageStoreFactory* files, PyObject* files_owner, PyObject* fetch)
      : files_(files), files_owner_(files_owner), fetch_(fetch) {
    Py_INCREF(files_owner_);
    Py_INCREF(fetch_);
  }

  FIX::MessageStore* create(const FIX::UtcTimeStamp& now, const FIX::SessionID& sid) override {
    FIX::MessageStore* files = files_->create(now, sid);
    try {
      return new CommittedStore(files, sid, fetch_);
    } catch (...) {
      files_->destroy(files);
      throw;
    }
  }

  void destroy(FIX::MessageStore* store) override {
    auto* committed = static_cast<CommittedStore*>(store);
    files_->destroy(committed->files());
    delete committed;
  }

 private:
  FIX::MessageStoreFactory* files_;
  PyObject* files_owner_;  // the Python object of ``files``: alive as long as QuickFIX may call it
  PyObject* fetch_;
};

bool strings_of(PyObject* list, std::vector<std::string>& out, bool bytes) {
  Py_ssize_t n = PyList_GET_SIZE(list);
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PyList_GET_ITEM(list, i);
    char* data;
    Py_ssize_t size;
    if (bytes) {
      if (PyBytes_AsStringAndSize(item, &data, &size) < 0) return false;
    } else {
      const char* text = PyUnicode_AsUTF8AndSize(item, &size);
      if (text == nullptr) return false;
      data = const_cast<char*>(text);
    }
    out.emplace_back(data, size);
  }
  return true;
}

// send_committed(session_id, texts, raws, stamps, miss) -> str: each message's body text
// (``fixmsg.body_text``) sent in order to the session, until one is handed to Python (a miss:
// ``miss(i)`` is called first, then Python's toApp); one letter per message sent or tried
// ('m', 'p', 'n': see Batch). ``raws``: the bytes committed for each (b"": not committed);
// ``stamps``: its SendingTime.
PyObject* send_committed(PyObject*, PyObject* args) {
  PyObject *sid_obj, *texts_obj, *raws_obj, *stamps_obj, *miss;
  if (!PyArg_ParseTuple(args, "OO!O!O!O", &sid_obj, &PyList_Type, &texts_obj, &PyList_Type, &raws_obj, &PyList_Type,
                        &stamps_obj, &miss))
    return nullptr;
  auto* sid = static_cast<FIX::SessionID*>(pointer_of(sid_obj, "session id"));
  if (sid == nullptr) return nullptr;
  std::vector<std::string> texts, raws, stamps;
  if (!strings_of(texts_obj, texts, false) || !strings_of(raws_obj, raws, true) || !strings_of(stamps_obj, stamps, false))
    return nullptr;
  if (raws.size() != texts.size() || stamps.size() != texts.size()) {
    PyErr_SetString(PyExc_ValueError, "texts, raws and stamps differ in length");
    return nullptr;
  }
  std::string outcomes;
  std::string error;
  Batch b;
  b.raws = &raws;
  b.stamps = &stamps;
  b.miss = miss;
  Py_BEGIN_ALLOW_THREADS
  batch = &b;
  try {
    FIX::Session* session = FIX::Session::lookupSession(*sid);
    if (session == nullptr) {
      error = "no such session: " + sid->toString();
    } else {
      FIX::Message message;
      for (size_t i = 0; i < texts.size(); i++) {
        message.setString(texts[i], false);
        b.current = i;
        b.outcome = 'n';
        b.in_flight = true;
        session->send(message);
        b.in_flight = false;
        outcomes += b.outcome;
        if (b.outcome == 'p') break;  // Python decides what follows a miss
      }
    }
  } catch (std::exception& exc) {
    error = exc.what();
  }
  batch = nullptr;
  Py_END_ALLOW_THREADS
  if (!error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, error.c_str());
    return nullptr;
  }
  return PyUnicode_FromStringAndSize(outcomes.data(), static_cast<Py_ssize_t>(outcomes.size()));
}

// committed_store(file_store_factory, fetch) -> an object QuickFIX's acceptors take as their
// message store factory: a CommittedStore per session, over the FileStore ``file_store_factory``
// (a quickfix.FileStoreFactory) creates. ``fetch(session_id_text, first, last)`` returns the
// stored messages (bytes, whole) numbered first..last, in order.
PyObject* committed_store(PyObject*, PyObject* args) {
  PyObject *files, *fetch;
  if (!PyArg_ParseTuple(args, "OO", &files, &fetch)) return nullptr;
  if (!PyCallable_Check(fetch)) {
    PyErr_SetString(PyExc_TypeError, "fetch must be callable");
    return nullptr;
  }
  PyObject* self = PyObject_GetAttrString(files, "this");
  if (self == nullptr) return nullptr;
  auto* src = reinterpret_cast<SwigPointer*>(self);
  auto* made = PyObject_New(SwigPointer, Py_TYPE(self));
  if (made != nullptr) {
    // Never freed: QuickFIX keeps creating sessions with it until the process ends. Its SWIG type
    // is the FileStoreFactory's, whose one base is MessageStoreFactory: the same address.
    made->ptr = static_cast<FIX::MessageStoreFactory*>(
        new CommittedStoreFactory(static_cast<FIX::MessageStoreFactory*>(src->ptr), files, fetch));
    made->type = src->type;
    made->own = 0;
    made->next = nullptr;
  }
  Py_DECREF(self);
  return reinterpret_cast<PyObject*>(made);
}

// inbound_parts(message, header_tags) -> (text, MsgType, MsgSeqNum, PossDupFlag=Y, PossResend=Y,
// body fields): ``fixmsg.inbound`` for a quickfix.Message, made here from one toString. The same
// rules, so the same result: the text cut at SOH, each part cut at its first '='; a part whose
// tag is not 1-10 ASCII digits is skipped; a tag in ``header_tags`` (a frozenset of int) is a
// header field, any other but CheckSum a body field; the first of each tag wins. Values are
// decoded as the bindings decode the whole text (UTF-8, bytes that are not as surrogates): SOH
// and '=' never fall inside a UTF-8 sequence, so decoding part by part gives the same strings.
PyObject* inbound_parts(PyObject*, PyObject* args) {
  PyObject *msg_obj, *header_tags;
  if (!PyArg_ParseTuple(args, "OO!", &msg_obj, &PyFrozenSet_Type, &header_tags)) return nullptr;
  auto* message = static_cast<FIX::Message*>(pointer_of(msg_obj, "message"));
  if (message == nullptr) return nullptr;
  std::string text;
  Py_BEGIN_ALLOW_THREADS
  message->toString(text);
  Py_END_ALLOW_THREADS
  // The header's fields that ``Inbound`` keeps: MsgType, MsgSeqNum, PossDupFlag, PossResend.
  const long wanted[4] = {35, 34, 43, 97};
  std::string_view kept[4];
  bool seen[4] = {false, false, false, false};
  PyObject* body = PyDict_New();
  if (body == nullptr) return nullptr;
  const char* data = text.data();
  size_t size = text.size(), start = 0;
  while (start <= size) {
    size_t end = text.find('\x01', start);
    if (end == std::string::npos) end = size;
    size_t eq = text.find('=', start);
    if (eq != std::string::npos && eq < end && eq > start && eq - start <= 10) {
      long tag = 0;
      bool digits = true;
      for (size_t i = start; i < eq; i++) {
        if (data[i] < '0' || data[i] > '9') { digits = false; break; }
        tag = tag * 10 + (data[i] - '0');
      }
      if (digits) {
        std::string_view value(data + eq + 1, end - eq - 1);
        PyObject* key = PyLong_FromLong(tag);
        if (key == nullptr) { Py_DECREF(body); return nullptr; }
        int header = PySet_Contains(header_tags, key);
        int present = header ? 0 : PyDict_Contains(body, key);
        if (header < 0 || present < 0) { Py_DECREF(key); Py_DECREF(body); return nullptr; }
        if (header) {
          for (int w = 0; w < 4; w++)
            if (wanted[w] == tag && !seen[w]) { kept[w] = value; seen[w] = true; }
        } else if (tag != 10 && !present) {
          PyObject* v = PyUnicode_DecodeUTF8(value.data(), static_cast<Py_ssize_t>(value.size()), "surrogateescape");
          if (v == nullptr || PyDict_SetItem(body, key, v) < 0) { Py_XDECREF(v); Py_DECREF(key); Py_DECREF(body); return nullptr; }
          Py_DECREF(v);
        }
        Py_DECREF(key);
      }
    }
    start = end + 1;
  }
  auto decoded = [](std::string_view v) {
    return PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "surrogateescape");
  };
  PyObject* whole = PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(size), "surrogateescape");
  PyObject* msg_type = decoded(kept[0]);
  PyObject* seq = decoded(kept[1]);
  if (whole == nullptr || msg_type == nullptr || seq == nullptr) {
    Py_XDECREF(whole); Py_XDECREF(msg_type); Py_XDECREF(seq); Py_DECREF(body);
    return nullptr;
  }
  PyObject* poss_dup = PyBool_FromLong(seen[2] && kept[2] == "Y");
  PyObject* poss_resend = PyBool_FromLong(seen[3] && kept[3] == "Y");
  return Py_BuildValue("(NNNNNN)", whole, msg_type, seq, poss_dup, poss_resend, body);
}

// filled_body(text, begin_string, sender, target, seq, sending_time) -> bytes: ``fixmsg.filled_body``
// (the header put in front of a body ``body_text`` made, BodyLength and CheckSum counted) in one
// step. The same bytes: the text and the header's values encoded as UTF-8 with surrogates back to
// the bytes they stand for, BeginString as strict UTF-8, the checksum the bytes' sum mod 256.
PyObject* filled_body(PyObject*, PyObject* args) {
  PyObject *text_obj, *begin_obj, *sender_obj, *target_obj, *stamp_obj;
  long long seq;
  if (!PyArg_ParseTuple(args, "UUUULU", &text_obj, &begin_obj, &sender_obj, &target_obj, &seq, &stamp_obj))
    return nullptr;
  PyObject* parts[5] = {text_obj, sender_obj, target_obj, stamp_obj, begin_obj};
  PyObject* encoded[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  for (int i = 0; i < 5; i++) {
    encoded[i] = PyUnicode_AsEncodedString(parts[i], "utf-8", i < 4 ? "surrogateescape" : "strict");
    if (encoded[i] == nullptr) {
      for (int j = 0; j < i; j++) Py_DECREF(encoded[j]);
      return nullptr;
    }
  }
  auto view = [&](int i) {
    return std::string_view(PyBytes_AS_STRING(encoded[i]), static_cast<size_t>(PyBytes_GET_SIZE(encoded[i])));
  };
  std::string_view text = view(0);
  size_t cut = text.find('\x01');
  PyObject* result = nullptr;
  if (cut == std::string_view::npos) {
    PyErr_SetString(PyExc_ValueError, "substring not found");
  } else {
    cut += 1;
    std::string rest;
    rest.reserve(text.size() + 96);
    rest.append(text.substr(0, cut)).append("34=").append(std::to_string(seq)).append("\x01" "49=");
    rest.append(view(1)).append("\x01" "52=").append(view(3)).append("\x01" "56=").append(view(2)).append("\x01");
    rest.append(text.substr(cut));
    std::string out;
    out.reserve(rest.size() + 40);
    out.append("8=").append(view(4)).append("\x01" "9=").append(std::to_string(rest.size())).append("\x01");
    out.append(rest);
    unsigned sum = 0;
    for (unsigned char c : out) sum += c;
    char trailer[8];
    std::snprintf(trailer, sizeof trailer, "10=%03u\x01", sum % 256);
    out.append(trailer);
    result = PyBytes_FromStringAndSize(out.data(), static_cast<Py_ssize_t>(out.size()));
  }
  for (PyObject* e : encoded) Py_DECREF(e);
  return result;
}

PyMethodDef methods[] = {
    {"front", front, METH_VARARGS, "A C++ application in front of a quickfix.Application."},
    {"send_committed", send_committed, METH_VARARGS, "Send committed messages, checked in C++."},
    {"inbound_parts", inbound_parts, METH_VARARGS, "fixmsg.inbound's parts of a quickfix.Message, from one toString."},
    {"committed_store", committed_store, METH_VARARGS, "QuickFIX's message store over Redis, the files giving the numbers."},
    {"filled_body", filled_body, METH_VARARGS, "fixmsg.filled_body in one step."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "fixgw._sendpath", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__sendpath(void) { return PyModule_Create(&module); }
