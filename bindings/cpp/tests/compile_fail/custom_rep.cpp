// Must NOT compile: a custom count type (here a wrapper around an integer)
// is not an integral type, so its conversion could round or overflow in ways
// the projection cannot check. With -DLEASES_EXPECT_COMPILES the same call
// with a plain integer compiles.
#include <leases/leases.hpp>

struct Ticks {
    long long v;
    constexpr Ticks() : v(0) {}
    constexpr Ticks(long long x) : v(x) {}  // NOLINT: implicit on purpose
    constexpr bool operator>(const Ticks &o) const { return v > o.v; }
    constexpr Ticks operator%(const Ticks &o) const { return Ticks(v % o.v); }
    constexpr Ticks operator/(const Ticks &o) const { return Ticks(v / o.v); }
};

void renew_with_a_custom_rep(leases::Lease &lease) {
#ifdef LEASES_EXPECT_COMPILES
    lease.renew(std::chrono::duration<long long>(30));
#else
    lease.renew(std::chrono::duration<Ticks>(Ticks(30)));
#endif
}
