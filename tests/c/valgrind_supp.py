#!/usr/bin/env python3
"""Writes tests/c/valgrind.supp: suppress memcheck reports whose innermost
frame is Go code or the Go runtime's own C glue. Valgrind does not understand
goroutine stacks (they live in Go-managed anonymous memory and move), so every
Go frame reads as invalid. Leaks are not suppressed: strings the library hands
to C are malloc'd by the shim (capi/shim.c, called from Go), and a leak of one must
fail the run. C frames (the shim, the tests, libc called on
memory we passed) are never suppressed, so errors there still fail the run.
Usage: valgrind_supp.py > tests/c/valgrind.supp"""

# Go symbols always contain a dot (package.Func); packages with a path also a
# slash. The listed prefixes are the standard-library packages without a slash
# that the library links; C functions never start with them.
GO_FRAMES = [
    "*/*", "runtime.*", "main.*", "sync.*", "syscall.*", "os.*", "time.*", "strings.*",
    "bytes.*", "fmt.*", "errors.*", "reflect.*", "strconv.*", "sort.*", "unicode.*",
    "context.*", "io.*", "math.*", "slices.*", "maps.*", "iter.*", "cmp.*", "type:*", "go:*",
    # the PostgreSQL store (pgx) adds these
    "net.*", "bufio.*", "regexp.*", "log.*", "crypto.*", "hash.*", "unique.*", "weak.*",
    "_cgoexp_*", "_cgo_*", "x_cgo_*", "crosscall*", "gcWriteBarrier*",
    # the runtime's assembly helpers have no package prefix: hashing and
    # comparing read whole 16-byte words past a string's end, by design
    "aeshashbody", "memeqbody", "indexbytebody", "countbody", "cmpbody", "indexbody",
    # the scheduler's assembly, also without a prefix: switching goroutine
    # stacks reads and writes the stack it leaves or enters (seen in the C++
    # worker-runtime suite under load, innermost frame gosave_systemstack_switch
    # or gogo, reached from runtime.schedule)
    "gogo", "gosave_systemstack_switch", "callRet", "debugCall*", "setg_gcc", "_rt0_amd64*",
    # the cryptography's assembly (TLS and SCRAM on PostgreSQL): P-256,
    # POLYVAL/GHASH, AES key expansion, and the runtime's AVX-512 expansions
    "p256*", "polyHashADInternal", "_expand_key_*", "expandAVX512_*",
]
KINDS = ["Addr1", "Addr2", "Addr4", "Addr8", "Addr16", "Addr32", "Value1", "Value2", "Value4",
         "Value8", "Value16", "Value32", "Cond"]
