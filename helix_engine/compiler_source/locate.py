"""Where in a compiler checkout a term lives: upstream's ranking, the matched lines, and the
pass / option / op definitions that mention it.

Score (upstream's ``inspect_compiler_source.py locate``): 6 × path hits + 2 × min(text hits, 5)
+ area bonus (docs 2, lib 1) + hint bonus; terms match as case-insensitive substrings of the
path (relative to the root) or of the text. Results are grouped by area in reading order and
each group is cut to ``limit``. helix adds what upstream left to the agent's eyes: each file's
first matching lines (``path:line``) and the definitions found in the best files, so the
evidence names the pass (``def XxxPass : Pass<"name"``), its ``createXxxPass``, its
``Option<``/``cl::opt`` and the pipelines that add it (``passes.ttir.add_...``).
Everything returned is raw text from the checkout: printers escape it.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from helix_engine.compiler_source.tree import AREA_BONUS, AREAS, SourceTree, checkout_commit, walk
from helix_engine.errors import HelixError

HINTS: tuple[str, ...] = ("pass", "feature", "dialect", "conversion", "layout", "memory", "pipeline")
LINES_PER_HIT = 3
LINE_CHARS = 200
#: Definitions are read from this many best-scoring files (docs, lib, include; not tests).
DEFINITION_FILES = 60
MAX_DEFINITIONS = 40
MAX_TERMS = 80


@dataclass
class Hit:
    """One ranked file: upstream's fields plus its first matching lines."""

    area: str
    path: str
    score: int
    matched_terms: list[str]
    why: str
    lines: list[tuple[int, str]] = field(default_factory=list)

    @property
    def line(self) -> int | None:
        return self.lines[0][0] if self.lines else None


@dataclass
class Definition:
    """A definition line that names one of the terms."""

    kind: str  # pass | option | cl::opt | pass-constructor | pipeline | binding | tablegen
    name: str
    detail: str
    path: str
    line: int
    text: str

    @property
    def label(self) -> str:
        """``PlanMemory "hivm-plan-memory"``: the record or function, then the name it registers."""
        return f'{self.name} "{self.detail}"' if self.detail else self.name


@dataclass
class Located:
    source_root: str
    commit: str | None
    terms: list[str]
    hint: str | None
    areas: dict[str, list[Hit]]
    definitions: list[Definition]
    tree: dict[str, Any]
    elapsed_s: float

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for hits in out["areas"].values():
            for hit in hits:
                hit["lines"] = [{"line": n, "text": t} for n, t in hit["lines"]]
                hit["line"] = hit["lines"][0]["line"] if hit["lines"] else None
        return out


def normalize_terms(terms: list[str]) -> list[str]:
    """Lower-cased, stripped, de-duplicated terms in their order; a sentence when none is left."""
    seen: list[str] = []
    for term in terms:
        low = str(term).strip().lower()
        if low and low not in seen:
            seen.append(low)
    if not seen:
        raise HelixError("no search term given; pass --term NAME (a pass, op or option name), or --round N to "
                         "search for the names in that round's IR capture.")
    if len(seen) > MAX_TERMS:
        raise HelixError(f"{len(seen)} terms is more than the {MAX_TERMS} one search takes; narrow the question.")
    return seen


def score(rel: str, text: str, area: str, hint: str | None, terms: list[str]) -> tuple[int, list[str], str]:
    """Upstream's score of one file for lower-cased ``terms`` (0 when no term matches)."""
    rel_low = rel.lower()
    text_low = text.lower()
    matched = [t for t in terms if t in rel_low or t in text_low]
    if not matched:
        return 0, [], ""
    path_hits = sum(rel_low.count(t) for t in matched)
    text_hits = sum(text_low.count(t) for t in matched)
    value = path_hits * 6 + min(text_hits, 5) * 2 + AREA_BONUS.get(area, 0) + hint_bonus(rel_low, area, hint)
    return value, matched, why(area, rel_low, hint)


def hint_bonus(rel_low: str, area: str, hint: str | None) -> int:
    bonus = 0
    if hint == "pass":
        bonus += 5 if area == "docs" else 0
        bonus += 3 if "passes" in rel_low else 0
        bonus += 2 if area == "include" and "passes" in rel_low else 0
    elif hint == "feature":
        bonus += 5 if area == "docs" and "features" in rel_low else 0
    elif hint == "conversion":
        bonus += 4 if area == "lib" and "conversion" in rel_low else 0
        bonus += 2 if area == "include" and "conversion" in rel_low else 0
    elif hint == "dialect":
        bonus += 4 if area == "lib" and "dialect" in rel_low else 0
    elif hint in ("layout", "memory", "pipeline"):
        bonus += {"lib": 3, "docs": 2}.get(area, 0)
    return bonus


