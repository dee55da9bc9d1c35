#!/usr/bin/env python3
"""Shows that every ABI check can fail: runs abi/leases_abi.py on a scratch
copy of the repository with one thing broken at a time. Usage:
test_leases_abi.py ROOT RELEASE_SO TEST_SO"""
import contextlib
import importlib.util
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


@contextlib.contextmanager
def scratch_copy():
    d = scratch()
    try:
        yield d
    finally:
        shutil.rmtree(d)


def not_wrapped():
    """The tool's NOT_WRAPPED entries."""
    spec = importlib.util.spec_from_file_location("leases_abi", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.NOT_WRAPPED


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


# Minimal uses of leases_lease_touch, one per binding, standing for its wrappers.
WRAPPERS = {
    "bindings/python/leases/_lease.py": "\n_TOUCH = \"leases_lease_touch\"\n",
    "bindings/cpp/include/leases/leases.hpp": "\ninline void touch(leases_lease *l) { leases_lease_touch(l); }\n",
    "bindings/rust/src/lib.rs": "\nfn _touch(l: *mut sys::leases_lease) { unsafe { sys::leases_lease_touch(l); } }\n",
}


def revision(d):
    return int((d / "abi/REVISION").read_text())


def freeze(d):
    """Releases the current revision: its header is frozen into abi/history, so
    what it declares never changes and additions need the next revision."""
    shutil.copy(d / "include/leases.h", d / f"abi/history/leases.1.{revision(d)}.h")


with scratch_copy() as d:
    h = d / "include/leases.h"
    r = revision(d)
    edit(h, ANCHOR, NEW_FUNCTION + ANCHOR)
    bump_revision(d, r + 1)
    expect("test_bumping_past_an_open_revision_fails", d, False, f"revision {r} is still open",
           args=("generate",))
    bump_revision(d, r)
    code, out = run(d, "generate")
    assert code == 0, out
    assert f"{r} function leases_status leases_lease_touch(leases_lease*)" in (d / "abi/leases.abi").read_text()
    for rel, use in WRAPPERS.items():
        with open(d / rel, "a") as f:
            f.write(use)
    expect("test_an_open_revision_takes_additions_without_a_bump", d, True)
    edit(h, "leases_lease_touch(leases_lease *lease);", "leases_lease_touch(leases_lease *lease, int64_t flags);")
    run(d, "generate")
    expect("test_a_declaration_of_an_open_revision_may_still_change", d, True)
    assert "leases_lease_touch(leases_lease*, int64_t)" in (d / "abi/leases.abi").read_text()


with scratch_copy() as d:
    freeze(d)
    h = d / "include/leases.h"
    r = revision(d)
    expect("test_unchanged_header_passes", d, True)
    edit(h, "leases_status leases_lease_renew(leases_lease *lease, int64_t duration_us)",
         "leases_status leases_lease_renew(leases_lease *the_lease, int64_t duration_us)")
    before = (d / "abi/leases.abi").read_text()
    expect("test_renaming_a_parameter_needs_only_regeneration", d, False, "bindings/rust/src/sys.rs is not what")
    run(d, "generate")
    assert (d / "abi/leases.abi").read_text() == before
    expect("test_renaming_a_parameter_keeps_the_manifest", d, True)

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
    expect("test_a_new_function_no_binding_wraps_fails_naming_each_binding", d, False,
           "the Python binding (bindings/python/leases) does not wrap: leases_lease_touch")
    for rel, use in WRAPPERS.items():
        with open(d / rel, "a") as f:
            f.write(use)
    expect("test_generate_records_the_addition_at_the_new_revision_and_maps_it", d, True)
    # A function listed as not wrapped that its binding does wrap: the entry
    # must go, so that the list never hides a binding's later regression.
    lang, name = next(iter(not_wrapped()))
    rel = {"Python": "bindings/python/leases/_lease.py", "C++": "bindings/cpp/include/leases/leases.hpp",
           "Rust": "bindings/rust/src/lib.rs"}[lang]
    use = {"Python": f'\n_USED = "{name}"\n', "C++": f"\n// {name}\ninline auto used_ = &{name};\n",
           "Rust": f"\nconst _USED: *const () = sys::{name} as *const ();\n"}[lang]
    original = (d / rel).read_text()
    with open(d / rel, "a") as f:
        f.write(use)
    expect("test_a_not_wrapped_entry_for_a_function_a_binding_wraps_fails", d, False,
           f"wraps {name}: remove the NOT_WRAPPED entry")
    (d / rel).write_text(original)
    status = d / "bindings/python/leases/_abi.py"
    assert '"leases_lease_touch": (c_status, [LeasePtr])' in status.read_text()
    assert "pub fn leases_lease_touch(lease: *mut leases_lease) -> leases_status;" in \
        (d / "bindings/rust/src/sys.rs").read_text()

    (d / "capi/leases.map").write_text((d / "capi/leases.map").read_text().replace("leases_lease_touch", "leases_x"))
    expect("test_a_hand_edited_version_script_fails", d, False, "capi/leases.map")
    run(d, "generate")

    edit(h, "void leases_free(void *p);", "/* (removed) */")
    expect("test_removing_a_declaration_of_a_released_revision_fails", d, False,
           "a declaration of revision 0 changed or disappeared")
    edit(h, "/* (removed) */", "void leases_free(void *p);")

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

    edit(d / "docs/errors.md", "| 17 | `forked`", "| 17 | `forkd`")
    expect("test_a_hand_edited_generated_block_fails", d, False, "docs/errors.md is not what")
    edit(d / "docs/errors.md", "<!-- END GENERATED -->", "")
    expect("test_a_file_without_its_markers_fails", d, False, "docs/errors.md: lacks the markers")
    shutil.copy(ROOT / "docs/errors.md", d / "docs/errors.md")
    run(d, "generate")
    expect("test_restored_generated_files_pass", d, True)
    edit(h, "#endif /* LEASES_H */", "#endif /* LEASES_H */\nint leases_no_guard;")
    expect("test_header_that_breaks_when_included_twice_fails", d, False, "twice")

with scratch_copy() as d:
    freeze(d)
    h = d / "include/leases.h"
    r = revision(d)
    # The next free status code, whatever the header has now.
    statuses = h.read_text().split("typedef int leases_status;", 1)[1].split("/* ----", 1)[0]
    n = 1 + max(int(c) for c in re.findall(r"#define LEASES_\w+ (\d+)", statuses))
    edit(h, "/* ---- library", f"#define LEASES_TIRED {n} /* too tired */\n\n/* ---- library")
    bump_revision(d, r + 1)
    code, out = run(d, "generate")
    assert code == 0, out
    assert '"name": "tired"' in (d / "tests/vectors/statuses.json").read_text()
    assert '"tired", /* LEASES_TIRED */' in (d / "capi/status_names.h").read_text()
    assert f'({n}, "tired", "TiredError")' in (d / "bindings/python/leases/_abi.py").read_text()
    assert "LEASES_HPP_ERROR_CLASS(TiredError, Error, LEASES_TIRED);  // too tired" in \
        (d / "bindings/cpp/include/leases/leases.hpp").read_text()
    assert "ErrorKind::Tired => \"tired\"," in (d / "bindings/rust/src/error.rs").read_text()
    assert f"| {n} | `tired` | `LEASES_TIRED` | `TiredError` | `Tired` | `ErrTired` | too tired |" in \
        (d / "docs/errors.md").read_text()
    expect("test_a_new_status_core_errors_go_lacks_fails", d, False, "core/errors.go's kinds")
    edit(h, f"#define LEASES_TIRED {n} /* too tired */", f"#define LEASES_TIRED {n + 1} /* too tired */")
    expect("test_a_status_gap_fails", d, False, "without gaps")

with scratch_copy() as d:
    hist = d / "abi/history/leases.1.0.h"
    edit(hist, "void leases_free(void *p);", "void leases_free(void *p);\nvoid leases_free2(void *p);")
    expect("test_a_history_header_declaring_what_its_revision_lacks_fails", d, False, "leases.1.0.h declares")

with scratch_copy() as d:
    so_args = ("check", "--so", str(SO), "--test-so", str(TEST_SO))
    expect("test_matching_library_passes", d, True, args=so_args)
    freeze(d)
    r = revision(d)
    edit(d / "include/leases.h", ANCHOR, NEW_FUNCTION + ANCHOR)
    bump_revision(d, r + 1)
    run(d, "generate")
    expect("test_a_declared_function_the_library_lacks_fails", d, False,
           "declared but not exported: leases_lease_touch", args=so_args)
    expect("test_a_library_answering_an_older_revision_fails", d, False,
           f"leases_abi_revision() returns {r} but include/leases.h says {r + 1}", args=so_args)

with scratch_copy() as d:
    m = d / "abi/leases.abi"
    edit(m, "0 function leases_status leases_lease_release(leases_lease*)",
         "1 function leases_status leases_lease_release(leases_lease*)")
    run(d, "generate")  # the map follows the (wrong) manifest
    expect("test_a_function_exported_at_another_revision_than_recorded_fails", d, False,
           "leases_lease_release has the symbol version LEASES_1.0, but abi/leases.abi records it at LEASES_1.1",
           args=("check", "--so", str(SO)))
    expect("test_release_library_with_a_test_seam_fails", d, False, "test seam", args=("check", "--so", str(TEST_SO)))

if failures:
    print(f"{failures} ABI self-test(s) failed")
    sys.exit(1)
print("ABI self-tests passed: every check can fail")
