#!/usr/bin/env python3
"""Checks that the repository stands alone: no tracked file refers to a
document or path outside it, and every relative Markdown link lands on a file
or folder of the repository. A maintainer who clones the repository must find
every rule in it (docs/DESIGN.md).

Usage: check_refs.py [--root DIR] [FILE...]
  With no FILE, checks every file git tracks under DIR (default: the current
  directory). Prints one line per finding, path:line: what, and exits 1 when
  there is any."""
import argparse
import pathlib
import re
import subprocess
import sys

# Text that points outside the repository: the workspace the project was
# first written in, and the design documents that lived there. Their content
# now lives in docs/DESIGN.md; a reference to them is a dead end for anyone
# with a clone.
# The outside names are assembled from parts, so that this file, which must
# name them to find them, is not itself a reference a scan would report.
_SHARED, _SPEC, _IFACES = "sha" + "red", "SP" + "EC", "INTER" + "FACES"
OUTSIDE = [
    (re.compile(r"\.\./" + _SHARED + r"\b"), "a path outside the repository (../" + _SHARED + ")"),
    (re.compile(r"(?<![\w.-])/work/"), "an absolute path of the development machine (/work/)"),
    (re.compile(r"\b" + _SHARED + r"/adr\b"), "the external decision record folder (" + _SHARED + "/adr)"),
    (re.compile(r"\b" + _SPEC + r"(?:\.md)?\b"), "the external specification (" + _SPEC + "); cite docs/DESIGN.md"),
    (re.compile(r"\b" + _IFACES + r"(?:\.md)?\b"), "the external interface list (" + _IFACES + "); cite docs/DESIGN.md or the surface's doc"),
    (re.compile(r"\badr[ /_-]?0057\b", re.IGNORECASE), "the external decision record (ADR 0057); cite docs/DESIGN.md"),
    (re.compile(r"\bdecision record\b", re.IGNORECASE), "the external decision record; cite docs/DESIGN.md"),
]

# This checker and its test spell the patterns out; nothing else may.
SELF = {"tests/refs/check_refs.py", "tests/refs/test_check_refs.py"}

INLINE_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def tracked(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def text_of(path):
    data = path.read_bytes()
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def check_outside(rel, text):
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, what in OUTSIDE:
            if pattern.search(line):
                yield f"{rel}:{n}: refers outside the repository: {what}"


def links(text):
    """Yields (line number, target) of every Markdown link outside code."""
    in_fence = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = CODE_SPAN.sub("", line)
        for m in INLINE_LINK.finditer(line):
            yield n, m.group(1)
        m = REFERENCE_LINK.match(line)
        if m:
            yield n, m.group(1)


def check_links(root, rel, text, present):
    base = pathlib.PurePosixPath(rel).parent
    for n, target in links(text):
        if SCHEME.match(target) or target.startswith("#"):
            continue  # a web address or an anchor of this page
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            continue
        # As on the forges, a leading / is the repository's root.
        joined = pathlib.PurePosixPath(path.lstrip("/")) if path.startswith("/") else base / path
        parts = []
        outside = False
        for part in joined.parts:
            if part == "..":
                if not parts:
                    outside = True
                    break
                parts.pop()
            elif part != ".":
                parts.append(part)
        if outside:
            yield f"{rel}:{n}: link {target} leads outside the repository"
            continue
        resolved = "/".join(parts)
        if resolved and resolved not in present:
            yield f"{rel}:{n}: link {target} names a file the repository does not have ({resolved})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = pathlib.Path(args.root).resolve()
    files = args.files or tracked(root)
    if args.files:
        files = [str(pathlib.Path(f).resolve().relative_to(root)) for f in files]
    # What a link may land on: a tracked file, or a folder holding one. Given
    # explicit files (the checker's own tests), whatever exists under root.
    if args.files:
        present = {str(p.relative_to(root)) for p in root.rglob("*")}
    else:
        present = set(files)
        for f in files:
            for parent in pathlib.PurePosixPath(f).parents:
                present.add(str(parent))
    findings = []
    for rel in sorted(files):
        if rel in SELF:
            continue
        path = root / rel
        if not path.is_file():
            continue
        text = text_of(path)
        if text is None:
            continue
        findings += check_outside(rel, text)
        if rel.endswith(".md"):
            findings += check_links(root, rel, text, present)
    for f in findings:
        print(f)
    if findings:
        print(f"check_refs: {len(findings)} reference(s) outside the repository or to missing files", file=sys.stderr)
        return 1
    print(f"check_refs: {len(files)} files refer only to the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())