def why(area: str, rel_low: str, hint: str | None) -> str:
    if area == "docs":
        return "pass docs match" if "passes" in rel_low else "feature docs match" if "features" in rel_low else "docs match"
    if area == "lib":
        for word, text in (("conversion", "conversion"), ("dialect", "dialect"), ("transforms", "transform")):
            if word in rel_low:
                return f"{text} implementation match"
        return "pass pipeline match" if "backend" in rel_low else "implementation match"
    if area == "test":
        return "test match"
    if "passes" in rel_low:
        return "generated pass declaration match"
    return f"{hint} declaration match" if hint else "declaration match"


def matching_lines(text: str, terms: list[str], limit: int = LINES_PER_HIT) -> list[tuple[int, str]]:
    """The first line naming each term, until ``limit`` lines (so a file matched by three terms
    shows all three, not the first term three times)."""
    out: list[tuple[int, str]] = []
    left = list(terms)
    for number, line in enumerate(text.splitlines(), 1):
        low = line.lower()
        new = [t for t in left if t in low]
        if new:
            out.append((number, line.strip()[:LINE_CHARS]))
            left = [t for t in left if t not in new]
            if len(out) >= limit or not left:
                break
    return out


def locate(source_root: Any, terms: list[str], hint: str | None = None, limit: int = 10,
           tree: SourceTree | None = None) -> Located:
    """Rank the checkout's files for ``terms`` (one walk, one read per file)."""
    if hint is not None and hint not in HINTS:
        raise HelixError(f"unknown --hint {hint!r}; use one of {', '.join(HINTS)}.")
    started = time.perf_counter()
    wanted = normalize_terms(terms)
    tree = tree or walk(source_root)
    ranked: dict[str, list[Hit]] = {a: [] for a in AREAS}
    scores: dict[str, int] = {}
    op_files: list[str] = []  # TableGen files defining a `dialect.op` term's op (its name is not in them)
    needles = op_needles(wanted)
    for f in tree.files:
        text = tree.read(f.rel)
        if text is None:
            continue
        if needles and f.rel.endswith(".td") and f.area != "test" and len(op_files) < DEFINITION_FILES:
            low = text.lower()
            if any(n in low for n in needles):
                op_files.append(f.rel)
        value, matched, reason = score(f.rel, text, f.area, hint, wanted)
        if value > 0:
            ranked[f.area].append(Hit(f.area, f.rel, value, matched, reason))
            if f.area != "test":
                scores[f.rel] = value
    # only the files reported are read again (a generic term can match thousands: none is kept in memory)
    for hits in ranked.values():
        hits.sort(key=lambda h: (-h.score, h.path))
        del hits[max(limit, 0):]
        for hit in hits:
            hit.lines = matching_lines(tree.read(hit.path) or "", hit.matched_terms)
    best = sorted(scores, key=lambda rel: (-scores[rel], rel))[:DEFINITION_FILES]
    best += [rel for rel in op_files if rel not in best]
    definitions = find_definitions([(rel, tree.read(rel) or "") for rel in best], wanted)
    return Located(source_root=str(tree.root), commit=checkout_commit(tree.root), terms=wanted, hint=hint,
                   areas=ranked, definitions=definitions, tree=tree.summary(),
                   elapsed_s=round(time.perf_counter() - started, 3))


# ------------------------------------------------------------------------------ definitions

_DEF_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pass", re.compile(r"\bdef\s+(\w+)\s*:\s*(?:\w*Pass)\s*<\s*\"([^\"]+)\"")),
    ("option", re.compile(r"\b(?:List)?Option\s*<\s*\"(\w+)\"\s*,\s*\"([^\"]+)\"")),
    ("cl::opt", re.compile(r"\bcl::(?:opt|list)\s*<[^>]*>\s*(\w+)\s*\(\s*\"([^\"]+)\"")),
    ("binding", re.compile(r"\bADD_PASS(?:_OPTION)?_WRAPPER\w*\s*\(\s*\"(\w+)\"\s*,\s*([\w:]+)")),
    ("pipeline", re.compile(r"\b((?:\w+\.)?passes\.\w+\.(add_\w+))\s*\(")),
    ("pass-constructor", re.compile(r"\b(create\w*Pass)\s*\(()")),
    ("tablegen", re.compile(r"\bdef\s+(\w+)\s*:\s*\w+\s*<\s*\"([\w.\-]+)\"")),
)
_OP_TERM = re.compile(r"^([a-z_][a-z0-9_]*)\.([a-z_][\w.]*)$")
_COMMENT = re.compile(r"/\*.*?\*/")
KIND_ORDER = ("pass", "option", "cl::opt", "pass-constructor", "binding", "tablegen", "pipeline")


