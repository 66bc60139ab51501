"""Compiler stage files: list, summarize, diff, find changes, performance signals.

Works on two layouts inside an IR dir:
- Ascend (upstream capture): ``bishengir_stages/**/<N>_<pass>.mlir``, ordered by N (files without
  a number last), then stem, then path;
- Triton (helix capture on cuda/cpu): ``<kernel>/<kernel>.{source,ttir,ttgir,llir,ptx,amdgcn}``,
  ordered by kernel then pipeline stage. Adjacent pairs never cross kernels.
Keyword counts are case-insensitive substring counts, as upstream (so ``for`` also counts
``format``): the scores stay comparable with upstream's, and they are only ever compared
between stages of one kernel.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_engine.errors import HelixError
from helix_engine.workspace.reading import owning_workspace, read_bytes_safe, read_json_object

if TYPE_CHECKING:
    from helix_engine.ir.rounds import RoundDiff

KEYWORD_WEIGHTS: dict[str, int] = {"alloc": 3, "copy": 4, "matmul": 5, "for": 1, "if": 1, "vector": 3, "load": 2,
                                   "store": 2, "dma": 4, "wait": 6, "set_flag": 6, "barrier": 6}
KEYWORDS = tuple(KEYWORD_WEIGHTS)
TRITON_ORDER: dict[str, int] = {".source": 0, ".ttir": 1, ".ttgir": 2, ".llir": 3, ".ptx": 4, ".amdgcn": 4}
ASCEND_DIR = "bishengir_stages"
MAX_STAGE_BYTES = 64 * 1024 * 1024
_NUM_RE = re.compile(r"^(\d+)[_\-.]?(.*)$")


@dataclass
class Stage:
    """One stage file and its measurements."""

    path: Path
    rel_path: str
    stem: str
    order: int | None
    group: str
    size: int
    lines: int
    keywords: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """What lists show and `select_stage` accepts first: the path relative to the IR dir."""
        return self.rel_path

    @property
    def interesting(self) -> int:
        return sum(self.keywords.get(k, 0) * w for k, w in KEYWORD_WEIGHTS.items())

    @property
    def vector_ops(self) -> int:
        return self.keywords.get("vector", 0)

    @property
    def transfer_ops(self) -> int:
        return sum(self.keywords.get(k, 0) for k in ("copy", "dma", "load", "store"))

    @property
    def sync_ops(self) -> int:
        return sum(self.keywords.get(k, 0) for k in ("wait", "set_flag", "barrier"))

    def text(self) -> str:
        return _read(self.path)

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.rel_path, "stem": self.stem, "order": self.order, "group": self.group,
                "size": self.size, "lines": self.lines, "keywords": self.keywords,
                "interesting_score": self.interesting}


def _read(path: Path) -> str:
    """A stage file through the safe reader (inside the workspace that owns it, capped)."""
    data, problem = read_bytes_safe(path, owning_workspace(path), max_bytes=MAX_STAGE_BYTES)
    if problem is not None and "over the" in problem.message:
        raise HelixError(f"{path} is over {MAX_STAGE_BYTES >> 20} MB; helix does not read stage files that large.")
    if problem is not None:
        raise HelixError(f"cannot read stage file {path}: it {problem.message}.")
    return (data or b"").decode("utf-8", errors="replace")


#: PTX spells loads/stores/barriers as instructions (``ld.global``, ``bar.sync``); these are added
#: to the upstream keyword counts for ``.ptx`` stages so PTX is not scored as empty.
PTX_ALIASES: dict[str, tuple[str, ...]] = {"load": ("ld.",), "store": ("st.",), "barrier": ("bar.sync", "bar.arrive"),
                                           "copy": ("cp.async",), "matmul": ("mma.",), "wait": ("cp.async.wait",)}


def count_keywords(text: str, suffix: str = "") -> dict[str, int]:
    low = text.lower()
    counts = {k: low.count(k) for k in KEYWORDS}
    if suffix == ".ptx":
        for key, spellings in PTX_ALIASES.items():
            counts[key] += sum(low.count(s) for s in spellings)
    return counts


def _measure(path: Path, root: Path, order: int | None, group: str, stem: str) -> Stage:
    text = _read(path)
    return Stage(path=path, rel_path=path.relative_to(root).as_posix(), stem=stem, order=order, group=group,
                 size=len(text.encode("utf-8")), lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
                 keywords=count_keywords(text, path.suffix))


def list_stages(ir_dir: Path) -> list[Stage]:
    """Every stage under ``ir_dir`` in pipeline order. HelixError when there is none."""
    ir_dir = Path(ir_dir)
    if not ir_dir.is_dir():
        raise HelixError(f"IR directory {ir_dir} does not exist; run `helix ir capture --ir-dir {ir_dir} ...` first.")
    stages: list[Stage] = []
    ascend_root = ir_dir / ASCEND_DIR if (ir_dir / ASCEND_DIR).is_dir() else None
    for path in sorted(ir_dir.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix in TRITON_ORDER:
            rel_parent = path.parent.relative_to(ir_dir).as_posix()
            group = path.stem if rel_parent in ("", ".") else rel_parent
            stages.append(_measure(path, ir_dir, TRITON_ORDER[path.suffix], group, path.stem))
    mlir_root = ascend_root or (ir_dir if not stages else None)
    if mlir_root is not None:
        for path in sorted(mlir_root.rglob("*.mlir")):
            if path.is_file():
                match = _NUM_RE.match(path.stem)
                order = int(match.group(1)) if match else None
                stages.append(_measure(path, ir_dir, order, "", path.stem))
    if not stages:
        raise HelixError(f"no stage files under {ir_dir} (expected {ASCEND_DIR}/**/*.mlir or <kernel>/*.ttir|"
                         ".ttgir|.llir|.ptx); run `helix ir capture` first.")
    stages.sort(key=lambda s: (s.group, s.order is None, s.order or 0, s.stem, s.rel_path))
    return stages


def sort_stages(stages: list[Stage], sort_by: str) -> list[Stage]:
    if sort_by == "order":
        return list(stages)
    keys = {"size": lambda s: s.size, "lines": lambda s: s.lines, "interesting": lambda s: s.interesting}
    if sort_by not in keys:
        raise HelixError(f"unknown --sort-by {sort_by!r}; use order, size, lines or interesting.")
    return sorted(stages, key=keys[sort_by], reverse=True)


def filter_stages(stages: list[Stage], grep: str | None) -> list[Stage]:
    if not grep:
        return stages
    try:
        pattern = re.compile(grep)
    except re.error as exc:
        raise HelixError(f"--grep {grep!r} is not a valid regular expression ({exc}).") from exc
    return [s for s in stages if pattern.search(s.rel_path)]


def select_stage(stages: list[Stage], selector: str) -> Stage:
    """Exact relative path → exact file name → stem → unique substring; ambiguity is an error."""
    for key in (lambda s: s.rel_path, lambda s: s.path.name, lambda s: s.stem):
        hits = [s for s in stages if key(s) == selector]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            break
    hits = [s for s in stages if selector in s.rel_path]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise HelixError(f"no stage matches {selector!r}; `helix ir list-stages` shows the names.")
    shown = ", ".join(s.rel_path for s in hits[:8])
    raise HelixError(f"{selector!r} matches {len(hits)} stages ({shown}); give the full relative path.")


def stage_summary(stage: Stage, highlights: int = 8) -> dict[str, Any]:
    """Counts plus up to ``highlights`` lines holding the heaviest keywords."""
    heavy = sorted(KEYWORDS, key=lambda k: -KEYWORD_WEIGHTS[k])
    lines_out: list[str] = []
    for weight_floor in (6, 4, 1):
        keys = [k for k in heavy if KEYWORD_WEIGHTS[k] >= weight_floor]
        for number, line in enumerate(stage.text().splitlines(), 1):
            low = line.lower()
            entry = f"{number}: {line.strip()[:160]}"
            if any(k in low for k in keys) and entry not in lines_out:
                lines_out.append(entry)
            if len(lines_out) >= highlights:
                break
        if len(lines_out) >= highlights:
            break
    return {**stage.to_json(), "vector_ops": stage.vector_ops, "transfer_ops": stage.transfer_ops,
            "sync_ops": stage.sync_ops, "alloc_ops": stage.keywords.get("alloc", 0), "highlights": lines_out}


def _deltas(a: Stage, b: Stage) -> dict[str, Any]:
    kw = {k: b.keywords.get(k, 0) - a.keywords.get(k, 0) for k in KEYWORDS}
    return {"from_stage": a.rel_path, "to_stage": b.rel_path, "line_delta": b.lines - a.lines,
            "size_delta": b.size - a.size, "keyword_deltas": {k: v for k, v in kw.items() if v},
            "vector_delta": b.vector_ops - a.vector_ops, "transfer_delta": b.transfer_ops - a.transfer_ops,
            "sync_delta": b.sync_ops - a.sync_ops}


def diff_stages(a: Stage, b: Stage, context: int = 2, labels: tuple[str, str] | None = None) -> dict[str, Any]:
    """Line/size/keyword deltas and a unified diff from ``a`` to ``b``."""
    left, right = labels or (a.rel_path, b.rel_path)
    diff = difflib.unified_diff(a.text().splitlines(), b.text().splitlines(), fromfile=left, tofile=right,
                                n=max(context, 0), lineterm="")
    return {**_deltas(a, b), "diff": "\n".join(diff)}


def change_score(d: dict[str, Any]) -> int:
    return abs(d["line_delta"]) + abs(d["size_delta"]) // 64 + sum(abs(v) for v in d["keyword_deltas"].values())


def adjacent_pairs(stages: list[Stage]) -> list[tuple[Stage, Stage]]:
    return [(a, b) for a, b in zip(stages, stages[1:]) if a.group == b.group]


def find_changes(stages: list[Stage], limit: int = 10, sort_by: str = "score") -> list[dict[str, Any]]:
    """Adjacent stage pairs ranked by how much the pass changed; score = |Δlines| + |Δbytes|//64 + Σ|Δkw|."""
    rows = []
    for a, b in adjacent_pairs(stages):
        d = _deltas(a, b)
        d["score"] = change_score(d)
        rows.append(d)
    keys = {"score": "score", "lines": "line_delta", "size": "size_delta"}
    if sort_by not in keys:
        raise HelixError(f"unknown --sort-by {sort_by!r}; use score, lines or size.")
    rows.sort(key=lambda r: abs(r[keys[sort_by]]), reverse=True)
    return rows[: max(limit, 0)]


