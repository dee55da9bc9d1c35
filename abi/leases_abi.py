#!/usr/bin/env python3
"""The one reader of include/leases.h: the ABI's manifest, version script and
checks (docs/ABI.md).

  leases_abi.py --root ROOT generate      records new declarations in
      abi/leases.abi at the header's revision and rewrites every file generated
      from the header: capi/leases.map, capi/status_names.h, the statuses of
      tests/vectors, Python's _abi.py, Rust's sys.rs, and the marked blocks of
      the bindings' error code and docs/errors.md (make abi-generate)
  leases_abi.py --root ROOT check [--so SO --test-so SO --cc CC --cxx CXX]
      fails when the ABI stopped only growing, a generated file is not current,
      a binding does not wrap a function, or anything disagrees with the
      header (make test-abi)
  leases_abi.py --root ROOT check-binary BIN REVISION
      fails unless every libleases symbol BIN uses is of revision <= REVISION

The ABI only grows: a declaration of a released revision (one whose header is
frozen as abi/history/leases.<ABI>.<R>.h) never changes or disappears, and a new
one needs a revision bump (LEASES_ABI_REVISION in the header = abi/REVISION =
leases_abi_revision()) unless the current revision is still open (not yet
released): an open revision takes additions, and its own declarations may still
change, until its release freezes it. The functions of revision N carry the
symbol version LEASES_<ABI>.N.
"""
import argparse
import ctypes
import pathlib
import re
import subprocess
import sys
import tempfile

SEAM_STRINGS = [b"leases_testing", b"leasesgo_testing", b"SetClockForTest", b"SetSafetyPollForTest", b"TestSeamPresent", b"LEASES_TESTING"]
TESTING_NODE = "LEASES_TESTING"
QUALIFIERS = {"const", "volatile", "struct", "enum", "union", "unsigned", "signed"}
# Macros that number the ABI itself rather than declare part of it.
NUMBERING = ("LEASES_H", "LEASES_ABI_VERSION", "LEASES_ABI_REVISION")

failures = []


def fail(msg):
    failures.append(msg)
    print("ABI check FAILED: " + msg, file=sys.stderr)


class Refused(Exception):
    """generate cannot proceed: the header breaks the growth rule."""


# ---- the header ---------------------------------------------------------------


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def norm_space(s):
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*([(),*])\s*", r"\1", s)
    return s.replace(",", ", ")  # 'const char*', 'int64_t*', '(a, b)'


def drop_param_name(p):
    """'const char *path' -> 'const char*'; unnamed parameters stay."""
    m = re.match(r"^(.*?[\s*])([A-Za-z_]\w*)$", p)
    if not m:
        return p
    prefix = m.group(1)
    words = [w for w in re.split(r"[\s*]+", prefix) if w]
    if not [w for w in words if w not in QUALIFIERS]:
        return p  # e.g. 'unsigned int' or 'const char' without a name
    return norm_space(prefix)


def parse_header(path):
    """Returns (defines, typedefs, functions) of a header; functions maps
    name -> normalized declaration without parameter names."""
    text = strip_comments(path.read_text())
    defines, typedefs, functions = {}, [], {}
    body = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*define\s+(LEASES_\w+)\s*(.*)$", s)
            if m and m.group(2):
                defines[m.group(1)] = norm_space(m.group(2))
            continue
        body.append(line)
    text = " ".join(body)
    # A struct's definition is one declaration: its fields stay in its line.
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        fields = "; ".join(norm_space(f) for f in m.group(2).split(";") if norm_space(f))
        typedefs.append(f"typedef struct {m.group(1)} {{ {fields}; }} {m.group(3)}")
    text = re.sub(r"typedef\s+struct\s+\w+\s*\{.*?\}\s*\w+\s*;", " ", text, flags=re.S)
    text = re.sub(r'extern\s+"C"\s*\{|\}', " ", text)
    for stmt in text.split(";"):
        stmt = norm_space(stmt)
        if not stmt:
            continue
        if stmt.startswith("typedef "):
            typedefs.append(stmt)
            continue
        m = re.match(r"^(.*?)\b(leases_\w+)\((.*)\)$", stmt)
        if not m:
            fail(f"{path.name}: cannot parse declaration: {stmt}")
            continue
        ret, name, params = norm_space(m.group(1)), m.group(2), m.group(3)
        params = ", ".join(drop_param_name(norm_space(p)) for p in params.split(","))
        functions[name] = f"{ret} {name}({params})"
    return defines, typedefs, functions


def declaration_lines(root):
    """The header's declarations as manifest lines ('function ...', ...)."""
    defines, typedefs, functions = parse_header(root / "include/leases.h")
    lines = [f"define {k} {v}" for k, v in defines.items() if k not in NUMBERING]
    lines += [f"typedef {t[len('typedef '):]}" for t in typedefs]
    lines += [f"function {f}" for f in functions.values()]
    return sorted(lines)


def function_name(line):
    return re.search(r"\b(leases_\w+)\(", line).group(1)


def read_number(path):
    return int(path.read_text().strip())


# ---- the manifest and the version script --------------------------------------


class Manifest:
    """abi/leases.abi: 'abi N', 'revision R', then '<revision> <declaration>'."""

    def __init__(self, abi, revision, lines):
        self.abi, self.revision, self.lines = abi, revision, lines  # lines: {declaration: revision}

    @classmethod
    def read(cls, root):
        abi = revision = None
        lines = {}
        for raw in (root / "abi/leases.abi").read_text().splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            key, _, rest = raw.partition(" ")
            if key == "abi":
                abi = int(rest)
            elif key == "revision":
                revision = int(rest)
            else:
                lines[rest] = int(key)
        return cls(abi, revision, lines)

    def text(self):
        out = [
            f"# abi/leases.abi: every declaration of include/leases.h (ABI {self.abi}) with the",
            "# revision that introduced it. `make abi-generate` appends new declarations at the",
            "# header's LEASES_ABI_REVISION; a recorded line never changes (docs/ABI.md).",
            f"abi {self.abi}",
            f"revision {self.revision}",
        ]
        out += [f"{r} {line}" for line, r in sorted(self.lines.items(), key=lambda kv: (kv[1], kv[0]))]
        return "\n".join(out) + "\n"

    def functions(self):
        """{function name: revision}"""
        return {function_name(l): r for l, r in self.lines.items() if l.startswith("function ")}


