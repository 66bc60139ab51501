"""``helix ir diff --round N``: the same stage in a round's ``ir/`` and in its parent's.

The parent comes from ``opt-round-N/round-state.json`` ``parent_round`` (``baseline`` →
``baseline/ir``, ``round-K`` → ``opt-round-K/ir``); a round's IR folder is its round-state's
``ir_dir`` when set, else ``ir/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.ir.stages import Stage, diff_stages, list_stages, select_stage
from helix_engine.sanitize import clean
from helix_engine.workspace.layout import BASELINE_DIR, ROUND_STATE, parse_round_ref, round_dir_name
from helix_engine.workspace.reading import owning_workspace, read_json_object

IR_DIR = "ir"


def _round_state(round_dir: Path) -> dict[str, Any]:
    path = round_dir / ROUND_STATE
    if not os.path.lexists(path):
        raise HelixError(f"{path} is missing, so the parent round is unknown; write it with "
                         "`helix start-round` / the round form first.")
    data, problems = read_json_object(path, owning_workspace(path), what="round state",
                                      fix="fix it so the parent round can be read")
    if problems:
        raise HelixError(f"{path}: {problems[0].message}.")
    if not isinstance(data, dict):
        raise HelixError(f"{path} is not a JSON object; fix it so the parent round can be read.")
    return data


def ir_dir_of(folder: Path, state: dict[str, Any] | None = None) -> Path:
    declared = (state or {}).get("ir_dir")
    if isinstance(declared, str) and declared.strip():
        candidate = (folder / declared).resolve()
        if candidate.is_dir():
            return candidate
    return folder / IR_DIR


def parent_folder(ws: Path, n: int) -> tuple[Path, str, dict[str, Any]]:
    """(parent folder, parent label, this round's state)."""
    round_dir = ws / round_dir_name(n)
    if not round_dir.is_dir():
        raise HelixError(f"{round_dir} does not exist; `helix status` lists the rounds.")
    state = _round_state(round_dir)
    parent = str(state.get("parent_round") or "").strip()
    if parent.lower() == BASELINE_DIR:
        return ws / BASELINE_DIR, BASELINE_DIR, state
    k = parse_round_ref(parent)
    if k is None:
        raise HelixError(f"{round_dir / ROUND_STATE}: parent_round {parent!r} names no round; use `baseline` or `round-K`.")
    if k == n:
        raise HelixError(f"{round_dir / ROUND_STATE}: parent_round is the round itself; fix parent_round.")
    return ws / round_dir_name(k), f"round-{k}", state


class RoundDiff(dict[str, Any]):
    """The JSON payload of a round diff, plus ``.text``: the same thing as `helix ir diff` prints."""

    @property
    def text(self) -> str:
        """Stage names and IR lines come from files: escaped with ``sanitize.clean``."""
        lines = [f"IR diff {clean(self['parent'])} -> {clean(self['round'])}"]
        if "diff" in self:
            lines.append(f"{clean(self['from_stage'])} -> {clean(self['to_stage'])}: lines {self['line_delta']:+d}, "
                         f"bytes {self['size_delta']:+d}")
            if self["keyword_deltas"]:
                lines.append("keywords: " + ", ".join(f"{k} {v:+d}" for k, v in self["keyword_deltas"].items()))
            lines.append(clean(self["diff"], multiline=True) or "(no textual change)")
            return "\n".join(lines)
        for p in self["stages"]:
            mark = "changed" if p["changed"] else "same"
            lines.append(f"  {mark:>7}  lines {p['line_delta']:+6d}  bytes {p['size_delta']:+8d}  {clean(p['to_stage'])}")
        lines += [f"  only in round: {clean(k)}" for k in self["only_in_round"]]
        lines += [f"  only in parent: {clean(k)}" for k in self["only_in_parent"]]
        return "\n".join(lines)


def _pair_summary(a: Stage, b: Stage) -> dict[str, Any]:
    d = diff_stages(a, b, context=0)
    changed = bool(d["diff"])
    d.pop("diff")
    return {**d, "changed": changed}


def _capture_hint(ws: Path, ir_dir: Path) -> str:
    """The capture command for a missing IR folder, runnable as printed when the operator is known."""
    from helix_engine.workspace import layout

    op, _ = layout.discover_operator(ws)
    owner = ir_dir.parent
    if op is None:
        return f"`helix ir capture --ir-dir {ir_dir} --operator-file <operator .py in {owner}>`"
    name = op.name if owner.name == BASELINE_DIR else layout.round_operator_name(op.stem)
    return f"`helix ir capture --ir-dir {ir_dir} --operator-file {owner / name}`"


def diff_round(ws: Path, n: int, stage: str | None = None, context: int = 2) -> RoundDiff:
    """With ``stage``: that stage's unified diff parent → round. Without: every stage present on
    both sides with its deltas (changed first), and the stages only one side has."""
    ws = Path(ws)
    parent_dir, parent_label, state = parent_folder(ws, n)
    round_ir = ir_dir_of(ws / round_dir_name(n), state)
    parent_state = _round_state(parent_dir) if parent_label != BASELINE_DIR and (parent_dir / ROUND_STATE).is_file() else {}
    parent_ir = ir_dir_of(parent_dir, parent_state)
    for folder, label in ((round_ir, f"round-{n}"), (parent_ir, parent_label)):
        if not folder.is_dir():
            raise HelixError(f"{label} has no IR folder ({folder}); capture it with {_capture_hint(ws, folder)}.")
    new, old = list_stages(round_ir), list_stages(parent_ir)
    out = RoundDiff({"round": f"round-{n}", "parent": parent_label, "round_ir": str(round_ir),
                     "parent_ir": str(parent_ir)})
    if stage is not None:
        a, b = select_stage(old, stage), select_stage(new, stage)
        out["stage"] = stage
        out.update(diff_stages(a, b, context, labels=(f"{parent_label}/{a.rel_path}", f"round-{n}/{b.rel_path}")))
        return out
    old_by, new_by = {s.rel_path: s for s in old}, {s.rel_path: s for s in new}
    pairs = [_pair_summary(old_by[k], new_by[k]) for k in new_by if k in old_by]
    pairs.sort(key=lambda p: (not p["changed"], -abs(p["line_delta"])))
    out["stages"] = pairs
    out["only_in_round"] = [k for k in new_by if k not in old_by]
    out["only_in_parent"] = [k for k in old_by if k not in new_by]
    return out
