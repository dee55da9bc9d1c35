"""Writes THIRD_PARTY_LICENSES.md: every dependency of libleases with its
version and license, read from where each ecosystem keeps them, never copied
by hand, and fails when a license is not one libleases (Apache-2.0) may use.

- Go: the modules go.mod requires, their license files in the module cache
  (`go mod download -json` names each module's directory; it downloads a
  missing one through GOPROXY), classified by their well-known text; the Go
  standard library and runtime (GOROOT/LICENSE) too. Which modules end up in
  libleases.so and in the CLI is `go list -deps` of ./capi and ./cmd/leases.
- Rust: bindings/rust/Cargo.lock through `cargo metadata --locked` (the
  license field of each crate's manifest).
- Python: the pins of bindings/python/requirements-dev.txt, read from the
  distributions installed in the venv (`make python-venv`); the wheel itself
  depends on nothing.

Usage: licenses.py ROOT PYTHON OUT             write OUT
       licenses.py ROOT PYTHON --check FILE    fail if FILE is not what would be written
"""
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

# Licenses that allow use in, and distribution with, an Apache-2.0 project.
# MPL-2.0 is file-level copyleft: using unmodified files is allowed.
ALLOWED = {"Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Unlicense", "Unicode-3.0",
           "Unicode-DFS-2016", "MPL-2.0", "Zlib", "0BSD", "PSF-2.0", "CC0-1.0"}

