// race_worker.cpp: the C++ worker of the multi-language race
// (tests/reliability/race_test.go), on the header-only bindings/cpp wrapper.
// Same loop and history schema as every other worker (race_worker_test.go).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include <leases/leases.hpp>

namespace {

const char *const kProduction = "race";
int log_fd = -1, tok_fd = -1;
std::string name;
int n = 0;

long long now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string quote(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o + "\"";
}

void write_all(int fd, const std::string &s) {
    if (::write(fd, s.data(), s.size()) < 0) std::_Exit(3);
}

int call(const std::string &op, const std::string &lease, const std::string &job, long long dur_us) {
    ++n;
    write_all(log_fd, "{\"w\":" + quote(name) + ",\"n\":" + std::to_string(n) + ",\"ev\":\"call\",\"op\":" +
                          quote(op) + ",\"lease\":" + quote(lease) + ",\"job\":" + quote(job) +
                          ",\"dur_us\":" + std::to_string(dur_us) + ",\"t\":" + std::to_string(now_us()) + "}\n");
    return n;
}

void ret(int id, const std::string &kind, const std::string &job, long long expiry, const std::string &msg) {
    long long t = now_us();
    write_all(log_fd, "{\"w\":" + quote(name) + ",\"n\":" + std::to_string(id) + ",\"ev\":\"ret\",\"kind\":" +
                          quote(kind) + ",\"job\":" + quote(job) + ",\"expiry_unix_us\":" + std::to_string(expiry) +
                          ",\"msg\":" + quote(msg) + ",\"t\":" + std::to_string(t) + "}\n");
}

std::string kind_of(const leases::Error &e) { return leases_status_name(e.status()); }

}  // namespace

int main() {
    name = std::getenv("LEASES_RACE_WORKER");
    log_fd = ::open(std::getenv("LEASES_RACE_LOG"), O_WRONLY | O_CREAT | O_APPEND, 0600);
    tok_fd = ::open(std::getenv("LEASES_RACE_TOKENS"), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log_fd < 0 || tok_fd < 0) return 2;
    const long long run_ms = std::atoll(std::getenv("LEASES_RACE_RUN_MS"));
    std::mt19937_64 rng(std::strtoull(std::getenv("LEASES_RACE_SEED"), nullptr, 10));
    auto rnd = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    leases::Authority a = leases::Authority::open(std::getenv("LEASES_RACE_DB"));
    const long long deadline = now_us() + run_ms * 1000;
    for (int it = 1; now_us() < deadline; ++it) {
        if (it % 25 == 0) {
            std::cout << "{\"jobs\":" << a.jobs_json(kProduction) << ",\"events\":" << a.events_json(kProduction, 0)
                      << "}" << std::endl;
        }
        auto d = std::chrono::milliseconds(rnd(30, 150));
        const bool waiting = rnd(0, 1) == 0;  // one claim in two waits, 0-300 ms
        int id = call(waiting ? "claim_wait" : "claim", "", "", d.count() * 1000);
        const std::string label = name + ":" + std::to_string(id);
        std::optional<leases::Lease> lease;
        try {
            lease = waiting ? a.claim_wait(kProduction, name, d, std::chrono::milliseconds(rnd(0, 300)))
                            : a.claim(kProduction, name, d);
        } catch (const leases::Error &e) {
            ret(id, kind_of(e), "", 0, e.what());
            continue;
        }
        if (!lease) {
            ret(id, "nothing_to_claim", "", 0, "");
            if (!waiting) {
                sleep_ms(5);
            }
            continue;
        }
        const std::string job = lease->job_id();
        ret(id, "ok", job, lease->expiry_unix_us(), "");
        write_all(tok_fd, lease->export_token() + "\n");
        sleep_ms(rnd(0, 60));
        if (rnd(0, 2) == 0) {
            // Kept alive while it works; its renewals are not in the history,
            // and stopping it reports the last confirmed expiry.
            id = call("keep_alive", label, job, d.count() * 1000);
            try {
                lease->keep_alive(d);
                ret(id, "ok", job, 0, "");
            } catch (const leases::Error &e) {
                ret(id, kind_of(e), job, 0, e.what());
            }
            sleep_ms(rnd(50, 300));
            id = call("stop_keep_alive", label, job, 0);
            std::int64_t expiry = 0;  // as the C worker: the expiry, or 0
            try {
                lease->stop_keep_alive();
                expiry = lease->expiry_unix_us();
            } catch (const leases::Error &) {
            }
            ret(id, "ok", job, expiry, "");
        }
        if (rnd(0, 2) == 0) {
            auto rd = std::chrono::milliseconds(rnd(30, 200));
            id = call("renew", label, job, rd.count() * 1000);
            try {
                lease->renew(rd);
                ret(id, "ok", job, lease->expiry_unix_us(), "");
            } catch (const leases::Error &e) {
                ret(id, kind_of(e), job, 0, e.what());
            }
        }
        sleep_ms(rnd(0, 40));
        const int r = rnd(0, 9);
        const char *op = r < 2 ? "release" : r < 3 ? "fail" : "complete";
        id = call(op, label, job, 0);
        try {
            if (r < 2) {
                lease->release();
            } else if (r < 3) {
                lease->fail("race failure by " + name);
            } else {
                lease->complete("{\"metadata\":{\"by\":" + quote(name) + ",\"lease\":" + quote(label) + "}}");
            }
            ret(id, "ok", job, 0, "");
        } catch (const leases::Error &e) {
            ret(id, kind_of(e), job, 0, e.what());
        }
    }
    return 0;
}
