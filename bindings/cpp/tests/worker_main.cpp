// worker_main.cpp: a real worker process for the C++ projection's tests: a
// leases::Worker stopped by SIGTERM/SIGINT through leases::StopSignals (the
// first drains, the second gives the jobs back). Usage:
//   leases_cpp_worker LOCATION PRODUCTION MODE DRAIN_MS [CONCURRENCY]
// MODE finish: the handler says "started <job id>" on stdout, waits for the
// stop request, works 200 ms more and completes the job; MODE hang: it says
// "started <job id>" and never returns of its own accord. DRAIN_MS 0: no
// drain timeout. Exit status: 0 drained, 3 the jobs out were given back (the drain
// timeout passed, or a second signal), 1 error.
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

void say(const std::string &line) {
    const std::string text = line + "\n";
    // write(2), unbuffered: the parent reads it at once.
    if (::write(STDOUT_FILENO, text.data(), text.size()) < 0) {
        std::_Exit(1);
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: %s LOCATION PRODUCTION finish|hang DRAIN_MS [CONCURRENCY]\n", argv[0]);
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
        if (argc == 6) {
            options.concurrency = static_cast<unsigned>(std::strtoul(argv[5], nullptr, 10));
        }
        leases::Worker worker(auth, options);
        const leases::StopSignals signals(worker);
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
        say("claimed " + std::to_string(report.claimed) + " completed " + std::to_string(report.completed) +
            " released " + std::to_string(report.released));
        return report.gave_back ? 3 : 0;
    } catch (const leases::Error &e) {
        std::fprintf(stderr, "worker: %s\n", e.what());
        return 1;
    }
}