def node(abi, revision):
    return f"LEASES_{abi}.{revision}"


def map_text(manifest):
    by_rev = {}
    for name, r in manifest.functions().items():
        by_rev.setdefault(r, []).append(name)
    out = [
        "/* capi/leases.map: the linker version script of libleases.so, generated from",
        "   abi/leases.abi by `make abi-generate` (abi/leases_abi.py); do not edit.",
        "   Revision N of ABI 1 is the node LEASES_1.N: a program records the node of",
        "   every function it uses, and the loader refuses an older library lacking it.",
        "   The Go exports (leasesgo_*), cgo's helpers and the Go runtime stay local. */",
    ]
    for r in range(manifest.revision + 1):
        names = "".join(f"    {n};\n" for n in sorted(by_rev.get(r, [])))
        local = "  local:\n    *;\n" if r == 0 else ""
        parent = f" {node(manifest.abi, r - 1)}" if r else ""
        out.append(f"{node(manifest.abi, r)} {{\n  global:\n{names}{local}}}{parent};")
    return "\n".join(out) + "\n"


def header_numbers(root):
    defines, _, _ = parse_header(root / "include/leases.h")

    def num(name):
        v = defines.get(name)
        return int(v) if v and v.isdigit() else None

    return num("LEASES_ABI_VERSION"), num("LEASES_ABI_REVISION")


def grown_manifest(root):
    """The manifest with the header's new declarations recorded, or Refused
    (with every reason) when the header does not only grow the recorded ABI."""
    manifest = Manifest.read(root)
    abi, revision = header_numbers(root)
    current = set(declaration_lines(root))
    reasons = []
    if abi != manifest.abi:
        reasons.append(
            f"include/leases.h says LEASES_ABI_VERSION {abi} but abi/leases.abi records ABI {manifest.abi}: "
            "the ABI number changes only with a breaking change, which this project does not make "
            "(docs/ABI.md); add functions at a new revision instead")
    frozen = lambda r: (root / "abi/history" / f"leases.{manifest.abi}.{r}.h").exists()
    removed = sorted((r, l) for l, r in manifest.lines.items() if l not in current)
    for r, line in removed:
        if not frozen(r):
            continue  # an open revision's declaration may still change until its release
        reasons.append(
            f"a declaration of revision {r} changed or disappeared: {line}\n"
            f"  Programs built against revision {r} rely on it. Restore it exactly; to offer a changed "
            "signature, add a new function (e.g. name_v2) at a new revision.")
    added = sorted(current - set(manifest.lines))
    if added:
        if revision == manifest.revision and frozen(revision):
            listed = "".join(f"\n    + {l}" for l in added)
            reasons.append(
                f"new declarations without a revision bump (revision {revision} is released: "
                f"abi/history/leases.{manifest.abi}.{revision}.h):{listed}\n"
                f"  Bump LEASES_ABI_REVISION in include/leases.h and abi/REVISION to {manifest.revision + 1}, "
                "then run `make abi-generate`.")
        elif revision == manifest.revision:
            pass  # the open revision takes them
        elif not frozen(manifest.revision):
            reasons.append(
                f"LEASES_ABI_REVISION is {revision} but revision {manifest.revision} is still open (no "
                f"abi/history/leases.{manifest.abi}.{manifest.revision}.h): add to it until it is released")
        elif revision != manifest.revision + 1:
            reasons.append(
                f"LEASES_ABI_REVISION is {revision} but the manifest is at revision {manifest.revision}: "
                f"an addition is the next revision, {manifest.revision + 1}")
    elif revision != manifest.revision:
        reasons.append(
            f"LEASES_ABI_REVISION is {revision} but abi/leases.abi records revision {manifest.revision} "
            "and the header adds nothing: a revision is bumped only together with its new declarations")
    if reasons:
        raise Refused(reasons)
    for _, line in removed:
        del manifest.lines[line]
    for line in added:
        manifest.lines[line] = revision
    manifest.revision = revision
    return manifest


# ---- generate ----------------------------------------------------------------


# ---- the projections' tables ---------------------------------------------------
#
# Each projection's status table, limits and foreign declarations are written
# from the header here; the idioms (names, base classes, C type mappings) are
# the only per-language knowledge, and they live in these tables.

# Statuses whose failure means "this claim is no longer held": every binding
# gives them a common base (NotHeldError, ErrorKind::is_not_held).
NOT_HELD = ("lease_lost", "expired", "cancelled")
# Statuses that are bad input: Python's classes also derive from ValueError.
VALUE_ERRORS = ("invalid_argument", "invalid_duration", "bad_token")
GENERATED = "generated from include/leases.h by abi/leases_abi.py (make abi-generate); do not edit"


class Status:
    def __init__(self, code, name, meaning):
        self.code, self.name, self.meaning = code, name, meaning
        self.macro = "LEASES_" + name.upper()
        self.stem = "".join(w.capitalize() for w in name.split("_"))  # wrong_state -> WrongState
        self.error_class = self.stem if self.stem.endswith("Error") else self.stem + "Error"


