#!/usr/bin/env python3
"""Shows that check_refs.py can fail: feeds it files that refer outside a
scratch repository, one rule at a time, and a clean file it must accept; then
runs it on a scratch git repository, as `make test` runs it on this one.
Usage: test_check_refs.py"""
import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).resolve().parent / "check_refs.py"
failures = 0


def run(root, *files):
    r = subprocess.run([sys.executable, str(CHECK), "--root", str(root), *map(str, files)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(name, ok, out):
    global failures
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures += 1
        print(out)


with tempfile.TemporaryDirectory(prefix="refs-selftest-") as tmp:
    root = pathlib.Path(tmp) / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "core").mkdir()
    (root / "docs/CLOCK.md").write_text("# Clock\n")
    (root / "core/guard.go").write_text("package core\n")

    # Each bad line, alone in a file, must be reported with its line number.
    # The outside names are assembled, as in check_refs.py, so that this
    # file is no reference itself.
    shared, spec, ifaces = "sha" + "red", "SP" + "EC", "INTER" + "FACES"
    bad = {
        "a relative path to the workspace": f"see ../{shared}/notes.md",
        "an absolute workspace path": "built in /work/wt/x",
        "the record's folder": f"rules of {shared}/adr",
        "the spec by file name": f"as {spec}.md says",
        "the spec by name": f'{spec} "Clock policy"',
        "the interface list by file name": f"names from {ifaces}.md",
        "the interface list by name": f"beyond {ifaces}",
        "the record by number": "(ADR 0057)",
        "the record by path": "adr/0057-leases.md",
        "the record by phrase": "exactly as the decision record requires",
        "a Markdown link to a missing file": "see [the table](errors.md)",
        "a Markdown link out of the repository": "see [notes](../../outside.md)",
        "a Markdown link from the root to a missing file": "see [x](/docs/nope.md)",
        "a reference-style link to a missing file": "[spec]: ../missing.md",
        "a Markdown link to a missing file, with an anchor": "[x](CLOCK2.md#limits)",
    }
    for name, line in bad.items():
        f = root / "docs/bad.md"
        f.write_text(f"# Title\n\nfine text\n{line}\n")
        code, out = run(root, f)
        expect("rejects " + name, code == 1 and "docs/bad.md:4:" in out, out)
    # In Go, C or shell files the words count too (comments are read as text).
    go = root / "core/bad.go"
    go.write_text(f"// Package core: every rule of {shared}/adr/0057 lives here.\npackage core\n")
    code, out = run(root, go)
    expect("rejects a reference in a Go comment", code == 1 and "core/bad.go:1:" in out, out)
    go.unlink()

    good = root / "docs/good.md"
    good.write_text("""# Good

Links to [the clock](CLOCK.md), [its limits](CLOCK.md#limits), [a folder](../core),
[the guard](../core/guard.go), [from the root](/docs/CLOCK.md), [the web](https://example.com/guide),
[an anchor](#good) and [mail](mailto:someone@example.com) are fine.

```go
x := m[k](y) // code is not a link: [a](missing.md)
```

`[not a link](missing.md)` in a code span is not one either.
""")
    code, out = run(root, good)
    expect("accepts links that land in the repository", code == 0, out)

    # As make test runs it: every tracked file of a git repository, where an
    # untracked file does not count as a link target.
    (root / "docs/bad.md").unlink()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "docs/untracked.md").write_text("not added\n")
    subprocess.run(["git", "-C", str(root), "add", "docs/CLOCK.md", "core/guard.go", "docs/good.md"], check=True)
    code, out = run(root)
    expect("accepts a clean repository", code == 0, out)
    (root / "docs/good.md").write_text("[x](untracked.md)\n")
    code, out = run(root)
    expect("rejects a link to a file git does not track", code == 1 and "untracked.md" in out, out)

print(f"test_check_refs: {'all checks can fail' if not failures else f'{failures} failure(s)'}")
sys.exit(1 if failures else 0)
