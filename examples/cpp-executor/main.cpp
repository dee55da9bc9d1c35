// cpp-executor: a reference executor over the C++ projection. It claims the
// jobs of a production one by one, writes each output through an execution
// request (temporary file, then fsync + rename by the library), renews the
// lease while it works, and completes with metadata and provenance.
//
//   cpp-executor --db FILE --production P --output-dir DIR [--worker W] [--seed N]
//
// --seed N first requests N jobs (a demo convenience; a real coordinator
// requests jobs elsewhere). Exit status: 0 when at least one job was done,
// 3 when there was nothing to claim, 1 on any error (like the CLI).
#include <leases/leases.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

using namespace std::chrono_literals;

namespace {

struct Options {
    std::string db, production, output_dir, worker = "cpp-executor";
    int seed = 0;
};

bool parse(int argc, char **argv, Options &o) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) return false;
        const std::string value = argv[++i];
        if (arg == "--db") o.db = value;
        else if (arg == "--production") o.production = value;
        else if (arg == "--output-dir") o.output_dir = value;
        else if (arg == "--worker") o.worker = value;
        else if (arg == "--seed") o.seed = std::stoi(value);
        else return false;
    }
    return !o.db.empty() && !o.production.empty() && !o.output_dir.empty();
}

// The "work": a small deterministic output per job.
std::string render(const leases::Lease &lease) {
    return "output of job " + lease.job_id() + " in production " + lease.production() + "\n";
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::cerr << "usage: cpp-executor --db FILE --production P --output-dir DIR [--worker W] [--seed N]\n";
        return 2;
    }
    try {
        leases::Authority auth = leases::Authority::open(o.db);
        auth.create_production(o.production);
        for (int i = 0; i < o.seed; ++i) {
            (void)auth.request_job(o.production, "seed-" + std::to_string(i), "payload " + std::to_string(i));
        }

        int done = 0;
        while (std::optional<leases::Lease> lease = auth.claim(o.production, o.worker, 30s)) {
            leases::Execution run = lease->execution(o.output_dir);
            const std::string output = render(*lease);
            {
                std::ofstream out(run.temp_path(), std::ios::binary | std::ios::trunc);
                out << output;
                if (!out.flush()) {
                    std::cerr << "cannot write " << run.temp_path() << "\n";
                    run.abandon();  // removes only this run's files
                    lease->fail("cannot write the output file");
                    return 1;
                }
            }
            lease->renew(30s);  // a long job renews before its expiry
            const std::string final_path = run.final_path();
            run.finish(R"({"metadata": {"bytes": )" + std::to_string(output.size()) +
                       R"(}, "provenance": {"tool": "cpp-executor", "libleases": ")" + leases::version() +
                       R"("}})");
            std::cout << "completed " << lease->job_id() << " -> " << final_path << "\n";
            ++done;
        }
        std::cout << done << " job(s) completed\n";
        return done > 0 ? 0 : 3;
    } catch (const leases::Error &e) {
        std::cerr << "cpp-executor: " << e.name() << ": " << e.what() << "\n";
        return 1;
    }
}