def parse_statuses(root):
    """The header's status codes in order, with the comment of each define."""
    text = (root / "include/leases.h").read_text()
    block = text.split("typedef int leases_status;", 1)[1].split("/* ----", 1)[0]
    out = []
    # Each status's meaning is the comment on its line, or the comment right above it.
    pattern = r"(?:/\*((?:[^*]|\*(?!/))*)\*/\s*\n)?#define (LEASES_\w+) (\d+)[ \t]*(?:/\*(.*?)\*/)?"
    for m in re.finditer(pattern, block):
        meaning = " ".join(re.sub(r"^\s*\* ?", "", m.group(4) or m.group(1) or "", flags=re.M).split())
        out.append(Status(int(m.group(3)), m.group(2)[len("LEASES_"):].lower(), meaning))
    if [s.code for s in out] != list(range(len(out))) or out[0].name != "ok":
        fail("include/leases.h: the status codes must be LEASES_OK = 0, then 1, 2, ... without gaps")
    return out


def parse_declarations(path):
    """{name: (return type, [(parameter type, parameter name)])}, normalized as in the manifest."""
    _, _, functions = parse_header(path)
    raw = strip_comments(path.read_text())
    out = {}
    for name, decl in functions.items():
        m = re.search(rf"([^;{{}}#]*?)\b{name}\s*\(([^)]*)\)\s*;", raw, flags=re.S)
        params = []
        for p in norm_space(m.group(2)).split(", "):
            if p in ("void", ""):
                continue
            typ = drop_param_name(p)
            params.append((typ, norm_space(p[len(typ.rstrip("*")):]).lstrip("*").strip() or "arg"))
        ret = decl.split(f" {name}(")[0]
        out[name] = (ret, params)
    return out


def limits(root):
    defines, _, _ = parse_header(root / "include/leases.h")
    return [(k, int(re.sub(r"\D", "", v.replace("INT64_C", "")))) for k, v in defines.items()
            if k.startswith("LEASES_MAX_")]


# Integer constants of the header that are neither statuses nor limits (the
# values a caller puts in an options struct or a parameter), by name prefix,
# with the Rust type of what they fill. Defines matching none stay C only.
CONSTANTS = {"LEASES_OPEN_": "i32", "LEASES_SYNCHRONOUS_": "i32", "LEASES_DEFAULT_PAGE_SIZE": "u32",
             "LEASES_WORKER_": "i32", "LEASES_RESULT_": "i32", "LEASES_STOP_": "i32",
             "LEASES_PRUNE_": "i32"}


def constants(root):
    """[(name, value, Rust type)] of the header's CONSTANTS."""
    defines, _, _ = parse_header(root / "include/leases.h")
    out = []
    for k, v in defines.items():
        rust = next((typ for prefix, typ in CONSTANTS.items() if k.startswith(prefix)), None)
        if rust and re.fullmatch(r"\d+", v):
            out.append((k, int(v), rust))
    return out


HANDLES = {"leases_authority": "AuthorityPtr", "leases_edit": "EditPtr", "leases_lease": "LeasePtr",
           "leases_execution": "ExecutionPtr", "leases_canceller": "CancellerPtr", "leases_worker": "WorkerPtr"}


def parse_structs(path):
    """{struct name: [(field type, field name)]} of the header's struct typedefs."""
    _, typedefs, _ = parse_header(path)
    out = {}
    for t in typedefs:
        m = re.match(r"typedef struct (\w+) \{ (.*); \} (\w+)$", t)
        if m:
            out[m.group(3)] = [(drop_param_name(f), f.split()[-1]) for f in m.group(2).split("; ")]
    return out


# The header's struct names (ctypes_of and rust_of map pointers to them).
STRUCTS = set(parse_structs(pathlib.Path(__file__).resolve().parent.parent / "include/leases.h"))

# Field types of the header's structs.
STRUCT_FIELDS = {"size_t": ("ctypes.c_size_t", "usize"), "int32_t": ("ctypes.c_int32", "i32"),
                 "int64_t": ("ctypes.c_int64", "i64")}


def struct_field(typ, where, lang):
    if typ not in STRUCT_FIELDS:
        fail(f"{where}: abi/leases_abi.py has no {lang} mapping for the struct field type {typ!r}: add one")
        return "None"
    return STRUCT_FIELDS[typ][0 if lang == "ctypes" else 1]


def ctypes_of(c_type, where):
    """The ctypes expression of a C type of the header."""
    base = c_type.replace("const ", "")
    fixed = {
        "void": "None", "void*": "ctypes.c_void_p", "uint32_t": "ctypes.c_uint32", "leases_status": "c_status",
        "int64_t": "ctypes.c_int64", "int64_t*": "ctypes.POINTER(ctypes.c_int64)", "size_t": "ctypes.c_size_t",
        "int32_t": "ctypes.c_int32", "int32_t*": "ctypes.POINTER(ctypes.c_int32)",
        "leases_status*": "ctypes.POINTER(c_status)",
        "size_t*": "ctypes.POINTER(ctypes.c_size_t)", "uint8_t*": "ctypes.POINTER(ctypes.c_uint8)",
        # Owned outputs are read as addresses so they can go back to leases_free.
        "char**": "ctypes.POINTER(ctypes.c_void_p)", "uint8_t**": "ctypes.POINTER(ctypes.c_void_p)",
        # A borrowed input, or a string the library keeps.
        "char*": "ctypes.c_char_p",
    }
    if base in fixed:
        return fixed[base]
    stars = len(base) - len(base.rstrip("*"))
    if base.rstrip("*") in STRUCTS and stars == 1:
        return f"ctypes.POINTER({base.rstrip('*')})"
    handle = HANDLES.get(base.rstrip("*"))
    if handle and stars == 1:
        return handle
    if handle and stars == 2:
        return f"ctypes.POINTER({handle})"
    fail(f"{where}: abi/leases_abi.py has no ctypes mapping for the C type {c_type!r}: add one")
    return "None"


