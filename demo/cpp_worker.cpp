// Demo worker in C++: a leases::Worker (waiting claims, each lease kept alive)
// on one production until the queue is empty and the stop file exists; it
// writes each job's output through an execution request (temporary file,
// then fsync + rename + completion by the library) with metadata. Prints no
// token: only counts on exit.
//
//   cpp_worker DB PRODUCTION WORKER WORK_MS STOP_FILE OUTPUT_DIR
#include <leases/leases.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    if (argc != 7) {
        std::cerr << "usage: cpp_worker DB PRODUCTION WORKER WORK_MS STOP_FILE OUTPUT_DIR\n";
        return 2;
    }
    const std::string db = argv[1], production = argv[2], worker = argv[3];
    const auto work = std::chrono::milliseconds(std::stoi(argv[4]));
    const std::string stop_file = argv[5], output_dir = argv[6];
    auto stopped = [&] { struct stat st; return stat(stop_file.c_str(), &st) == 0; };

    std::uint64_t done = 0;
    try {
        leases::Authority auth = leases::Authority::open(db);
        leases::WorkerOptions options;
        options.production = production;
        options.worker = worker;
        options.duration = 10s;         // kept alive while the job runs
        options.exit_when_empty = true; // back here when a 100 ms wait found nothing
        leases::Worker loop(auth, options);
        // Waiting claims, no polling: run() returns only once the queue is
        // empty, and the stop file is looked at then.
        while (true) {
            const leases::WorkerReport report = loop.run([&](leases::Lease &lease) {
                const std::vector<std::uint8_t> bytes = lease.payload();
                const std::string payload(bytes.begin(), bytes.end());
                leases::Execution run = lease.execution(output_dir);
                std::this_thread::sleep_for(work);
                std::ofstream(run.temp_path(), std::ios::binary) << "rendered by " << worker << ": " << payload << "\n";
                // Completes the job registering the output; a job cancelled
                // meanwhile throws here, and the library removed our files.
                run.finish(R"({"metadata": {"bytes": )" + std::to_string(payload.size()) +
                           R"(, "language": "c++"}, "provenance": {"worker": ")" + worker + R"("}})");
                return std::string();
            });
            done += report.by_handler;
            if (stopped()) break;
        }
    } catch (const leases::Error &e) {
        std::cerr << worker << ": " << e.name() << ": " << e.what() << "\n";
        return 1;
    }
    std::cerr << worker << ": " << done << " job(s) completed\n";
    return 0;
}