# A system call whose innermost frame is Go's syscall stub, given a buffer on
# a goroutine stack (the 8 bytes of an eventfd read when a timer wakes the
# netpoller, a stat buffer), reads as a bad parameter for the same reason.
# Memcheck matches the parameter's name exactly (no wildcards), so these are
# the pointer parameters, as valgrind names them, of the calls Go makes
# (valgrind names getrandom's buffer "cpu" in some reports: both are listed).
#
# Not only buffers: a scalar argument (a length, a descriptor, a flag) that Go
# computed from values on a goroutine stack reads as undefined too ("write(count)
# contains uninitialised byte(s)", seen once in the C++ two-store suite with the
# innermost frame Syscall6). Which argument memcheck flags depends on where the
# scheduler left the stacks, so one seen name at a time failed CI runs again and
# again: every parameter name memcheck knows (read from its binary, where each is
# a string such as "write(count)") is suppressed for Go frames. The names seen in
# reports are listed as well, so the file never loses them.
PARAM_FRAMES = ["*/*", "syscall.*", "runtime.*"]
MEMCHECK = "/usr/libexec/valgrind/memcheck-amd64-linux"
SEEN = [
    "read(buf)", "write(buf)", "pread64(buf)", "pwrite64(buf)", "fstat(buf)", "fstatat(buf)",
    "fstatat(file_name)", "lstat(buf)", "lstat(file_name)", "statx(buf)", "statx(filename)",
    "openat(filename)", "unlinkat(pathname)", "mkdirat(pathname)", "renameat(oldpath)",
    "renameat(newpath)", "renameat2(oldpath)", "renameat2(newpath)", "faccessat(pathname)",
    "faccessat2(pathname)", "fchmodat(path)", "fchownat(path)", "readlinkat(path)", "readlinkat(buf)",
    "utimensat(filename)", "getdents64(dirp)", "getcwd(buf)", "epoll_pwait(events)",
    "epoll_wait(events)", "epoll_ctl(event)", "getrandom(buf)", "getrandom(cpu)", "sched_getaffinity(mask)",
    "clock_gettime(tp)", "clock_nanosleep(rqtp)", "clock_nanosleep(rmtp)", "nanosleep(req)",
    "nanosleep(rem)", "rt_sigaction(act)", "rt_sigaction(oldact)", "rt_sigprocmask(set)",
    "rt_sigprocmask(oldset)", "sigaltstack(ss)", "sigaltstack(oss)", "pipe2(filedes)",
    "prlimit64(new_rlim)", "prlimit64(old_rlim)", "uname(buf)", "sysinfo(info)", "wait4(status)",
    "wait4(rusage)", "connect(serv_addr)", "bind(my_addr)", "accept4(addr)", "accept4(addrlen)",
    "recvfrom(fromlen)", "sendto(to)", "recvmsg(msg)", "sendmsg(msg)", "getsockopt(*optlen)",
    "timerfd_settime(utmr)", "timerfd_settime(otmr)", "ppoll(ufds)", "ppoll(tsp)", "futex(futex)",
    "futex(utime)",
    # a lock's struct flock, whose padding Go never writes: "contains
    # uninitialised byte(s)" (seen in the C suite, SQLite's file locks)
    "fcntl(lock)",
    # the path-taking calls under their older names (valgrind names the
    # argument per call: stat(file_name), open(filename), unlink(pathname))
    "stat(file_name)", "stat(buf)", "open(filename)", "unlink(pathname)", "access(pathname)",
    "mkdir(pathname)", "rmdir(pathname)", "rename(oldpath)", "rename(newpath)", "readlink(path)",
    "readlink(buf)", "chmod(path)", "truncate(path)", "creat(pathname)",
    # the SQLite watcher's path, on a goroutine stack
    "inotify_add_watch(path)",
    # pgx's socket options: syscall.SetsockoptInt passes &value, an int on a
    # goroutine stack (seen in the C++ two-store suites on PostgreSQL, with
    # the innermost frame internal/runtime/syscall/linux.Syscall6)
    "socketcall.setsockopt(optval)", "setsockopt(optval)",
    "read(count)", "write(count)", "pread64(count)", "pwrite64(count)",
]


def memcheck_params(path):
    """The system-call parameter names memcheck reports, e.g. "write(count)"."""
    import re
    with open(path, "rb") as f:
        data = f.read()
    names = re.findall(rb"(?<![\x21-\x7e])([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)?\([A-Za-z0-9_>*.-]+\))\x00", data)
    return {n.decode() for n in names}


PARAMS = sorted(set(SEEN) | memcheck_params(MEMCHECK))

print("# Generated by tests/c/valgrind_supp.py; see there for why.")
for frame in GO_FRAMES:
    for kind in KINDS:
        name = frame.replace("*", "_").replace("/", "_").replace(":", "_")
        print("{\n   go-%s-%s\n   Memcheck:%s\n   fun:%s\n}" % (name, kind, kind, frame))
for frame in PARAM_FRAMES:
    name = frame.replace("*", "_").replace("/", "_")
    for param in PARAMS:
        print("{\n   go-%s-Param-%s\n   Memcheck:Param\n   %s\n   fun:%s\n}" % (name, param, param, frame))