def rust_of(c_type, where):
    """The Rust FFI type of a C type of the header."""
    const = c_type.startswith("const ")
    base = c_type.replace("const ", "")
    stars = len(base) - len(base.rstrip("*"))
    scalar = {"void": "c_void", "char": "c_char", "uint32_t": "u32", "int64_t": "i64", "int32_t": "i32", "size_t": "usize",
              "uint8_t": "u8", "leases_status": "leases_status"}
    name = base.rstrip("*")
    inner = scalar.get(name) or (name if name in HANDLES or name in STRUCTS else None)
    if inner is None:
        fail(f"{where}: abi/leases_abi.py has no Rust mapping for the C type {c_type!r}: add one")
        return "()"
    if stars == 0:
        return inner
    out = ("*const " if const else "*mut ") + inner
    for _ in range(stars - 1):
        out = "*mut " + out
    return out


def python_abi(root, manifest):
    statuses = parse_statuses(root)
    public = parse_declarations(root / "include/leases.h")
    testing = parse_declarations(root / "include/leases_testing.h")
    out = ['"""The C ABI\'s tables for the leases package (limits, statuses, declarations),',
           f'{GENERATED}."""', "",
           "from __future__ import annotations", "", "import ctypes",
           "from typing import Any, Dict, List, Tuple", "",
           "# The ABI this package was generated for: the loaded library must report the",
           "# same ABI number and at least this revision (docs/ABI.md).",
           f"ABI_VERSION = {manifest.abi}", f"ABI_REVISION = {manifest.revision}", ""]
    out += [f"{k[len('LEASES_'):]} = {v:_}" for k, v in limits(root)]
    out += ["", "# Option values and defaults (open flags, synchronous levels, the page size)."]
    out += [f"{k[len('LEASES_'):]} = {v}" for k, v, _ in constants(root)]
    out += ["", "# (code, status name, exception class) of every failure status, in code order.",
            "STATUSES: Tuple[Tuple[int, str, str], ...] = ("]
    out += [f'    ({s.code}, "{s.name}", "{s.error_class}"),' for s in statuses[1:]]
    out += [")", "", "", "# One opaque C type per handle, as in the header.", ""]
    for c_name, ptr in HANDLES.items():
        out += ["", f"class {c_name}(ctypes.Structure):", "    pass", ""]
    out += [""] + [f"{ptr} = ctypes.POINTER({c_name})" for c_name, ptr in HANDLES.items()]
    out += ["", "", "# The header's structs, field for field (set size to ctypes.sizeof)."]
    for c_name, fields in parse_structs(root / "include/leases.h").items():
        out += ["", "", f"class {c_name}(ctypes.Structure):", "    _fields_ = ["]
        out += [f'        ("{f}", {struct_field(t, c_name, "ctypes")}),' for t, f in fields]
        out += ["    ]"]
    out += ["", "", "c_status = ctypes.c_int", "", "Signature = Tuple[Any, List[Any]]", ""]
    for title, decls in (("SIGNATURES", public), ("TESTING_SIGNATURES", testing)):
        out.append(f"# Every function of include/{'leases.h' if title == 'SIGNATURES' else 'leases_testing.h'}: "
                   "name -> (restype, argtypes).")
        out.append(f"{title}: Dict[str, Signature] = {{")
        for name, (ret, params) in decls.items():
            args = ", ".join(ctypes_of(t, name) for t, _ in params)
            out.append(f'    "{name}": ({ctypes_of(ret, name)}, [{args}]),')
        out += ["}", ""]
    return "\n".join(out)


def rust_sys(root, manifest):
    statuses = parse_statuses(root)
    out = ["//! Raw declarations of `include/leases.h`, one for one (the `-sys` layer),",
           f"//! {GENERATED}.", "//!",
           "//! Everything here is `unsafe` and follows the header's ownership rules; the",
           "//! safe API in the crate root is the supported way in.",
           "#![allow(non_camel_case_types)]", "// Each item is documented where it is declared: include/leases.h.",
           "#![allow(missing_docs)]", "", "use std::os::raw::{c_char, c_int, c_void};", "",
           "/// The ABI this module declares (`LEASES_ABI_VERSION`).",
           f"pub const LEASES_ABI_VERSION: u32 = {manifest.abi};",
           "/// The revision of that ABI this module declares (`LEASES_ABI_REVISION`).",
           f"pub const LEASES_ABI_REVISION: u32 = {manifest.revision};"]
    for k, v in limits(root):
        out.append(f"pub const {k}: {'i64' if k.endswith('_US') else 'usize'} = {v:_};")
    for k, v, typ in constants(root):
        out.append(f"pub const {k}: {typ} = {v};")
    out += ["", "/// Opaque handle types: each object has its own, so a lease can never be",
            "/// passed where an authority is expected."]
    for c_name in HANDLES:
        out += ["#[repr(C)]", f"pub struct {c_name} {{", "    _private: [u8; 0],", "}"]
    out += ["", "/// The header's structs, field for field (set `size` to `size_of`)."]
    for c_name, fields in parse_structs(root / "include/leases.h").items():
        out += ["#[repr(C)]", "#[derive(Clone, Copy, Debug)]", f"pub struct {c_name} {{"]
        out += [f"    pub {f}: {struct_field(t, c_name, 'Rust')}," for t, f in fields]
        out += ["}"]
    out += ["", "pub type leases_status = c_int;", ""]
    out += [f"pub const {s.macro}: leases_status = {s.code};" for s in statuses]

    def externs(decls, indent):
        lines = []
        for name, (ret, params) in decls.items():
            args = ", ".join(f"{p}: {rust_of(t, name)}" for t, p in params)
            r = "" if ret == "void" else f" -> {rust_of(ret, name)}"
            lines.append(f"{indent}pub fn {name}({args}){r};")
        return lines

    # One line per declaration, as generated: rustfmt leaves the blocks alone.
    out += ["", "#[rustfmt::skip]", 'extern "C" {'] + externs(parse_declarations(root / "include/leases.h"), "    ") + ["}", ""]
    out += ["/// `include/leases_testing.h`: present only in the test build of the library",
            "/// (`build/test/libleases.so`), declared only with the `testing` feature.",
            '#[cfg(feature = "testing")]', "pub mod testing {", "    #[allow(unused_imports)]",
            "    use super::*;", "", "    #[rustfmt::skip]", '    extern "C" {']
    out += externs(parse_declarations(root / "include/leases_testing.h"), "        ") + ["    }", "}", ""]
    return "\n".join(out)


