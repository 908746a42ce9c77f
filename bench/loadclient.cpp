// The benchmarks' load generator in C++: ``bench/loadclient.py``'s run, message for message and
// figure for figure, at a fraction of its CPU. The load generator shares the machine with what it
// measures, and the Python one cost 0.06-0.07 ms of CPU an order, a tenth of the whole system's
// (bench/e2e_bench.py prints both). bench/e2e_bench.py compiles it on first use where g++ is,
// and runs the Python one otherwise.
//
//     loadclient PORT [--orders 2000] [--rate 2000] [--seconds 5] [--sender CLIENT1]
//
// prints one line of JSON, the keys of loadclient.py's: the burst's throughput and its wall-clock
// span, the paced orders' p50/p99, how many were answered, and each paced order's send and first
// report on the wall clock.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

const int PIPELINE = 50;              // orders a write in the throughput run (loadclient.py: PIPELINE)
const double ANSWERS_WAIT_S = 60.0;   // after the paced run, how long its answers are waited for at most
const size_t CHUNK = 262144;
const size_t TRAILER = 7;             // "10=nnn\x01"

double mono() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

double wall() {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

[[noreturn]] void fail(const std::string& why) {
    fprintf(stderr, "%s\n", why.c_str());
    exit(1);
}

class Session {
public:
    Session(int port, const std::string& sender) : sender_(sender) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("cannot connect");
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }

    // UTC now as FIX's UTCTimestamp to the second, made once a second.
    const std::string& sending_time() {
        time_t now = time(nullptr);
        if (now != second_) {
            second_ = now;
            tm t;
            gmtime_r(&now, &t);
            char buf[32];
            strftime(buf, sizeof buf, "%Y%m%d-%H:%M:%S", &t);
            stamp_ = buf;
        }
        return stamp_;
    }

    void frame(std::string& out, const char* msg_type, const std::string& fields) {
        std::string content = std::string("35=") + msg_type + "\x01" "34=" + std::to_string(seq_++) + "\x01" "49=" +
                              sender_ + "\x01" "52=" + sending_time() + "\x01" "56=FIXGW\x01" + fields;
        std::string message = "8=FIX.4.4\x01" "9=" + std::to_string(content.size()) + "\x01" + content;
        unsigned sum = 0;
        for (unsigned char c : message) sum += c;
        char trailer[16];
        snprintf(trailer, sizeof trailer, "10=%03u\x01", sum & 255);
        out += message;
        out += trailer;
    }

    void write_all(const std::string& data) {
        size_t at = 0;
        while (at < data.size()) {
            ssize_t n = send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR) continue;
                fail("gateway closed the connection");
            }
            at += static_cast<size_t>(n);
        }
    }

    // The complete messages that arrive within ``timeout`` seconds (0: those already here).
    std::vector<std::string> receive(double timeout) {
        pollfd p{fd_, POLLIN, 0};
        int ms = timeout <= 0 ? 0 : static_cast<int>(std::ceil(timeout * 1000));
        if (poll(&p, 1, ms) > 0) {
            char buf[CHUNK];
            ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
            while (n > 0) {
                buffer_.append(buf, static_cast<size_t>(n));
                if (static_cast<size_t>(n) < CHUNK) return split();
                n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return split();
            fail("gateway closed the connection");
        }
        return split();
    }

private:
    std::vector<std::string> split() {
        std::vector<std::string> messages;
        size_t pos = 0;
        while (true) {
            size_t length_at = buffer_.find("\x01" "9=", pos);
            if (length_at == std::string::npos) break;
            size_t body_at = buffer_.find('\x01', length_at + 3);
            if (body_at == std::string::npos) break;
            size_t end = body_at + 1 + std::stoul(buffer_.substr(length_at + 3, body_at - length_at - 3)) + TRAILER;
            if (end > buffer_.size()) break;
            messages.push_back(buffer_.substr(pos, end - pos));
            pos = end;
        }
        buffer_.erase(0, pos);
        return messages;
    }

    int fd_;
    std::string sender_;
    long seq_ = 1;
    time_t second_ = -1;
    std::string stamp_;
    std::string buffer_;
};

// The value of ``tag`` ("11") in a message, or "".
std::string field(const std::string& message, const char* tag) {
    std::string key = std::string("\x01") + tag + "=";
    size_t at = message.find(key);
    if (at == std::string::npos) return "";
    size_t start = at + key.size();
    return message.substr(start, message.find('\x01', start) - start);
}

