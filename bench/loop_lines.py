#!/usr/bin/env python3
"""Lines of the worker loop's code per face, before the one loop and now.

    python3 bench/loop_lines.py [BEFORE [AFTER]]

BEFORE defaults to the first parent of the merge that brought
worker/loop/loop.go into the first-parent history (the four loops of their
own), AFTER to HEAD. Prints a Markdown table: per face, all lines of its loop
code and its code lines (no blank line, no comment-only line, no Python
docstring) at each commit. docs/workers.md ("Measured") shows its output.
"""

import io
import os
import re
import subprocess
import sys
import tokenize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)


def show(commit, path):
    r = git("show", f"{commit}:{path}")
    return r.stdout if r.returncode == 0 else ""


def region(text, start):
    """text from the first line matching start (None: all of it)."""
    if start is None:
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(start, line):
            return "".join(lines[i:])
    return ""


def code_lines_c(text):
    """Lines of Go, C++ or Rust that are neither blank nor comment only."""
    n, in_block = 0, False
    for line in text.splitlines():
        s = line.strip()
        if in_block:
            in_block = "*/" not in s
            continue
        if not s or s.startswith("//"):
            continue
        if s.startswith("/*"):
            in_block = "*/" not in s
            continue
        n += 1
    return n


def code_lines_py(text):
    """Lines of Python that are neither blank, comment only, nor docstring."""
    doc = set()
    prev = None
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        starts_statement = prev is None or prev.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.NL)
        if t.type == tokenize.STRING and starts_statement:
            doc.update(range(t.start[0], t.end[0] + 1))
        if t.type != tokenize.COMMENT:
            prev = t
    return sum(
        1
        for i, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and i not in doc
    )


# (face, [(path, first line of the region or None)], counter)
FACES = [
    ("Go `worker.Run` (`worker/worker.go`, `worker/signals.go`)",
     [("worker/worker.go", None), ("worker/signals.go", None)], code_lines_c),
    ("the one policy (`worker/loop/loop.go`)", [("worker/loop/loop.go", None)], code_lines_c),
    ("C: the `leases_worker_*` exports (`capi/worker.go`)", [("capi/worker.go", None)], code_lines_c),
    ("Python (`_worker.py`, `aio.py` from `class AsyncWorker`)",
     [("bindings/python/leases/_worker.py", None), ("bindings/python/leases/aio.py", r"^class AsyncWorker")],
     code_lines_py),
    ("C++ (`leases.hpp` from `// ---- worker`)", [("bindings/cpp/include/leases/leases.hpp", r"^// ---- worker")],
     code_lines_c),
    ("Rust (`worker.rs` from `// ---- worker`)", [("bindings/rust/src/worker.rs", r"^// ---- worker")], code_lines_c),
]


def count(commit):
    out = []
    for name, parts, counter in FACES:
        lines = code = 0
        for path, start in parts:
            text = region(show(commit, path), start)
            lines += len(text.splitlines())
            code += counter(text)
        out.append((name, lines, code))
    return out


def short(commit):
    return git("rev-parse", "--short", commit).stdout.strip()


def main(argv):
    if len(argv) > 1:
        before = argv[1]
    else:
        merges = git("log", "--first-parent", "--format=%H", "--", "worker/loop/loop.go").stdout.split()
        if not merges:
            print("loop_lines: worker/loop/loop.go is not in this history", file=sys.stderr)
            return 1
        before = merges[-1] + "^1"
    after = argv[2] if len(argv) > 2 else "HEAD"
    b, a = count(before), count(after)
    print(f"| loop code of | lines at `{short(before)}` | code lines | lines at `{short(after)}` | code lines |")
    print("|---|---:|---:|---:|---:|")
    for (name, l1, c1), (_, l2, c2) in zip(b, a):
        print(f"| {name} | {l1} | {c1} | {l2} | {c2} |")
    print(f"| **all** | {sum(x[1] for x in b)} | {sum(x[2] for x in b)} | {sum(x[1] for x in a)} | {sum(x[2] for x in a)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