def status_names_h(root):
    statuses = parse_statuses(root)
    out = [f"/* capi/status_names.h: leases_status_name's table, {GENERATED}. */",
           "#ifndef LEASES_STATUS_NAMES_H", "#define LEASES_STATUS_NAMES_H",
           "static const char *const leases_status_names[] = {"]
    out += [f'\t"{s.name}", /* {s.macro} */' for s in statuses]
    return "\n".join(out + ["};", "#endif", ""])


def statuses_json(root):
    statuses = parse_statuses(root)
    items = [f'  {{\n    "code": {s.code},\n    "name": "{s.name}",\n    "stem": "{s.stem}",\n'
             f'    "not_held": {"true" if s.name in NOT_HELD else "false"}\n  }}' for s in statuses]
    return "[\n" + ",\n".join(items) + "\n]\n"


def python_errors_block(root):
    out = []
    for s in parse_statuses(root)[1:]:
        bases = ["NotHeldError" if s.name in NOT_HELD else "LeasesError"]
        if s.name in VALUE_ERRORS:
            bases.append("ValueError")
        out += ["", "", f"class {s.error_class}({', '.join(bases)}):", f'    """{s.macro}: {s.meaning}."""', "",
                f"    status = {s.code}", f'    status_name = "{s.name}"']
    out += ["", "", "ERROR_CLASSES: Dict[int, Type[LeasesError]] = {"]
    out += [f"    {s.code}: {s.error_class}," for s in parse_statuses(root)[1:]]
    return out + ["}", ""]


def cpp_errors_block(root):
    statuses = parse_statuses(root)[1:]
    out = []
    for s in statuses:
        base = "NotHeldError" if s.name in NOT_HELD else "Error"
        out.append(f"LEASES_HPP_ERROR_CLASS({s.error_class}, {base}, {s.macro});  // {s.meaning}")
    out += ["", "/// Throws the Error subclass of status with message and the job id the",
            "/// failure names (empty: none); status must not be LEASES_OK. An unknown",
            "/// status (a newer library) throws the base Error.",
            "[[noreturn]] inline void throw_status(leases_status status, const std::string &message,",
            "                                      const std::string &job_id = std::string()) {",
            "    switch (status) {"]
    out += [f"    case {s.macro}: throw {s.error_class}(message, job_id);" for s in statuses]
    return out + ["    default: throw Error(status, message, job_id);", "    }", "}"]


def rust_errors_block(root):
    statuses = parse_statuses(root)[1:]
    out = ["/// What went wrong. One variant per failure status of `include/leases.h`",
           "/// (same meaning, same order as `docs/errors.md`), plus",
           "/// [`ErrorKind::AbiMismatch`], which has no C status because it is detected",
           "/// by this crate before any call that could report one.", "///",
           "/// `LEASES_NOTHING_TO_CLAIM` has a variant for completeness, but the safe API",
           "/// reports it as `Ok(None)` from [`Authority::claim`](crate::Authority::claim)",
           "/// and [`Edit::claim`](crate::Edit::claim).",
           "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]", "#[non_exhaustive]", "pub enum ErrorKind {"]
    for s in statuses:
        out += [f"    /// `{s.macro}`: {s.meaning}.", f"    {s.stem},"]
    out += ["    /// The loaded `libleases.so` reports another ABI version than",
            "    /// [`ABI_VERSION`](crate::ABI_VERSION), or an older revision than",
            "    /// [`ABI_REVISION`](crate::ABI_REVISION); no authority was opened.",
            "    AbiMismatch,", "}", "", "impl ErrorKind {",
            "    /// Every kind, in status order (index + 1 is the C status), then",
            "    /// `AbiMismatch`, which has no status.",
            f"    pub const ALL: [ErrorKind; {len(statuses) + 1}] = ["]
    out += [f"        ErrorKind::{s.stem}," for s in statuses]
    out += ["        ErrorKind::AbiMismatch,", "    ];", "",
            "    /// The status name shared by every surface (`\"lease_lost\"`, …), as",
            "    /// `leases_status_name` spells it; `\"abi_mismatch\"` for `AbiMismatch`.",
            "    pub fn name(self) -> &'static str {", "        match self {"]
    out += [f'            ErrorKind::{s.stem} => "{s.name}",' for s in statuses]
    out += ['            ErrorKind::AbiMismatch => "abi_mismatch",', "        }", "    }", "",
            "    /// Whether the claim is no longer held (its job's current claim is another,",
            "    /// it expired, or the coordinator cancelled the job): the worker must stop.",
            "    pub fn is_not_held(self) -> bool {",
            "        matches!(self, " + " | ".join(f"ErrorKind::{s.stem}" for s in statuses if s.name in NOT_HELD) + ")",
            "    }", "}"]
    return out


def errors_md_block(root):
    out = ["| code | name | C | Python, C++ | Rust `ErrorKind::` | Go | meaning |",
           "|---:|---|---|---|---|---|---|"]
    for s in parse_statuses(root):
        if s.code == 0:
            out.append(f"| 0 | `ok` | `{s.macro}` | — | — | `nil` | {s.meaning or 'success'} |")
            continue
        held = " (not held)" if s.name in NOT_HELD else ""
        out.append(f"| {s.code} | `{s.name}` | `{s.macro}` | `{s.error_class}`{held} | `{s.stem}` | "
                   f"`Err{s.stem}` | {s.meaning} |")
    return out


