"""The README's sample of `make demo`'s output: written from a real run, and checked against one.

Usage:
  readme_sample.py write README OUTPUT   replace README's sample block with an excerpt of OUTPUT
                                         (what demo.py printed: `make demo-readme` runs it)
  readme_sample.py check README OUTPUT   exit 1 unless README's sample block has the shape of the
                                         excerpt of OUTPUT (`make test-demo`, on the quick demo)

The block sits between the two marker lines BEGIN and END below. Its excerpt is one line of each
step the demo shows on the way (the first and the last progress line), then the summary and the
status page's line, which is printed last. Two runs differ in timings, ids, counts, ports, the
database's directory and which worker recovered the killed worker's job; the shape is what is left
once those are masked, compared as sets of lines (a claim's expiry may come before or after a
progress line, and the first and the last progress line look alike). The last line only has to be the status page's URL: the check's
quick demo stops the page at once, a user's lingers.
"""

import re
import sys
from pathlib import Path
from typing import List, Tuple

BEGIN = "<!-- demo-sample:begin (written by `make demo-readme` from a real run; `make test-demo` checks it) -->"
END = "<!-- demo-sample:end -->"
ELLIPSIS = "…"

# One line for each step shown on the way, in the demo's words (after the timestamp).
STEPS = ("libleases ", "created ", "status page: ", "token handoff: a Python", "token handoff: another",
         "kill -9: ", "coordinator: ", "cancel of a running job: ", "started workers: ", "recovery: ",
         "SIGTERM to cli-1 ")
STAMP = re.compile(r"^\[\s*\d+(?:\.\d+)?s\] ")
LAST = re.compile(r"^status page: http://[^\s/]+/ ")


def excerpt(output: str) -> List[str]:
    """The lines of a run's output that the README shows, in their order, with an ellipsis where
    lines were left out."""
    lines = output.splitlines()
    keep: List[int] = []
    for step in STEPS:
        keep += [i for i, ln in enumerate(lines) if STAMP.sub("", ln).startswith(step)][:1]
    progress = [i for i, ln in enumerate(lines) if STAMP.match(ln) and STAMP.sub("", ln).startswith("done ")]
    keep += progress[:1] + progress[-1:]
    if "== summary ==" not in lines:
        raise ValueError("the output has no summary: not a finished run of the demo")
    start = lines.index("== summary ==")
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("elapsed: ")), None)
    if end is None:
        raise ValueError("the output's summary has no 'elapsed:' line")
    keep += range(start, end + 1)
    last = [i for i, ln in enumerate(lines) if LAST.match(ln)]
    if not last or last[-1] != len(lines) - 1:
        raise ValueError("the output's last line is not the status page's URL")
    keep.append(last[-1])
    out: List[str] = []
    prev = -1
    for i in sorted(set(keep)):
        if prev >= 0 and i > prev + 1 and lines[i].strip():
            out.append(ELLIPSIS)
        out.append(lines[i])
        prev = i
    return out


def shape(lines: List[str]) -> Tuple[List[str], str]:
    """What two runs share: the lines (but the last) masked and sorted, and the last line."""
    text = "\n".join(lines)
    m = re.search(r"created (\S+)/leases\.db:", text)
    if m:
        text = text.replace(m.group(1) + "/", "DIR/")
    text = re.sub(r"\b(python|rust|cpp|cli)-1\b", "WORKER", text)
    text = re.sub(r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?\b", "ID", text)
    text = re.sub(r"\[[#.]+\]", "[BAR]", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "HOST", text)
    text = re.sub(r"\d+(?:\.\d+)?", "N", text)
    text = re.sub(r"[ \t]+", " ", text)
    masked = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() != ELLIPSIS]
    return sorted(masked[:-1]), masked[-1] if masked else ""


def block(readme: str) -> Tuple[int, int, List[str]]:
    """The README's sample block: where its fence opens and closes, and its lines."""
    lines = readme.splitlines()
    if lines.count(BEGIN) != 1 or lines.count(END) != 1:
        raise ValueError(f"the README needs each marker once: {BEGIN!r} and {END!r}")
    b, e = lines.index(BEGIN), lines.index(END)
    if not (e > b + 2 and lines[b + 1] == "```" and lines[e - 1] == "```"):
        raise ValueError("the README's markers must enclose one ``` block and nothing else")
    return b + 1, e - 1, lines[b + 2:e - 1]


def write(readme_path: Path, output: str) -> None:
    readme = readme_path.read_text()
    open_, close, _ = block(readme)
    lines = readme.splitlines()
    lines[open_ + 1:close] = excerpt(output)
    readme_path.write_text("\n".join(lines) + "\n")


def check(readme: str, output: str) -> List[str]:
    """The differences between the README's block and a real run's excerpt (none: the same shape)."""
    _, _, shown = block(readme)
    want, want_last = shape(excerpt(output))
    got, got_last = shape(shown)
    problems = [f"the README lacks a line like: {ln}" for ln in sorted(set(want) - set(got))]
    problems += [f"a real run prints no line like the README's: {ln}" for ln in sorted(set(got) - set(want))]
    if not LAST.match(got_last.replace("HOST", "127.0.0.1:1")):
        problems.append(f"the README's block does not end with the status page's URL: {got_last}")
    if not LAST.match(want_last.replace("HOST", "127.0.0.1:1")):
        problems.append(f"the run did not end with the status page's URL: {want_last}")
    return problems


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("write", "check"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    readme, output = Path(sys.argv[2]), Path(sys.argv[3]).read_text()
    try:
        if sys.argv[1] == "write":
            write(readme, output)
            print(f"readme_sample: wrote {readme}'s sample of make demo from {sys.argv[3]}")
            return 0
        problems = check(readme.read_text(), output)
    except ValueError as e:
        print(f"readme_sample: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"readme_sample: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
