"""The names a round's IR capture holds, as search terms for the compiler checkout.

Why: the skill escalates to compiler source only after IR evidence narrowed the question, so the
first search is for what the capture itself names, not for words the agent guesses:
- passes: MLIR dump headers (``IR Dump After CSE (cse)`` in ``all-ir.txt``) and the Ascend stage
  files ``bishengir_stages/<N>_<pass>.mlir``;
- stages: the Triton MLIR stages captured (``ttir``, ``ttgir``), which is how triton's backends
  name their pass pipelines (``make_ttir``, ``passes.ttir.add_...``);
- ops: ``dialect.op`` at the start of an operation (``tt.load``, ``scf.for``, ``hivm.hir.vadd``);
- attributes and layouts: ``tt.divisibility = 16``, ``"ttg.num-warps" = 4``, ``#ttg.blocked<``.
Stage files are read through the workspace's safe reader; ``loc(...)`` and other strings are
dropped before attributes are looked for, so a file path in a location never becomes a term.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.workspace import layout
from helix_engine.workspace.reading import owning_workspace, read_json_object, read_text_safe

MLIR_SUFFIXES = (".mlir", ".ttir", ".ttgir")
ALL_IR = "all-ir.txt"
MAX_ALL_IR_BYTES = 64 << 20
#: How many terms of each kind one round search takes (most frequent first).
LIMITS: dict[str, int] = {"pass": 30, "stage": 6, "op": 16, "attribute": 10, "layout": 6}
#: Ops every kernel has; searching for them says nothing about this one.
COMMON_OPS = frozenset({"arith.constant", "tt.return", "func.return", "llvm.return", "builtin.module", "tt.func",
                        "func.func", "llvm.func", "scf.yield", "tt.reduce.return", "tt.scan.return"})

_HEADER = re.compile(r"IR Dump (?:After|Before) (\w+)(?: on \S+)?(?: \(([\w.\-]+)\))?")
_STAGE_FILE = re.compile(r"^\d+[_\-.]?(.+)$")
_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+)"?(?=[\s(<{"]|$)')
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LOC = re.compile(r"\bloc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")
_ATTR_QUOTED = re.compile(r'"([a-z_][a-z0-9_]*\.[a-z_][\w.\-]*)"\s*=')
_ATTR_BARE = re.compile(r"(?<![\w.%#!@$])([a-z_][a-z0-9_]*\.[a-z_][\w.\-]*)\s*=(?!=)")
_LAYOUT = re.compile(r"#([a-z_][a-z0-9_]*\.[a-z_][\w]*)<")


@dataclass
class Term:
    name: str
    kind: str  # pass | stage | op | attribute | layout
    count: int
    source: str  # where it was seen first (a stage file, all-ir.txt)


def round_ir_dir(workspace: Path, n: int) -> Path:
    """The round's IR folder: its round-state's ``ir_dir`` when that names a folder, else ``ir/``."""
    round_dir = Path(workspace) / layout.round_dir_name(n)
    if not round_dir.is_dir():
        raise HelixError(f"{round_dir} does not exist; `helix status` lists the rounds.")
    state_file = round_dir / layout.ROUND_STATE
    state: dict[str, Any] = {}
    if state_file.is_file():
        state = read_json_object(state_file, owning_workspace(state_file), what="round state", fix="")[0] or {}
    declared = state.get("ir_dir")
    if isinstance(declared, str) and declared.strip():
        candidate = round_dir / declared
        # a declared folder is used only inside the round (round-state.json is workspace data)
        if candidate.is_dir() and not candidate.is_symlink() and round_dir.resolve() in candidate.resolve().parents:
            return candidate
    folder = round_dir / "ir"
    if not folder.is_dir():
        raise HelixError(f"{layout.round_dir_name(n)} has no IR capture ({folder}); capture it first with "
                         f"`helix ir capture --ir-dir {folder} --operator-file {round_dir}/opt_<op>.py`, or give "
                         "the names with --term.")
    return folder


def _strip(line: str) -> str:
    return _STRING.sub('""', _LOC.sub("", line))


def scan_text(text: str, source: str, found: dict[str, Counter[str]], first: dict[tuple[str, str], str]) -> None:
    def add(kind: str, name: str) -> None:
        found[kind][name] += 1
        first.setdefault((kind, name), source)

    for raw in text.splitlines():
        stripped = raw.lstrip()
        if not stripped or stripped.startswith(("#loc", "//")):
            if "IR Dump" in raw:
                scan_header(raw, add)
            continue
        m = _OP.match(raw)
        if m and m.group(1) not in COMMON_OPS:
            add("op", m.group(1))
        for name in _LAYOUT.findall(raw):
            add("layout", name)
        for name in _ATTR_QUOTED.findall(_LOC.sub("", raw)):
            add("attribute", name)
        for name in _ATTR_BARE.findall(_strip(raw)):
            add("attribute", name)


def scan_header(line: str, add: Any) -> None:
    m = _HEADER.search(line)
    if m:
        add("pass", m.group(2) or m.group(1))


def terms_from_ir(ir_dir: Path) -> list[Term]:
    """Every kind of name in the capture, most frequent first within a kind, capped per kind."""
    from helix_engine.ir.stages import list_stages

    ir_dir = Path(ir_dir)
    found: dict[str, Counter[str]] = {k: Counter() for k in LIMITS}
    first: dict[tuple[str, str], str] = {}
    for stage in list_stages(ir_dir):
        suffix = stage.path.suffix
        if stage.group:  # a Triton stage <kernel>/<kernel>.ttir: its MLIR stages name the pipelines
            if suffix in MLIR_SUFFIXES:
                found["stage"][suffix.lstrip(".")] += 1
                first.setdefault(("stage", suffix.lstrip(".")), stage.rel_path)
        else:  # an Ascend stage file <N>_<pass>.mlir (a file without a number is named for its pass)
            m = _STAGE_FILE.match(stage.stem)
            name = m.group(1) if m else stage.stem
            found["pass"][name] += 1
            first.setdefault(("pass", name), stage.rel_path)
        if suffix in MLIR_SUFFIXES:
            scan_text(stage.text(), stage.rel_path, found, first)
    all_ir = ir_dir / ALL_IR
    if all_ir.is_file():
        text, _ = read_text_safe(all_ir, owning_workspace(all_ir), max_bytes=MAX_ALL_IR_BYTES)
        for line in (text or "").splitlines():
            if "IR Dump" in line:
                scan_header(line, lambda kind, name: (found[kind].update([name]),
                                                      first.setdefault((kind, name), ALL_IR)))
    terms: list[Term] = []
    for kind, limit in LIMITS.items():
        for name, count in sorted(found[kind].items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
            terms.append(Term(name=name, kind=kind, count=count, source=first[(kind, name)]))
    return terms


def terms_json(terms: list[Term]) -> list[dict[str, Any]]:
    return [asdict(t) for t in terms]