# Well-known license texts, by phrases each one has and the others lack
# (whitespace and case folded). Order matters only for the BSD pair.
TEXTS: List[Tuple[str, List[str], List[str]]] = [
    ("Apache-2.0", ["apache license", "version 2.0"], []),
    ("MIT", ["permission is hereby granted, free of charge, to any person obtaining a copy"], []),
    ("BSD-3-Clause", ["redistribution and use in source and binary forms"],
     ["neither the name", "names of its contributors"]),
    ("BSD-2-Clause", ["redistribution and use in source and binary forms"], []),
    ("ISC", ["permission to use, copy, modify, and/or distribute this software for any purpose"], []),
    ("MPL-2.0", ["mozilla public license", "2.0"], []),
    ("Unlicense", ["this is free and unencumbered software released into the public domain"], []),
]
LICENSE_FILES = ["LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "COPYING", "COPYING.md"]


def classify_text(text: str) -> Optional[str]:
    """The SPDX id of a well-known license text; several ANDed when a file
    carries several licenses (e.g. parts MIT, parts Apache-2.0)."""
    flat = " ".join(text.lower().split())
    found: List[str] = []
    for spdx, needed, any_of in TEXTS:
        if all(p in flat for p in needed) and (not any_of or any(p in flat for p in any_of)):
            if spdx == "BSD-2-Clause" and "BSD-3-Clause" in found:
                continue
            found.append(spdx)
    return " AND ".join(found) if found else None


def allowed(expression: str) -> bool:
    """Whether an SPDX expression (AND, OR, parentheses) allows use here: an
    OR needs one allowed side, an AND both."""
    tokens = re.findall(r"\(|\)|[A-Za-z0-9.+-]+", expression)
    pos = 0

    def parse_or() -> bool:
        nonlocal pos
        ok = parse_and()
        while pos < len(tokens) and tokens[pos].upper() == "OR":
            pos += 1
            right = parse_and()
            ok = ok or right
        return ok

    def parse_and() -> bool:
        nonlocal pos
        ok = parse_atom()
        while pos < len(tokens) and tokens[pos].upper() == "AND":
            pos += 1
            right = parse_atom()
            ok = ok and right
        return ok

    def parse_atom() -> bool:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError(f"incomplete license expression {expression!r}")
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            ok = parse_or()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ValueError(f"unbalanced license expression {expression!r}")
            pos += 1
            return ok
        return tok in ALLOWED

    ok = parse_or()
    if pos != len(tokens):
        raise ValueError(f"cannot read license expression {expression!r}")
    return ok


def run(cmd: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"licenses: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def json_stream(text: str) -> Iterable[dict]:
    dec = json.JSONDecoder()
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        obj, i = dec.raw_decode(text, i)
        yield obj


def license_of_dir(d: Path) -> str:
    for name in LICENSE_FILES:
        f = d / name
        if f.is_file():
            spdx = classify_text(f.read_text(errors="replace"))
            if spdx is None:
                sys.exit(f"licenses: {f}: not a license text this script knows; classify it by hand "
                         "and teach mk/licenses.py its wording")
            return spdx
    sys.exit(f"licenses: {d} has no license file ({', '.join(LICENSE_FILES)})")


Row = Tuple[str, str, str, str]  # name, version, license, where it ends up


def go_rows(root: Path) -> List[Row]:
    mods = list(json_stream(run(["go", "mod", "download", "-json"], root)))
    where: Dict[str, List[str]] = {}
    for pkg, label in (("./capi", "libleases.so"), ("./cmd/leases", "leases CLI")):
        out = run(["go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg], root)
        for path in set(out.split()):
            where.setdefault(path, []).append(label)
    gomod = (root / "go.mod").read_text()
    goversion = re.search(r"^go (\S+)$", gomod, flags=re.M)
    goroot = Path(run(["go", "env", "GOROOT"], root).strip())
    rows: List[Row] = [("Go standard library and runtime", f"go {goversion.group(1) if goversion else '?'} (go.mod)",
                        license_of_dir(goroot), "libleases.so, leases CLI")]
    for m in sorted(mods, key=lambda m: m["Path"]):
        if m.get("Error"):
            sys.exit(f"licenses: {m['Path']}@{m['Version']}: {m['Error']}")
        rows.append((m["Path"], m["Version"], license_of_dir(Path(m["Dir"])),
                     ", ".join(where.get(m["Path"], [])) or "tests and tools only"))
    return rows


def rust_rows(root: Path) -> List[Row]:
    meta = json.loads(run(["cargo", "metadata", "--locked", "--format-version", "1"], root / "bindings" / "rust"))
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root_id = meta["resolve"]["root"]

    def proc_macro(pid: str) -> bool:
        return any("proc-macro" in t["kind"] for t in packages[pid]["targets"])

    # Linked into a program: reached from the crate by normal dependencies,
    # not through a proc macro (compiled and run by the compiler only).
    linked, built = set(), set()
    todo = [(root_id, True)]
    while todo:
        pid, link = todo.pop()
        seen = linked if link else built
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            if pid == root_id and kinds == {"dev"}:
                continue
            todo.append((dep["pkg"], link and None in kinds and not proc_macro(dep["pkg"])))
    rows: List[Row] = []
    for pid, p in sorted(packages.items(), key=lambda kv: (kv[1]["name"], kv[1]["version"])):
        if pid == root_id:
            continue
        if not p.get("license"):
            sys.exit(f"licenses: crate {p['name']} {p['version']} has no license field")
        use = ("linked into Rust programs" if pid in linked else
               "build time only" if pid in built else "tests only")
        rows.append((p["name"], p["version"], p["license"], use))
    return rows


PY_LICENSE_CLASSIFIERS = {
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: BSD License": "BSD-3-Clause",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
}


def python_rows(root: Path, python: str) -> List[Row]:
    pins = []
    for line in (root / "bindings" / "python" / "requirements-dev.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                sys.exit(f"licenses: requirements-dev.txt: {line!r} is not pinned (name==version)")
            pins.append((name.strip(), version.strip()))
    script = r"""
import importlib.metadata as md, json, sys
out = []
for name in sys.argv[1:]:
    d = md.distribution(name)
    m = d.metadata
    files = [str(d.locate_file(f)) for f in (d.files or []) if ".dist-info/" in str(f)
             and str(f).rsplit("/", 1)[-1].upper().startswith(("LICENSE", "LICENCE", "COPYING"))]
    out.append({"name": name, "version": d.version, "expression": m.get("License-Expression"),
                "classifiers": [c for c in (m.get_all("Classifier") or []) if c.startswith("License ::")],
                "files": files})
print(json.dumps(out))
"""
    found = json.loads(run([python, "-c", script, *[n for n, _ in pins]], root))
    rows: List[Row] = []
    for (name, pinned), d in zip(pins, found):
        if d["version"] != pinned:
            sys.exit(f"licenses: {name} {d['version']} is installed, {pinned} pinned: run `make python-venv`")
        spdx = d["expression"]
        if not spdx:
            for f in d["files"]:
                spdx = classify_text(Path(f).read_text(errors="replace"))
                if spdx:
                    break
        if not spdx:
            known = [PY_LICENSE_CLASSIFIERS[c] for c in d["classifiers"] if c in PY_LICENSE_CLASSIFIERS]
            spdx = " OR ".join(known) if known else None
        if not spdx:
            sys.exit(f"licenses: {name} {pinned}: no license expression, known license text or classifier")
        rows.append((name, pinned, spdx, "build and test tools only"))
    return rows


def table(rows: List[Row], columns: Tuple[str, str, str, str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {v} | {lic} | {use} |" for n, v, lic, use in rows]
    return "\n".join(lines)


def render(root: Path, python: str) -> str:
    go, rust, py = go_rows(root), rust_rows(root), python_rows(root, python)
    bad = [(n, v, lic) for n, v, lic, _ in go + rust + py if not allowed(lic)]
    if bad:
        sys.exit("licenses: not allowed in an Apache-2.0 project (mk/licenses.py, ALLOWED):\n" +
                 "\n".join(f"  {n} {v}: {lic}" for n, v, lic in bad))
    return f"""# Third-party licenses

libleases is licensed under the Apache License 2.0 (`LICENSE`). This file lists every dependency
with its version and license. It is generated by `make licenses` (`mk/licenses.py`) and `make
test` checks that it is current: do not edit it by hand. Each license below is one of
{", ".join(sorted(ALLOWED))} (an `OR` needs one of them, an `AND` all), which allow use in and
distribution with an Apache-2.0 project; the generator fails on any other.

## Go modules

The modules `go.mod` requires, classified by the license file in each module's directory of the
module cache. "libleases.so" and "leases CLI" name the artifacts a module is linked into
(`go list -deps ./capi`, `./cmd/leases`); the Go packages are the same code.

{table(go, ("module", "version", "license", "linked into"))}

## Rust crates

`bindings/rust/Cargo.lock`, with each crate's license field (`cargo metadata`).

{table(rust, ("crate", "version", "license", "use"))}

## Python packages

The wheel and the sdist depend on no package. These are the pinned build and test tools of
`bindings/python/requirements-dev.txt`, with the license their installed metadata states.

{table(py, ("package", "version", "license", "use"))}
"""


def main() -> None:
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 3:
        sys.exit(__doc__)
    root, python, out = Path(args[0]).resolve(), args[1], Path(args[2])
    text = render(root, python)
    if check:
        if not out.is_file() or out.read_text() != text:
            sys.exit(f"licenses: {out} is not current: run `make licenses` and commit it")
        print(f"licenses: {out} is current")
        return
    out.write_text(text)
    print(f"licenses: wrote {out}")


if __name__ == "__main__":
    main()