# Marked blocks inside hand-written files: {path: (comment prefix, block function)}.
BLOCKS = {
    "bindings/python/leases/_errors.py": ("#", python_errors_block),
    "bindings/cpp/include/leases/leases.hpp": ("//", cpp_errors_block),
    "bindings/rust/src/error.rs": ("//", rust_errors_block),
    "docs/errors.md": ("<!--", errors_md_block),
}


def with_block(root, rel, prefix, lines):
    text = (root / rel).read_text()
    close = " -->" if prefix == "<!--" else ""
    begin = f"{prefix} BEGIN GENERATED by abi/leases_abi.py from include/leases.h (make abi-generate){close}"
    end = f"{prefix} END GENERATED{close}"
    if begin not in text or end not in text:
        fail(f"{rel}: lacks the markers of its generated block ({begin!r} ... {end!r})")
        return text
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + "\n".join(lines) + "\n" + end + tail


def outputs(root, manifest):
    """Every file generated from the header: {relative path: text}."""
    out = {
        "abi/leases.abi": manifest.text(),
        "capi/leases.map": map_text(manifest),
        "capi/status_names.h": status_names_h(root),
        "tests/vectors/statuses.json": statuses_json(root),
        "bindings/python/leases/_abi.py": python_abi(root, manifest),
        "bindings/rust/src/sys.rs": rust_sys(root, manifest),
    }
    for rel, (prefix, block) in BLOCKS.items():
        out[rel] = with_block(root, rel, prefix, block(root))
    return out


def check_go_kinds(root):
    """core/errors.go numbers and names its kinds as the header does."""
    text = (root / "core/errors.go").read_text()
    statuses = parse_statuses(root)[1:]
    block = text.split("KindInvalidArgument Kind = iota + 1", 1)
    kinds = ["InvalidArgument"] + re.findall(r"^\s*Kind(\w+)\s*$", block[1].split(")", 1)[0], flags=re.M) \
        if len(block) == 2 else []
    if kinds != [s.stem for s in statuses]:
        fail(f"core/errors.go's kinds {kinds} are not the header's statuses in order "
             f"{[s.stem for s in statuses]}")
    names = dict(re.findall(r"^\s*Kind(\w+):\s*\"(\w+)\",", text, flags=re.M))
    if names != {s.stem: s.name for s in statuses}:
        fail("core/errors.go's kindNames differ from the header's status names")
    sentinels = re.findall(r"^\s*Err(\w+)\s*=\s*&Error\{Kind: Kind(\w+)\}", text, flags=re.M)
    if sorted(sentinels) != sorted((s.stem, s.stem) for s in statuses):
        fail("core/errors.go needs one sentinel ErrX = &Error{Kind: KindX} per status")


# Where each binding wraps the header's functions (the generated files excluded).
WRAPPERS = {
    "Python": (("bindings/python/leases", "*.py", ("_abi.py",)), r"\b{}\b"),
    "C++": (("bindings/cpp/include/leases", "*.hpp", ()), r"\b{}\b"),
    "Rust": (("bindings/rust/src", "*.rs", ("sys.rs",)), r"sys::{}\b"),
}
# Functions a binding has no use for, or does not use yet, and why; anything
# else unused fails, and so does an entry for a function the binding uses.
NOT_WRAPPED = {
    ("Rust", "leases_status_name"): "ErrorKind::name() is generated from the same status table",
}


def check_wrapped(root):
    """Every function of leases.h is used by every binding's hand-written code,
    so a new declaration cannot ship without its wrappers."""
    functions = parse_header(root / "include/leases.h")[2]
    for lang, ((folder, pattern, skip), use) in WRAPPERS.items():
        text = "".join(strip_comments(p.read_text()) if p.suffix != ".py" else
                       re.sub(r"#[^\n]*", "", p.read_text())
                       for p in sorted((root / folder).glob(pattern)) if p.name not in skip)
        used = {n for n in functions if re.search(use.format(n), text)}
        missing = [n for n in functions if n not in used and (lang, n) not in NOT_WRAPPED]
        if missing:
            fail(f"the {lang} binding ({folder}) does not wrap: {', '.join(missing)}")
        stale = [n for n in functions if n in used and (lang, n) in NOT_WRAPPED]
        if stale:
            fail(f"the {lang} binding ({folder}) wraps {', '.join(stale)}: remove the NOT_WRAPPED entry "
                 "from abi/leases_abi.py")


def grown_or_fail(root):
    """grown_manifest, reporting every refusal as a failure (then None)."""
    try:
        return grown_manifest(root)
    except Refused as refused:
        for r in refused.args[0]:
            fail(r)
        return None


def generate(root):
    manifest = grown_or_fail(root)
    if manifest is None:
        return
    for rel, text in outputs(root, manifest).items():
        path = root / rel
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {rel}")


# ---- check -------------------------------------------------------------------


def check_sources(root):
    """The header only grew, and every generated file and number agrees with it."""
    manifest = grown_or_fail(root)
    if manifest is None:
        return None
    committed = Manifest.read(root)
    if committed.lines != manifest.lines or committed.revision != manifest.revision:
        fail("include/leases.h adds declarations that abi/leases.abi does not record yet: "
             "run `make abi-generate` and commit the result")
    abi, revision = header_numbers(root)
    for rel, want in (("abi/VERSION", abi), ("abi/REVISION", revision)):
        found = read_number(root / rel)
        if found != want:
            fail(f"{rel} is {found} but include/leases.h says {want}: they must be equal")
    for r in range(manifest.revision + 1):
        if r not in set(manifest.lines.values()):
            fail(f"revision {r} introduces no declaration: every revision adds something")
    for rel, text in outputs(root, manifest).items():
        if rel == "abi/leases.abi":
            continue
        path = root / rel
        if not path.exists() or path.read_text() != text:
            fail(f"{rel} is not what include/leases.h generates: run `make abi-generate` and commit it")
    return manifest


