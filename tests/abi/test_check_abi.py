#!/usr/bin/env python3
"""Shows that every ABI check can fail: runs check_abi.py on a scratch copy
of the repository with one thing broken at a time. Usage:
test_check_abi.py ROOT RELEASE_SO TEST_SO"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT, SO, TEST_SO = (pathlib.Path(p).resolve() for p in sys.argv[1:4])
CHECK = ROOT / "tests/abi/check_abi.py"
failures = 0


def scratch():
    d = pathlib.Path(tempfile.mkdtemp(prefix="abi-selftest-"))
    for sub in ("include", "abi", "tests/vectors", "core"):
        shutil.copytree(ROOT / sub, d / sub, ignore=shutil.ignore_patterns("*_test.go", "store", "internal"))
    return d


def run(root, *extra):
    r = subprocess.run([sys.executable, str(CHECK), "--root", str(root), *extra], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, root, want_ok, needle="", extra=()):
    global failures
    code, out = run(root, *extra)
    ok = (code == 0) == want_ok and needle in out
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures += 1
        print(out)


def edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


d = scratch()
try:
    h = d / "include/leases.h"
    expect("test_unchanged_header_passes", d, True)
    edit(h, "leases_status leases_lease_renew(leases_lease *lease, int64_t duration_us)",
         "leases_status leases_lease_renew(leases_lease *the_lease, int64_t duration_us)")
    expect("test_renaming_a_parameter_needs_no_bump", d, True)
    edit(h, "leases_lease_renew(leases_lease *the_lease, int64_t duration_us)",
         "leases_lease_renew(leases_lease *the_lease, int32_t duration_us)")
    expect("test_changed_declaration_without_bump_fails_naming_the_projections", d, False,
           "bindings/python, bindings/cpp and bindings/rust")
    (d / "abi/VERSION").write_text("2\n")
    expect("test_abi_file_and_macro_must_agree", d, False, "LEASES_ABI_VERSION")
    edit(h, "#define LEASES_ABI_VERSION 1", "#define LEASES_ABI_VERSION 2")
    expect("test_bump_without_new_manifest_fails", d, False, "make abi-manifest")
    subprocess.run([sys.executable, str(CHECK), "--root", str(d), "--write-manifest"], check=True,
                   capture_output=True)
    expect("test_bump_with_new_manifest_passes", d, True)
    edit(h, "#define LEASES_MAX_NAME_LEN 200", "#define LEASES_MAX_NAME_LEN 201")
    (d / "abi/leases.abi").unlink()
    subprocess.run([sys.executable, str(CHECK), "--root", str(d), "--write-manifest"], check=True,
                   capture_output=True)
    expect("test_limits_must_equal_core_constants", d, False, "core.MaxNameLen")
    edit(h, "#define LEASES_MAX_NAME_LEN 201", "#define LEASES_MAX_NAME_LEN 200")
    edit(h, "#endif /* LEASES_H */", "#endif /* LEASES_H */\nint leases_no_guard;")
    expect("test_header_that_breaks_when_included_twice_fails", d, False, "twice")
finally:
    shutil.rmtree(d)

d = scratch()
try:
    expect("test_matching_symbols_pass", d, True, extra=("--so", str(SO), "--test-so", str(TEST_SO)))
    edit(d / "include/leases.h", "void leases_free(void *p);", "")
    subprocess.run([sys.executable, str(CHECK), "--root", str(d), "--write-manifest"], check=True,
                   capture_output=True)
    expect("test_exported_but_undeclared_symbol_fails", d, False, "exported but not declared",
           extra=("--so", str(SO)))
    expect("test_release_library_with_a_test_seam_fails", d, False, "test seam",
           extra=("--so", str(TEST_SO)))
finally:
    shutil.rmtree(d)

if failures:
    print(f"{failures} ABI self-test(s) failed")
    sys.exit(1)
print("ABI self-tests passed: every check can fail")
