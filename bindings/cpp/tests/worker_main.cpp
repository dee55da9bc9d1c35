// worker_main.cpp: a real worker process for the C++ projection's tests: a
// leases::Worker whose SIGTERM/SIGINT handler requests a stop. Usage:
//   leases_cpp_worker LOCATION PRODUCTION MODE DRAIN_MS
// MODE finish: the handler says "started <job id>" on stdout, waits for the
// stop request, works 200 ms more and completes the job; MODE hang: it says
// "started <job id>" and never returns of its own accord. DRAIN_MS 0: no
// drain timeout. Exit status: 0 drained, 3 the drain timeout passed, 1 error.
#include <leases/leases.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

std::atomic<leases::Worker *> g_worker{nullptr};

extern "C" void on_stop_signal(int) {
    // Worker::request_stop is a lock-free atomic store: async-signal-safe.
    if (leases::Worker *w = g_worker.load()) {
        w->request_stop();
    }
}

void say(const std::string &line) {
    const std::string text = line + "\n";
    // write(2), unbuffered: the parent reads it at once.
    if (::write(STDOUT_FILENO, text.data(), text.size()) < 0) {
        std::_Exit(1);
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s LOCATION PRODUCTION finish|hang DRAIN_MS\n", argv[0]);
        return 1;
    }
    const std::string mode = argv[3];
    const long drain_ms = std::strtol(argv[4], nullptr, 10);
    try {
        leases::Authority auth = leases::Authority::open(argv[1]);
        leases::WorkerOptions options;
        options.production = argv[2];
        options.worker = "cpp-worker-" + std::to_string(::getpid());
        options.duration = std::chrono::seconds(2);
        if (drain_ms > 0) {
            options.drain_timeout = std::chrono::milliseconds(drain_ms);
        }
        leases::Worker worker(auth, options);
        g_worker.store(&worker);

        // SA_ONSTACK: the signal may land on a thread of the Go runtime (leases.h).
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sa.sa_flags = SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, nullptr);
        sigaction(SIGINT, &sa, nullptr);
        say("ready");

        const leases::WorkerReport report = worker.run([&](leases::Lease &lease) -> std::string {
            say("started " + lease.job_id());
            if (mode == "hang") {
                for (;;) {
                    std::this_thread::sleep_for(std::chrono::seconds(60));
                }
            }
            while (!worker.stop_requested()) {
                // The handler's own wait; the lease's loss would end it too.
                (void)lease.wait_lost(std::chrono::milliseconds(20));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            return R"({"metadata": {"drained": true}})";
        });
        g_worker.store(nullptr);
        say("claimed " + std::to_string(report.claimed) + " completed " + std::to_string(report.completed) +
            " released " + std::to_string(report.released));
        return report.drain_timed_out ? 3 : 0;
    } catch (const leases::Error &e) {
        std::fprintf(stderr, "worker: %s\n", e.what());
        return 1;
    }
}
