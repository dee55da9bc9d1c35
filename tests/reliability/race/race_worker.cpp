// race_worker.cpp: the C++ worker of the multi-language race
// (tests/reliability/race_test.go), on the header-only bindings/cpp wrapper.
// Same loop and history schema as every other worker (race_worker_test.go):
// it also fails retryably (after a delay or the backoff) half of its
// failures, and one time in five before a claim acts as a coordinator
// (request with a priority and a delay or run-at, cancel, retry one job,
// redrive).
//
// Linked with the test library (make builds it so), it also makes clock
// faults through the clock seam, as the C worker does: one iteration in
// eight its clock steps a little back (1-5 ms), jumps forward (5-30 ms) or
// goes right again, and one request in four is sampled a day ahead with
// priority 5. Under a fault the seam freezes the clock at the wall clock
// plus the skew, set just after each call line (which carries the skew,
// skew_us), and no lease is kept alive. LEASES_RACE_CLOCK_FAULTS=0 turns
// the faults off.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <leases/leases.hpp>

#include "leases_testing.h"

namespace {

const char *const kProduction = "race";
int log_fd = -1, tok_fd = -1;
std::string name;
int n = 0;
leases_authority *raw = nullptr;  // for the clock seam
bool faults = false;
long long skew = 0;  // the clock fault in force, µs

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

// Writes a call line (with the skew in force) and sets the clock for the call.
void write_call(const std::string &head) {
    write_all(log_fd, head + ",\"skew_us\":" + std::to_string(skew) + ",\"t\":" + std::to_string(now_us()) + "}\n");
    if (faults && leases_testing_set_clock(raw, skew ? now_us() + skew : 0) != LEASES_OK) std::_Exit(4);
}

int call(const std::string &op, const std::string &lease, const std::string &job, long long dur_us) {
    ++n;
    write_call("{\"w\":" + quote(name) + ",\"n\":" + std::to_string(n) + ",\"ev\":\"call\",\"op\":" + quote(op) +
               ",\"lease\":" + quote(lease) + ",\"job\":" + quote(job) + ",\"dur_us\":" + std::to_string(dur_us));
    return n;
}

void ret(int id, const std::string &kind, const std::string &job, long long expiry, const std::string &msg) {
    long long t = now_us();
    write_all(log_fd, "{\"w\":" + quote(name) + ",\"n\":" + std::to_string(id) + ",\"ev\":\"ret\",\"kind\":" +
                          quote(kind) + ",\"job\":" + quote(job) + ",\"expiry_unix_us\":" + std::to_string(expiry) +
                          ",\"msg\":" + quote(msg) + ",\"t\":" + std::to_string(t) + "}\n");
}

std::string kind_of(const leases::Error &e) { return leases_status_name(e.status()); }

// The jobs this worker requested and failed, for its coordinator calls.
std::vector<std::string> mine, failed;

template <typename Rnd>
void coordinate(leases::Authority &a, Rnd &rnd) {
    const int r = rnd(0, 9);
    if (r < 5) {
        const int id = ++n;
        const std::string key = name + "-" + std::to_string(id);
        leases::RequestOptions o;
        o.priority = rnd(0, 2);
        const long long was = skew;
        if (faults && rnd(0, 3) == 0) {  // sampled a day ahead
            skew = 24LL * 3600 * 1000000;
            o.priority = 5;
        }
        long long delay = 0, run_at = 0;
        const int how = rnd(0, 11);
        if (how < 4) {
            delay = rnd(1, 200) * 1000LL;
            o.delay = std::chrono::microseconds(delay);
        } else if (how < 7) {
            run_at = now_us() + rnd(0, 200) * 1000LL;
            o.run_at = leases::time_point(std::chrono::microseconds(run_at));
        }
        write_call("{\"w\":" + quote(name) + ",\"n\":" + std::to_string(id) +
                   ",\"ev\":\"call\",\"op\":\"request\",\"key\":" + quote(key) + ",\"prio\":" +
                   std::to_string(o.priority) + ",\"dur_us\":" + std::to_string(delay) +
                   ",\"run_at_us\":" + std::to_string(run_at));
        try {
            const std::string job = a.request_job(kProduction, key, key, o);
            ret(id, "ok", job, 0, "");
            mine.push_back(job);
        } catch (const leases::Error &e) {
            ret(id, kind_of(e), "", 0, e.what());
        }
        skew = was;
    } else if (r < 9) {
        const bool cancel = r < 7;
        const std::vector<std::string> &pool = !cancel && !failed.empty() ? failed : mine;
        if (pool.empty()) {
            return;
        }
        const std::string job = pool[static_cast<std::size_t>(rnd(0, static_cast<int>(pool.size()) - 1))];
        const int id = call(cancel ? "cancel" : "retry_job", "", job, 0);
        try {
            if (cancel) {
                a.cancel(kProduction, job);
            } else {
                a.retry_job(kProduction, job);
            }
            ret(id, "ok", job, 0, "");
        } catch (const leases::Error &e) {
            ret(id, kind_of(e), job, 0, e.what());
        }
    } else {
        const leases::JobState states[] = {leases::JobState::Failed, leases::JobState::Dead,
                                           leases::JobState::Cancelled};
        const leases::JobState st = states[rnd(0, 2)];
        const int id = ++n;
        write_call("{\"w\":" + quote(name) + ",\"n\":" + std::to_string(id) +
                   ",\"ev\":\"call\",\"op\":\"redrive\",\"state\":" + quote(leases::to_string(st)));
        try {
            (void)a.redrive(kProduction, st);
            ret(id, "ok", "", 0, "");
        } catch (const leases::Error &e) {
            ret(id, kind_of(e), "", 0, e.what());
        }
    }
}

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
    raw = a.capi();
    const char *off = std::getenv("LEASES_RACE_CLOCK_FAULTS");
    faults = !off || std::string(off) != "0";
    const long long deadline = now_us() + run_ms * 1000;
    for (int it = 1; now_us() < deadline; ++it) {
        if (it % 25 == 0) {
            std::cout << "{\"jobs\":" << a.jobs_json(kProduction) << ",\"events\":" << a.events_json(kProduction, 0)
                      << "}" << std::endl;
        }
        if (faults && rnd(0, 7) == 0) {
            const int f = rnd(0, 2);
            skew = f == 0 ? -rnd(1, 5) * 1000LL : f == 1 ? rnd(5, 30) * 1000LL : 0;
        }
        if (rnd(0, 4) == 0) {
            coordinate(a, rnd);
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
        if (rnd(0, 2) == 0 && skew == 0) {
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
        const bool retry = r == 2 && rnd(0, 1) == 0;
        const long long delay = retry && rnd(0, 1) == 0 ? rnd(1, 50) * 1000LL : 0;
        const char *op = r < 2 ? "release" : retry ? "fail_retry" : r < 3 ? "fail" : "complete";
        id = call(op, label, job, delay);
        try {
            if (r < 2) {
                lease->release();
            } else if (retry && delay > 0) {
                lease->fail_retry("race retry by " + name, std::chrono::microseconds(delay));
            } else if (retry) {
                lease->fail_retry("race retry by " + name);
            } else if (r < 3) {
                lease->fail("race failure by " + name);
                failed.push_back(job);
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