def check_history(root):
    """abi/history/leases.<ABI>.<R>.h: the header as it was at revision R; each
    still declares nothing the manifest does not record at R or earlier."""
    manifest = Manifest.read(root)
    for path in sorted((root / "abi/history").glob("leases.*.h")):
        m = re.match(r"leases\.(\d+)\.(\d+)\.h$", path.name)
        if not m:
            fail(f"{path}: history headers are named leases.<abi>.<revision>.h")
            continue
        at = int(m.group(2))
        defines, typedefs, functions = parse_header(path)
        lines = [f"define {k} {v}" for k, v in defines.items() if k not in NUMBERING]
        lines += [f"typedef {t[len('typedef '):]}" for t in typedefs]
        lines += [f"function {f}" for f in functions.values()]
        for line in lines:
            r = manifest.lines.get(line)
            if r is None or r > at:
                fail(f"{path.name} declares what revision {at} does not have in abi/leases.abi: {line}")
        if len(lines) != sum(1 for r in manifest.lines.values() if r <= at):
            fail(f"{path.name} does not declare everything abi/leases.abi records up to revision {at}")


def check_constants(root):
    """The limits of the header equal the Go core's (the core enforces them)."""
    defines, _, _ = parse_header(root / "include/leases.h")
    core = "".join(p.read_text() for p in sorted((root / "core").glob("*.go")) if not p.name.endswith("_test.go"))

    def go_const(name):
        m = re.search(rf"\b{name}\s+(?:int64\s+)?=\s*(1\s*<<\s*\d+|[0-9_]+)", core)
        if not m:
            return None
        v = m.group(1).replace("_", "")
        if "<<" in v:
            a, b = v.split("<<")
            return int(a) << int(b)
        return int(v)

    pairs = {
        "LEASES_MAX_NAME_LEN": "MaxNameLen", "LEASES_MAX_REASON_LEN": "MaxReasonLen",
        "LEASES_MAX_PAYLOAD_LEN": "MaxPayloadLen", "LEASES_MAX_FACTS_LEN": "MaxFactsLen",
        "LEASES_MAX_PATH_LEN": "MaxPathLen", "LEASES_MAX_TOKEN_LEN": "MaxTokenLen",
        "LEASES_MAX_DURATION_US": "MaxDurationUS", "LEASES_MAX_WAIT_US": "MaxWaitUS",
        "LEASES_MAX_PAGE_SIZE": "MaxPageSize", "LEASES_DEFAULT_PAGE_SIZE": "DefaultPageSize",
        "LEASES_MAX_CURSOR_LEN": "MaxCursorLen",
    }
    for macro, const in pairs.items():
        hv = defines.get(macro, "")
        m = re.search(r"\d+", hv.replace("INT64_C", ""))
        want = go_const(const)
        if want is None or not m or int(m.group(0)) != want:
            fail(f"{macro} is {hv or 'missing'} in include/leases.h but core.{const} is {want}")


