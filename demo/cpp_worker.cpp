// Demo worker in C++: claims jobs of one production until the stop file
// exists, writes each job's output through an execution request (temporary
// file, then fsync + rename + completion by the library), and completes it
// with metadata. Prints no token: only counts on exit.
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

    int done = 0;
    try {
        leases::Authority auth = leases::Authority::open(db);
        while (true) {
            std::optional<leases::Lease> lease;
            try {
                lease = auth.claim(production, worker, 10s);
            } catch (const leases::BusyError &) {
                continue;
            }
            if (!lease) {
                if (stopped()) break;
                std::this_thread::sleep_for(50ms);
                continue;
            }
            try {
                const std::vector<std::uint8_t> bytes = lease->payload();
                const std::string payload(bytes.begin(), bytes.end());
                leases::Execution run = lease->execution(output_dir);
                std::this_thread::sleep_for(work);
                std::ofstream(run.temp_path(), std::ios::binary) << "rendered by " << worker << ": " << payload << "\n";
                run.finish(R"({"metadata": {"bytes": )" + std::to_string(payload.size()) +
                           R"(, "language": "c++"}, "provenance": {"worker": ")" + worker + R"("}})");
                ++done;
            } catch (const leases::Error &e) {  // e.g. cancelled meanwhile: the library removed our files
                std::cerr << worker << ": job " << lease->job_id() << ": " << e.name() << "\n";
            }
        }
    } catch (const leases::Error &e) {
        std::cerr << worker << ": " << e.name() << ": " << e.what() << "\n";
        return 1;
    }
    std::cerr << worker << ": " << done << " job(s) completed\n";
    return 0;
}