def performance_signals(stages: list[Stage], limit: int = 5) -> dict[str, Any]:
    """Per-stage vector/transfer/sync/alloc counts, the heaviest stages, suspicious transitions."""
    summaries: list[dict[str, Any]] = [{"stage": s.rel_path, "vector_ops": s.vector_ops, "transfer_ops": s.transfer_ops,
                                        "sync_ops": s.sync_ops, "alloc_ops": s.keywords.get("alloc", 0),
                                        "interesting_score": s.interesting} for s in stages]

    def heaviest(key: str) -> list[dict[str, Any]]:
        ranked = sorted((r for r in summaries if r[key] > 0), key=lambda r: r[key], reverse=True)
        return [{"stage": r["stage"], key: r[key]} for r in ranked[:limit]]

    transitions = []
    for a, b in adjacent_pairs(stages):
        d = _deltas(a, b)
        score = abs(d["vector_delta"]) + abs(d["transfer_delta"]) + abs(d["sync_delta"])
        if score > 0:
            transitions.append({"from_stage": a.rel_path, "to_stage": b.rel_path, "signal_score": score,
                                "vector_delta": d["vector_delta"], "transfer_delta": d["transfer_delta"],
                                "sync_delta": d["sync_delta"], "line_delta": d["line_delta"],
                                "size_delta": d["size_delta"]})
    transitions.sort(key=lambda t: t["signal_score"], reverse=True)
    return {"stage_summaries": summaries, "vector_heavy_stages": heaviest("vector_ops"),
            "transfer_heavy_stages": heaviest("transfer_ops"), "sync_heavy_stages": heaviest("sync_ops"),
            "suspicious_transitions": transitions[:limit]}


def read_capture_manifest(ir_dir: Path) -> dict[str, Any]:
    """``capture-manifest.json`` of a capture ({} when absent or unreadable)."""
    path = Path(ir_dir) / "capture-manifest.json"
    data, _ = read_json_object(path, owning_workspace(path), what="IR capture manifest", fix="")
    return data or {}


def diff_round(ws: Path, n: int, stage: str | None = None, context: int = 2) -> RoundDiff:
    """Diff the IR of ``opt-round-N`` against its parent's (see `helix_engine.ir.rounds`)."""
    from helix_engine.ir.rounds import diff_round as _diff_round

    return _diff_round(ws, n, stage, context)
