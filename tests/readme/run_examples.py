"""make test-readme: the README's examples are real programs.

Extracts the fenced blocks of README.md's section "A first program in each
language" (one each of go, c, python, cpp, rust, sh), builds each against the
release library (build/libleases.so, build/leases; the Rust crate links
build/libleases.a), runs it twice in one empty directory (a first program
must survive a rerun on the database it left), and fails if one does not
build, exits non-zero, prints anything that looks like a token, or names no
new job the second time (each run requests and finishes a job of its own).
The Go program is built the way section "Installing" tells a user to: its sh
block, run in a new module outside the repository (`replace` by the checkout).

Usage: run_examples.py ROOT
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
BUILD = ROOT / "build"
OUT = BUILD / "readme"
SECTION = "## A first program in each language"
LANGUAGES = ["go", "c", "python", "cpp", "rust", "sh"]
INSTALLING = "## Installing"
CHECKOUT_PLACEHOLDER = "/path/to/libleases"
JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def blocks() -> dict:
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    found: dict = {}
    for lang, body in re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.S | re.M):
        if lang in found:
            sys.exit(f"README.md: two {lang} examples in '{SECTION}'")
        found[lang] = body
    missing = [lang for lang in LANGUAGES if lang not in found]
    if missing:
        sys.exit(f"README.md: '{SECTION}' has no example in {', '.join(missing)}")
    return found


def go_route() -> str:
    """README.md's Go route (section "Installing"): the sh block that
    replaces the module by a checkout, with the checkout's path filled in."""
    text = (ROOT / "README.md").read_text()
    start = text.index(INSTALLING)
    end = text.find("\n## ", start + len(INSTALLING))
    found = [b for b in re.findall(r"^```sh\n(.*?)^```$", text[start:end], flags=re.S | re.M)
             if "go mod edit -replace" in b]
    if len(found) != 1 or CHECKOUT_PLACEHOLDER not in found[0]:
        sys.exit(f"README.md: '{INSTALLING}' needs one sh block with `go mod edit -replace "
                 f"github.com/libleases/libleases={CHECKOUT_PLACEHOLDER}`")
    return found[0].replace(CHECKOUT_PLACEHOLDER, str(ROOT))


def run(cmd, cwd, env=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"README example: {' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def main() -> None:
    src = blocks()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    lib = ["-L" + str(BUILD), "-lleases", "-Wl,-rpath," + str(BUILD)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"),
               LEASES_LIBRARY=str(BUILD / "libleases.so"), PATH=f"{BUILD}:{os.environ['PATH']}")
    env.pop("LEASES_DB", None)

    # Go: the way README's "Installing" gives until the module is published,
    # in a new module outside the repository (its block, run as written with
    # this checkout as the path).
    with tempfile.TemporaryDirectory(prefix="leases-readme-go-module-") as d:
        (Path(d) / "main.go").write_text(src["go"])
        (Path(d) / "route.sh").write_text(go_route())
        out = run(["bash", "-euo", "pipefail", "route.sh"], d)
        gomod = (Path(d) / "go.mod").read_text()
        if f"github.com/libleases/libleases => {ROOT}" not in gomod:
            sys.exit(f"README's Go route: go.mod does not replace the module by the checkout\n{gomod}\n{out}")
        if not (Path(d) / "nightly").is_file():
            sys.exit(f"README's Go route built no ./nightly\n{out}")
        shutil.copy2(Path(d) / "nightly", OUT / "go-example")
    (OUT / "example.c").write_text(src["c"])
    run([os.environ.get("CC", "cc"), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
         "-I" + str(ROOT / "include"), str(OUT / "example.c"), "-o", str(OUT / "c-example"), *lib], ROOT)
    (OUT / "example.cpp").write_text(src["cpp"])
    run([os.environ.get("CXX", "c++"), "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic",
         "-I" + str(ROOT / "include"), "-I" + str(ROOT / "bindings" / "cpp" / "include"),
         str(OUT / "example.cpp"), "-o", str(OUT / "cpp-example"), *lib], ROOT)
    (OUT / "example.rs").write_text(src["rust"])
    run(["cargo", "build", "--release", "--locked", "-j", "2", "--quiet"], ROOT / "tests" / "readme" / "rust",
        env=dict(env, CARGO_TARGET_DIR=str(BUILD / "demo" / "rust"), LEASES_LIB_DIR=str(BUILD)))
    (OUT / "example.py").write_text(src["python"])
    (OUT / "example.sh").write_text(src["sh"])

    programs = {
        "go": [str(OUT / "go-example")],
        "c": [str(OUT / "c-example")],
        "python": [sys.executable, str(OUT / "example.py")],
        "cpp": [str(OUT / "cpp-example")],
        "rust": [str(BUILD / "demo" / "rust" / "release" / "readme-example")],
        "sh": ["bash", "-euo", "pipefail", str(OUT / "example.sh")],
    }
    for lang in LANGUAGES:
        with tempfile.TemporaryDirectory(prefix=f"leases-readme-{lang}-") as d:
            outs = [run(programs[lang], d, env) for _ in range(2)]
            if any("lt1." in out for out in outs):
                sys.exit(f"README example ({lang}) printed token text")
            if not (Path(d) / "jobs.db").exists():
                sys.exit(f"README example ({lang}) did not create jobs.db")
            first, second = (set(JOB_ID.findall(out)) for out in outs)
            if not first or not second - first:
                sys.exit(f"README example ({lang}): the second run in the same directory named no job "
                         f"the first did not; each run must request and finish a job of its own\n{outs[1]}")
        print(f"--- README example: {lang} (second run) ---\n{outs[1].rstrip()}")
    print(f"README examples: {len(LANGUAGES)} passed, 0 failed")


if __name__ == "__main__":
    main()