struct Order {
    double sent = 0;        // monotonic
    double first = -1;      // monotonic, -1: no report yet
    double sent_wall = 0;   // paced orders only
    double first_wall = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) fail("usage: loadclient PORT [--orders N] [--rate R] [--seconds S] [--sender NAME]");
    int port = atoi(argv[1]);
    long orders = 2000;
    double rate = 2000, seconds = 5;
    std::string sender = "CLIENT1";
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string name = argv[i];
        if (name == "--orders") orders = atol(argv[i + 1]);
        else if (name == "--rate") rate = atof(argv[i + 1]);
        else if (name == "--seconds") seconds = atof(argv[i + 1]);
        else if (name == "--sender") sender = argv[i + 1];
        else fail("unknown option " + name);
    }
    Session session(port, sender);
    auto order_fields = [&](const std::string& clordid) {
        // Buys far below the market on a quiet symbol: each order's first report is its New.
        return "11=" + clordid + "\x01" "55=ACME\x01" "54=1\x01" "40=2\x01" "44=1.00\x01" "38=1\x01" "59=1\x01" "60=" +
               session.sending_time() + "\x01";
    };
    std::string logon;
    session.frame(logon, "A", "98=0\x01" "108=30\x01" "141=Y\x01");
    session.write_all(logon);
    double deadline = mono() + 10;
    while (session.receive(0.5).empty()) {
        if (mono() > deadline) fail("no Logon answer within 10 s");
    }
    timespec now_ts;
    clock_gettime(CLOCK_REALTIME, &now_ts);
    std::string tag = std::to_string((static_cast<long long>(now_ts.tv_sec) * 1000000000LL + now_ts.tv_nsec) %
                                     1000000000LL);
    std::unordered_map<std::string, Order> book;
    book.reserve(static_cast<size_t>(orders + rate * seconds + 16));
    long answered_burst = 0;

    auto drain = [&](double until) {
        while (true) {
            std::vector<std::string> messages = session.receive(std::max(0.0, until - mono()));
            double now = mono();
            for (const std::string& msg : messages) {
                std::string type = field(msg, "35");
                if (type != "8" && type != "D") continue;
                auto it = book.find(field(msg, "11"));
                if (it == book.end() || it->second.first >= 0) continue;
                it->second.first = now;
                if (it->second.sent_wall > 0) it->second.first_wall = wall();
                if (it->first[0] == 'T') ++answered_burst;
            }
            if (now >= until) return;
        }
    };

    // throughput: orders written PIPELINE at a time
    double started = mono();
    for (long first_i = 0; first_i < orders; first_i += PIPELINE) {
        std::string batch;
        double at = mono();
        for (long i = first_i; i < std::min(orders, first_i + PIPELINE); ++i) {
            std::string cl = "T" + tag + "-" + std::to_string(i);
            book[cl].sent = at;
            session.frame(batch, "D", order_fields(cl));
        }
        session.write_all(batch);
    }
    deadline = mono() + 120;
    while (answered_burst < orders && mono() < deadline) drain(mono() + 0.05);
    double last = started;
    for (auto& [cl, o] : book) {
        if (cl[0] == 'T' && o.first > last) last = o.first;
    }
    double throughput = orders / (last - started);
    double to_wall = wall() - mono();
    double burst[2] = {started + to_wall, last + to_wall};
    // A second of reading only: the paced run measures a steady rate, not the burst's queue.
    drain(mono() + 1.0);
    // paced latency
    std::vector<std::string> paced;
    double interval = 1.0 / rate;
    double t0 = mono();
    long n = static_cast<long>(rate * seconds);
    for (long i = 0; i < n; ++i) {
        drain(t0 + i * interval);
        std::string cl = "L" + tag + "-" + std::to_string(i);
        std::string message;
        session.frame(message, "D", order_fields(cl));
        Order& o = book[cl];
        o.sent = mono();
        o.sent_wall = wall();
        paced.push_back(cl);
        session.write_all(message);
    }
    double sends_done = mono();
    auto unanswered = [&] {
        for (const std::string& cl : paced) {
            if (book[cl].first < 0) return true;
        }
        return false;
    };
    while (unanswered() && mono() < sends_done + ANSWERS_WAIT_S) drain(mono() + 0.05);
    std::vector<double> lat;
    for (const std::string& cl : paced) {
        const Order& o = book[cl];
        if (o.first >= 0) lat.push_back((o.first - o.sent) * 1000);
    }
    std::sort(lat.begin(), lat.end());
    if (lat.empty()) fail("no paced order was answered");
    size_t m = lat.size();
    double p50 = m % 2 ? lat[m / 2] : (lat[m / 2 - 1] + lat[m / 2]) / 2;  // statistics.median
    long p99_at = static_cast<long>(m * 0.99) - 1;
    double p99 = lat[static_cast<size_t>(p99_at < 0 ? static_cast<long>(m) - 1 : p99_at)];  // lat[int(len*0.99)-1]
    std::string out;
    char num[64];
    auto put = [&](const char* fmt, double v) {
        snprintf(num, sizeof num, fmt, v);
        out += num;
    };
    out += "{\"throughput\": ";
    put("%.17g", throughput);
    out += ", \"burst\": [";
    put("%.17g", burst[0]);
    out += ", ";
    put("%.17g", burst[1]);
    out += "], \"p50_ms\": ";
    put("%.17g", p50);
    out += ", \"p99_ms\": ";
    put("%.17g", p99);
    out += ", \"answered\": " + std::to_string(m) + ", \"paced\": " + std::to_string(n) + ", \"achieved_rate\": ";
    put("%.17g", n / (sends_done - t0));
    out += ", \"wall\": {";
    bool any = false;
    for (const std::string& cl : paced) {
        const Order& o = book[cl];
        if (o.first < 0) continue;
        out += any ? ", \"" : "\"";
        any = true;
        out += cl + "\": [";
        put("%.17g", o.sent_wall);
        out += ", ";
        put("%.17g", o.first_wall);
        out += "]";
    }
    out += "}}\n";
    fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}
