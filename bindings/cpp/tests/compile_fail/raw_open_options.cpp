// Must NOT compile with -Werror=deprecated-declarations: C++ opens with its
// own leases::OpenOptions; the raw C struct leases_open_options of 0.1.0 is
// deprecated. Built with -DLEASES_EXPECT_COMPILES (the same options, typed)
// it must compile, so the failure is the raw struct's.
#include <leases/leases.hpp>

leases::Authority open_must_exist(const std::string &path) {
#ifdef LEASES_EXPECT_COMPILES
    leases::OpenOptions o;
    o.must_exist = true;
    return leases::Authority::open(path, o);
#else
    leases_open_options o = LEASES_OPEN_OPTIONS_INIT;
    o.flags = LEASES_OPEN_MUST_EXIST;
    return leases::Authority::open(path, o);
#endif
}
