// cppbench: the C++ rows of `make bench`, through bindings/cpp's leases.hpp.
//   cppbench cycle DB N      claim -> complete of N jobs, two commits each
//   cppbench boundary DB N   ns per call of leases::abi_version() and
//                            Lease::expiry_unix_us() (leases_lease_expiry)
//   cppbench worker DB N C   the N jobs already requested at DB (a file or a
//                            postgres:// URL) drained by leases::Worker
//                            (exit_when_empty, concurrency C) with a no-op
//                            handler, timed from the Worker's creation to
//                            run()'s return
// Prints one JSON line like every row of the bench.
#include <leases/leases.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/resource.h>

namespace {

using clk = std::chrono::steady_clock;
const std::string kProd = "bench";

double cpu_ns() {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
           double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

// Voluntary context switches of this process (all threads) so far.
double vcsw() {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_nvcsw);
}

double secs_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

leases::Authority filled(const char *db, long n) {
    auto auth = leases::Authority::open(db);
    auth.create_production(kProd);
    for (long i = 0; i < n; i++) {
        (void)auth.request_job(kProd, std::string(), std::string("payload-0123456789"));
    }
    return auth;
}

}  // namespace

int main(int argc, char **argv) try {
    if (argc != 4 && !(argc == 5 && std::string(argv[1]) == "worker")) {
        std::fprintf(stderr, "usage: cppbench cycle|boundary DB N | cppbench worker DB N C\n");
        return 2;
    }
    const std::string mode = argv[1];
    const long n = std::strtol(argv[3], nullptr, 10);
    if (mode == "worker") {
        auto auth = leases::Authority::open(argv[2]);
        std::atomic<long> handled{0};
        const double cpu0 = cpu_ns(), cs0 = vcsw();
        const auto t = clk::now();
        leases::WorkerOptions opt;
        opt.production = kProd;
        opt.worker = "w";
        opt.duration = std::chrono::minutes(1);
        opt.exit_when_empty = true;
        opt.concurrency = static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10));
        leases::Worker worker(auth, opt);
        const leases::WorkerReport report = worker.run([&handled](leases::Lease &) {
            handled.fetch_add(1);
            return std::string();
        });
        const double secs = secs_since(t);
        const double cpu = (cpu_ns() - cpu0) / double(n), cs = (vcsw() - cs0) / double(n);
        if (handled.load() != n || report.completed != static_cast<std::uint64_t>(n)) {
            std::fprintf(stderr, "cppbench: the handler ran %ld times and %llu jobs were completed, for %ld jobs\n",
                         handled.load(), static_cast<unsigned long long>(report.completed), n);
            return 1;
        }
        std::printf("{\"ops\":%ld,\"secs\":%.6f,\"cpu_ns\":%.0f,\"extra\":{\"vcsw\":%.3f}}\n", n, secs, cpu, cs);
        return 0;
    }
    if (mode == "cycle") {
        auto auth = filled(argv[2], n);
        const double cpu0 = cpu_ns();
        const auto t = clk::now();
        for (long i = 0; i < n; i++) {
            auto lease = auth.claim(kProd, "w", std::chrono::hours(1));
            lease->complete();
        }
        const double secs = secs_since(t);
        std::printf("{\"ops\":%ld,\"secs\":%.6f,\"cpu_ns\":%.0f}\n", n, secs, (cpu_ns() - cpu0) / double(n));
        return 0;
    }
    if (mode == "boundary") {
        auto auth = filled(argv[2], 1);
        auto lease = auth.claim(kProd, "w", std::chrono::hours(1));
        volatile std::uint32_t sink = 0;
        auto t = clk::now();
        for (long i = 0; i < n; i++) sink = sink + leases::abi_version();
        const double abi_ns = secs_since(t) * 1e9 / double(n);
        volatile std::int64_t sink64 = 0;
        t = clk::now();
        for (long i = 0; i < n; i++) sink64 = sink64 + lease->expiry_unix_us();
        const double exp_ns = secs_since(t) * 1e9 / double(n);
        std::printf("{\"ops\":%ld,\"ns_op\":%.2f,\"extra\":{\"expiry_ns\":%.2f}}\n", n, abi_ns, exp_ns);
        return 0;
    }
    std::fprintf(stderr, "cppbench: unknown mode %s\n", argv[1]);
    return 2;
} catch (const std::exception &e) {
    std::fprintf(stderr, "cppbench: %s\n", e.what());
    return 1;
}
