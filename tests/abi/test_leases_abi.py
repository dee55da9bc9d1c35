#!/usr/bin/env python3
"""Shows that every ABI check can fail: runs abi/leases_abi.py on a scratch
copy of the repository with one thing broken at a time. Usage:
test_leases_abi.py ROOT RELEASE_SO TEST_SO"""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT, SO, TEST_SO = (pathlib.Path(p).resolve() for p in sys.argv[1:4])
TOOL = ROOT / "abi/leases_abi.py"
# What the tool reads or writes; everything else of the checkout is not needed.
COPIED = ("include", "abi", "capi", "tests/vectors", "core", "bindings", "docs")
failures = 0


def scratch():
    d = pathlib.Path(tempfile.mkdtemp(prefix="abi-selftest-"))
    for sub in COPIED:
        shutil.copytree(ROOT / sub, d / sub, symlinks=True,
                        ignore=shutil.ignore_patterns("*_test.go", "store", "internal", "target", "__pycache__",
                                                      "*.go", "*.c") if sub != "core" else
                        shutil.ignore_patterns("*_test.go", "store", "internal"))
    return d


def run(root, *args):
    r = subprocess.run([sys.executable, str(TOOL), "--root", str(root), *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, root, want_ok, needle="", args=("check",)):
    global failures
    code, out = run(root, *args)
    ok = (code == 0) == want_ok and needle in out
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures += 1
        print(out)


def edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def bump_revision(d, to):
    """Sets the revision of the header and of abi/REVISION to `to`."""
    h = d / "include/leases.h"
    h.write_text(re.sub(r"#define LEASES_ABI_REVISION \d+", f"#define LEASES_ABI_REVISION {to}", h.read_text()))
    (d / "abi/REVISION").write_text(f"{to}\n")


NEW_FUNCTION = "leases_status leases_lease_touch(leases_lease *lease);\n"
ANCHOR = "/* ---- edits (one write transaction)"


def revision(d):
    return int((d / "abi/REVISION").read_text())


d = scratch()
try:
    h = d / "include/leases.h"
    r = revision(d)
    expect("test_unchanged_header_passes", d, True)
    edit(h, "leases_status leases_lease_renew(leases_lease *lease, int64_t duration_us)",
         "leases_status leases_lease_renew(leases_lease *the_lease, int64_t duration_us)")
    expect("test_renaming_a_parameter_changes_nothing", d, True)

    edit(h, ANCHOR, NEW_FUNCTION + ANCHOR)
    expect("test_new_declaration_without_revision_bump_fails", d, False, "without a revision bump")
    expect("test_generate_refuses_a_new_declaration_without_revision_bump", d, False, "without a revision bump",
           args=("generate",))
    bump_revision(d, r + 1)
    expect("test_bumped_revision_without_generate_fails", d, False, "make abi-generate")
    (d / "abi/REVISION").write_text(f"{r}\n")
    code, _ = run(d, "generate")
    expect("test_abi_REVISION_and_the_header_must_agree", d, False, "abi/REVISION")
    (d / "abi/REVISION").write_text(f"{r + 1}\n")
    code, out = run(d, "generate")
    assert code == 0, out
    manifest = (d / "abi/leases.abi").read_text()
    assert f"{r + 1} function leases_status leases_lease_touch(leases_lease*)" in manifest, manifest
    assert f"LEASES_1.{r + 1} {{\n  global:\n    leases_lease_touch;\n}} LEASES_1.{r};" in \
        (d / "capi/leases.map").read_text()
    expect("test_generate_records_the_addition_at_the_new_revision_and_maps_it", d, True)

    (d / "capi/leases.map").write_text((d / "capi/leases.map").read_text().replace("leases_lease_touch", "leases_x"))
    expect("test_a_hand_edited_version_script_fails", d, False, "capi/leases.map")
    run(d, "generate")

    edit(h, "leases_status leases_lease_touch(leases_lease *lease);", "")
    expect("test_removing_a_declaration_of_an_earlier_revision_fails", d, False,
           f"a declaration of revision {r + 1} changed or disappeared")
    edit(h, ANCHOR, NEW_FUNCTION + ANCHOR)

    edit(h, "leases_lease_renew(leases_lease *the_lease, int64_t duration_us)",
         "leases_lease_renew(leases_lease *the_lease, int32_t duration_us)")
    expect("test_changing_a_declaration_of_revision_0_fails_even_with_a_bump", d, False,
           "a declaration of revision 0 changed or disappeared")
    edit(h, "int32_t duration_us", "int64_t duration_us")

    edit(h, "#define LEASES_ABI_VERSION 1", "#define LEASES_ABI_VERSION 2")
    expect("test_changing_the_abi_number_fails", d, False, "breaking change")
    edit(h, "#define LEASES_ABI_VERSION 2", "#define LEASES_ABI_VERSION 1")

    bump_revision(d, r + 2)
    expect("test_a_revision_bump_that_adds_nothing_fails", d, False, "adds nothing")
    bump_revision(d, r + 1)
    edit(h, "#define LEASES_ABI_REVISION", "#define LEASES_ABI_REVISION_X")  # revision missing
    expect("test_a_header_without_a_revision_fails", d, False, "LEASES_ABI_REVISION is None")
    edit(h, "#define LEASES_ABI_REVISION_X", "#define LEASES_ABI_REVISION")

    edit(h, "#define LEASES_MAX_NAME_LEN 200", "#define LEASES_MAX_NAME_LEN 201")
    expect("test_changing_a_limit_fails", d, False, "define LEASES_MAX_NAME_LEN 200")
    edit(h, "#define LEASES_MAX_NAME_LEN 201", "#define LEASES_MAX_NAME_LEN 200")
    expect("test_restored_header_passes_again", d, True)

    edit(h, "#endif /* LEASES_H */", "#endif /* LEASES_H */\nint leases_no_guard;")
    expect("test_header_that_breaks_when_included_twice_fails", d, False, "twice")
finally:
    shutil.rmtree(d)

d = scratch()
try:
    hist = d / "abi/history/leases.1.0.h"
    edit(hist, "void leases_free(void *p);", "void leases_free(void *p);\nvoid leases_free2(void *p);")
    expect("test_a_history_header_declaring_what_its_revision_lacks_fails", d, False, "leases.1.0.h declares")
finally:
    shutil.rmtree(d)

d = scratch()
try:
    so_args = ("check", "--so", str(SO), "--test-so", str(TEST_SO))
    expect("test_matching_library_passes", d, True, args=so_args)
    r = revision(d)
    edit(d / "include/leases.h", ANCHOR, NEW_FUNCTION + ANCHOR)
    bump_revision(d, r + 1)
    run(d, "generate")
    expect("test_a_declared_function_the_library_lacks_fails", d, False,
           "declared but not exported: leases_lease_touch", args=so_args)
    expect("test_a_library_answering_an_older_revision_fails", d, False,
           f"leases_abi_revision() returns {r} but include/leases.h says {r + 1}", args=so_args)
finally:
    shutil.rmtree(d)

d = scratch()
try:
    m = d / "abi/leases.abi"
    edit(m, "0 function leases_status leases_lease_release(leases_lease*)",
         "1 function leases_status leases_lease_release(leases_lease*)")
    run(d, "generate")  # the map follows the (wrong) manifest
    expect("test_a_function_exported_at_another_revision_than_recorded_fails", d, False,
           "leases_lease_release has the symbol version LEASES_1.0, but abi/leases.abi records it at LEASES_1.1",
           args=("check", "--so", str(SO)))
    expect("test_release_library_with_a_test_seam_fails", d, False, "test seam", args=("check", "--so", str(TEST_SO)))
finally:
    shutil.rmtree(d)

if failures:
    print(f"{failures} ABI self-test(s) failed")
    sys.exit(1)
print("ABI self-tests passed: every check can fail")
