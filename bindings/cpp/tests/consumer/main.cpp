// Installed-package smoke test: the header, the library and the ABI agree,
// and one claim round-trips.
#include <leases/leases.hpp>

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: consumer DB\n");
        return 2;
    }
    using namespace std::chrono_literals;
    try {
        auto auth = leases::Authority::open(argv[1]);  // checks the ABI number
        auth.create_production("consumer");
        const std::string id = auth.request_job("consumer");
        auto lease = auth.claim("consumer", "consumer", 5s);
        if (!lease || lease->job_id() != id) {
            std::fprintf(stderr, "claim did not return the requested job\n");
            return 1;
        }
        lease->complete();
        std::printf("consumer: libleases %s, ABI %u: ok\n", leases::version().c_str(), leases::abi_version());
        return 0;
    } catch (const leases::Error &e) {
        std::fprintf(stderr, "consumer: %s: %s\n", e.name(), e.what());
        return 1;
    }
}