def op_needles(terms: list[str]) -> set[str]:
    """``<"load"`` for a ``tt.load`` term: how a TableGen op record spells its mnemonic."""
    return {f'<"{m.group(2)}"' for t in terms if (m := _OP_TERM.match(t))}


def _relevant(kind: str, groups: tuple[str, ...], line_low: str, terms: list[str]) -> bool:
    """A definition counts when its line names a term, or (TableGen ``def X : Y<"load"``) when a
    ``dialect.op`` term's op is the mnemonic and X carries the dialect's prefix (``TT_LoadOp``)."""
    if any(t in line_low for t in terms):
        return True
    if kind != "tablegen":
        return False
    record, mnemonic = groups[0].lower(), groups[1].lower()
    for t in terms:
        m = _OP_TERM.match(t)
        if m and m.group(2) == mnemonic and record.startswith(m.group(1).replace("_", "") + "_"):
            return True
    return False


def find_definitions(files: list[tuple[str, str]], terms: list[str]) -> list[Definition]:
    """Definitions naming a term, one per (kind, name, file), passes and options first. A second
    look follows the links a first one found: a pass record's name (``PlanMemory`` →
    ``createPlanMemoryPass``) and a pipeline's ``add_x`` (→ the ``ADD_PASS_WRAPPER("add_x", ...)`` binding)."""
    found: dict[tuple[str, str, str], Definition] = {}
    _scan_definitions(files, terms, found)
    derived = sorted({d.name.lower() for d in found.values() if d.kind == "pass"}
                     | {d.detail.lower() for d in found.values() if d.kind == "pipeline"})
    derived = [t for t in derived if len(t) >= 4 and t not in terms]
    if derived:
        _scan_definitions(files, derived, found)
    ordered = sorted(found.values(), key=lambda d: KIND_ORDER.index(d.kind))  # stable: file order within a kind
    return ordered[:MAX_DEFINITIONS]


def _scan_definitions(files: list[tuple[str, str]], terms: list[str],
                      found: dict[tuple[str, str, str], Definition]) -> None:
    for rel, text in files:
        in_pass = False  # inside the record of a pass found here: its Option<...> lines belong to it
        for number, raw in enumerate(text.splitlines(), 1):
            if in_pass and raw.startswith("}"):
                in_pass = False
            if "def" not in raw and "Option" not in raw and "cl::" not in raw and "pass" not in raw.lower():
                continue
            line = _COMMENT.sub("", raw)
            low = line.lower()
            for kind, pattern in _DEF_PATTERNS:
                m = pattern.search(line)
                if m is None or not (_relevant(kind, m.groups(), low, terms) or (in_pass and kind == "option")):
                    continue
                found.setdefault((kind, m.group(1), rel), Definition(
                    kind=kind, name=m.group(1), detail=m.group(2).strip()[:80], path=rel, line=number,
                    text=raw.strip()[:LINE_CHARS]))
                in_pass = in_pass or kind == "pass"
                break
            if len(found) >= 4 * MAX_DEFINITIONS:
                return


# ------------------------------------------------------------------------------ show

SHOW_CONTEXT = 20


def parse_location(spec: str) -> tuple[str, int | None]:
    """``PATH[:LINE]`` → (PATH, LINE); the line is optional (a path may hold colons)."""
    path, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit() and path:
        return path, int(tail)
    return spec, None


def show(source_root: Any, spec: str, context: int = SHOW_CONTEXT) -> dict[str, Any]:
    """Lines of one checkout file around LINE (the first 2×context lines without one). The path
    is relative to the root, inside it, a regular file, not a link: a read of the checkout only."""
    from helix_engine.compiler_source.tree import check_root

    root = check_root(source_root)
    rel, line = parse_location(spec)
    rel_path = rel.replace("\\", "/").lstrip("/")
    if rel != rel_path or any(p == ".." for p in rel_path.split("/")) or not rel_path:
        raise HelixError(f"{rel!r} is not a path inside the checkout; give it relative to --source-root, "
                         "as `helix compiler-source locate` prints it.")
    tree = SourceTree(root=root)
    text = tree.read(rel_path)
    if text is None:
        raise HelixError(f"cannot show {rel_path}: it is not a readable text file inside {root} (links are not "
                         "followed, files over 1 MB are not read).")
    lines = text.splitlines()
    context = max(context, 0)
    if line is None:
        first, last = 1, min(len(lines), 2 * context + 1)
    else:
        if not 1 <= line <= max(len(lines), 1):
            raise HelixError(f"{rel_path} has {len(lines)} lines; line {line} is not one of them.")
        first, last = max(1, line - context), min(len(lines), line + context)
    return {"source_root": str(root), "path": rel_path, "line": line, "first": first, "last": last,
            "total_lines": len(lines), "lines": [{"line": n, "text": lines[n - 1]} for n in range(first, last + 1)]}