def dynamic_symbols(binary, defined):
    """{name: version or ''} of a binary's dynamic symbols (defined or undefined)."""
    args = ["nm", "-D", "--defined-only" if defined else "--undefined-only", str(binary)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        kind, sym = parts[-2], parts[-1]
        if kind == "A":  # a version definition, not a symbol
            continue
        name, _, version = sym.partition("@")
        syms[name] = version.lstrip("@")
    return syms


def version_nodes(so):
    out = subprocess.run(["readelf", "-V", "-W", str(so)], check=True, capture_output=True, text=True).stdout
    section = out.split(".gnu.version_d", 1)[-1].split(".gnu.version_r", 1)[0]
    return set(re.findall(r"Name: (LEASES_\w+(?:\.\d+)?)", section))


def soname(so):
    out = subprocess.run(["readelf", "-d", "-W", str(so)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\).*\[(.*)\]", out)
    return m.group(1) if m else None


def check_library(root, manifest, so, test_so):
    """Each library exports exactly the header's functions, each at the node of
    the revision that introduced it, and answers the header's numbers."""
    _, _, testing = parse_header(root / "include/leases_testing.h")
    want = {name: node(manifest.abi, r) for name, r in manifest.functions().items()}
    nodes = {node(manifest.abi, r) for r in range(manifest.revision + 1)}
    for lib, extra, extra_nodes in ((so, {}, set()), (test_so, {n: TESTING_NODE for n in testing}, {TESTING_NODE})):
        if lib is None:
            continue
        expected = dict(want, **extra)
        syms = dynamic_symbols(lib, defined=True)
        missing = sorted(set(expected) - set(syms))
        if missing:
            fail(f"{lib}: declared but not exported: {', '.join(missing)}")
        undeclared = sorted(set(syms) - set(expected))
        if undeclared:
            fail(f"{lib}: exported but not declared in the headers (only the header's functions may be "
                 f"exported; see capi/leases.map): {', '.join(undeclared[:20])}")
        for name in sorted(set(expected) & set(syms)):
            if syms[name] != expected[name]:
                fail(f"{lib}: {name} has the symbol version {syms[name] or 'none'}, but abi/leases.abi "
                     f"records it at {expected[name]}")
        found_nodes = version_nodes(lib)
        if found_nodes != nodes | extra_nodes:
            fail(f"{lib}: version nodes {sorted(found_nodes)}, expected {sorted(nodes | extra_nodes)}")
        if soname(lib) != f"libleases.so.{manifest.abi}":
            fail(f"{lib}: SONAME {soname(lib)}, expected libleases.so.{manifest.abi}")
    if so is not None:
        loaded = ctypes.CDLL(str(pathlib.Path(so).resolve()))
        for fn, expected in (("leases_abi_version", manifest.abi), ("leases_abi_revision", manifest.revision)):
            f = getattr(loaded, fn)
            f.restype, f.argtypes = ctypes.c_uint32, []
            if f() != expected:
                fail(f"{so}: {fn}() returns {f()} but include/leases.h says {expected}")


def check_no_seam(so, test_so):
    data = pathlib.Path(so).read_bytes()
    for s in SEAM_STRINGS:
        if s in data:
            fail(f"{so} (release) contains the test seam string {s.decode()!r}")
    if test_so is not None and b"leases_testing_set_clock" not in pathlib.Path(test_so).read_bytes():
        fail(f"{test_so} (test build) lacks leases_testing_set_clock: the seam check would prove nothing")


def check_loader_refuses_older_library(root, manifest, so, cc):
    """A program using a function of the newest revision does not start against
    a library of the revision before (a stub with that revision's nodes): the
    loader names the missing version node."""
    if manifest.revision == 0:
        return
    functions = manifest.functions()
    newest = sorted(n for n, r in functions.items() if r == manifest.revision)[0]
    older = Manifest(manifest.abi, manifest.revision - 1,
                     {l: r for l, r in manifest.lines.items() if r < manifest.revision})
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "stub.c").write_text("".join(f"void {n}(void) {{}}\n" for n, r in functions.items()
                                          if r < manifest.revision))
        (d / "stub.map").write_text(map_text(older))
        (d / "old").mkdir()
        (d / "new").mkdir()
        (d / "new/libleases.so").symlink_to(pathlib.Path(so).resolve())
        (d / "prog.c").write_text(f"void {newest}(void);\nint main(void) {{ {newest}(); return 0; }}\n")
        steps = [
            cc.split() + ["-shared", "-fPIC", str(d / "stub.c"), "-o", str(d / f"old/libleases.so.{manifest.abi}"),
                          f"-Wl,--version-script={d / 'stub.map'},-soname,libleases.so.{manifest.abi}"],
            cc.split() + [str(d / "prog.c"), "-o", str(d / "prog"), f"-L{d / 'new'}", "-lleases"],
        ]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"loader check: {' '.join(cmd)} failed:\n{r.stderr}")
                return
        r = subprocess.run([str(d / "prog")], capture_output=True, text=True,
                           env={"LD_LIBRARY_PATH": str(d / "old")})
        want = f"version `{node(manifest.abi, manifest.revision)}' not found"
        if r.returncode == 0 or want not in r.stderr:
            fail(f"a program using {newest} (revision {manifest.revision}) started against a revision "
                 f"{manifest.revision - 1} library, or without the loader's message {want!r}: "
                 f"exit {r.returncode}, {r.stderr.strip()!r}")


def check_compiles(root, cc, cxx):
    inc = root / "include"
    cases = []
    for h in ("leases.h", "leases_testing.h"):
        once = f'#include "{h}"\nint leases_header_check_{h[:-2]};\n'
        twice = f'#include "{h}"\n#include "{h}"\nint leases_header_check_{h[:-2]};\n'
        cases += [(cc, "c", ["-std=c99"], once, f"{h} alone as C99"),
                  (cc, "c", ["-std=c99"], twice, f"{h} twice as C99"),
                  (cxx, "cpp", ["-std=c++17"], once, f"{h} alone as C++17"),
                  (cxx, "cpp", ["-std=c++17"], twice, f"{h} twice as C++17")]
    with tempfile.TemporaryDirectory() as d:
        for i, (compiler, ext, std, src, what) in enumerate(cases):
            f = pathlib.Path(d) / f"h{i}.{ext}"
            f.write_text(src)
            cmd = compiler.split() + std + ["-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc}",
                                             "-c", str(f), "-o", str(f) + ".o"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"{what} does not compile: {' '.join(cmd)}\n{r.stderr}")


def check_binary(root, binary, revision):
    """Every libleases function binary uses is versioned at revision <= REVISION."""
    manifest = Manifest.read(root)
    allowed = {node(manifest.abi, r) for r in range(revision + 1)}
    used = {n: v for n, v in dynamic_symbols(binary, defined=False).items() if n.startswith("leases_")}
    if not used:
        fail(f"{binary} uses no libleases function")
    for name, version in sorted(used.items()):
        if version not in allowed:
            fail(f"{binary} uses {name}@{version or '(unversioned)'}, not a node of revision <= {revision}")
    if not failures:
        print(f"{binary}: all {len(used)} libleases functions it uses are of revision <= {revision}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("generate")
    c = sub.add_parser("check")
    c.add_argument("--so")
    c.add_argument("--test-so")
    c.add_argument("--cc", default="cc")
    c.add_argument("--cxx", default="c++")
    b = sub.add_parser("check-binary")
    b.add_argument("binary")
    b.add_argument("revision", type=int)
    args = ap.parse_args()
    root = pathlib.Path(args.root).resolve()
    if args.command == "generate":
        generate(root)
    elif args.command == "check-binary":
        check_binary(root, args.binary, args.revision)
    else:
        manifest = check_sources(root)
        check_history(root)
        check_constants(root)
        check_go_kinds(root)
        check_wrapped(root)
        if args.so and manifest is not None:
            check_library(root, manifest, args.so, args.test_so)
            check_no_seam(args.so, args.test_so)
            check_loader_refuses_older_library(root, manifest, args.so, args.cc)
        check_compiles(root, args.cc, args.cxx)
        if not failures:
            print("ABI checks passed: the ABI only grew; manifest, version script, numbers and symbol "
                  "versions agree with the header; headers compile; no test seam")
    if failures:
        print(f"{len(failures)} ABI check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
