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
// Built against QuickFIX 1.16.0's headers (third_party/quickfix), the version of the
// quickfix-tls wheel, whose library (_quickfix.so) provides every symbol used here: it is
// loaded, its symbols made global, before this module (fixgw/sendpath.py).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>
#include <vector>

#include "Application.h"
#include "Message.h"
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

PyMethodDef methods[] = {
    {"front", front, METH_VARARGS, "A C++ application in front of a quickfix.Application."},
    {"send_committed", send_committed, METH_VARARGS, "Send committed messages, checked in C++."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "fixgw._sendpath", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__sendpath(void) { return PyModule_Create(&module); }
