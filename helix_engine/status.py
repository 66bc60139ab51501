"""`helix status`: one line-block per operator workspace, as upstream prints it, plus ours.

The numbers come from the snapshot (the upstream status rules in
``workspace/status_rules.py``); this module only shapes them: the upstream JSON keys (with
``avg_improvement`` as a fraction, like upstream) followed by helix's own (path, phase, rounds,
problems), the upstream text block wrapped to 80 columns, the markdown table and the trend view.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from helix_engine.perf.report import estimate_to_json
from helix_engine.perf.results import NOT_PROMOTED, RoundPromotion, SpeedupEstimate
from helix_engine.perf.round_number import RoundNumber, round_number
from helix_engine.record import record
from helix_engine.sanitize import SGR, clean
from helix_engine.workspace import logged_best, status_rules
from helix_engine.workspace.models import Problem, RoundView, WorkspaceSnapshot
from helix_engine.workspace.snapshot import find_workspaces, load_workspace

WIDTH = 80
MAX_PROBLEM_LINES = 8
_TAGS = {"ok": "OK", "warning": "WARN", "no-session": "NO-SESSION"}
_COLORS = {"ok": SGR["green"], "warning": SGR["yellow"], "no-session": SGR["dim"], "warn": SGR["yellow"],
           "error": SGR["red"], "dim": SGR["dim"]}
_RESET = SGR["reset"]


@record
class OperatorStatus:
    name: str
    path: Path
    state: str
    avg_improvement: float | None  # fraction, like upstream (0.3 = +30.0%): the best round's (round_number)
    geomean_speedup: float | None  # the best round's, as every screen shows it (perf/round_number.py)
    best_round: str | None  # the promotion rule's best round ("round-N"); None: no round promoted
    logged_best: str | None
    verified: bool
    verified_geomean_speedup: float | None
    warnings: list[str]
    latest_verify: Path | None = None
    phase: str | None = None
    current_round: int | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    extra_problems: list[Problem] = field(default_factory=list)  # not already a warning line
    next_step: str | None = None  # ours: the command that moves this workspace on
    promoted_best_round: str = "baseline"  # ours: the promotion rule's current best, or baseline
    promoted_geomean: SpeedupEstimate | None = None  # its geomean vs baseline (ratio of means)
    promoted_paired: bool = False  # promoted_geomean is the paired run's (not the perf files')
    noise_margin: str = "default 1%"  # ours: which margin the promotion rule used (helix calibrate)
    best_number: RoundNumber | None = None  # the best round's number (geomean_speedup's source)
    upstream_best_round: str | None = None  # upstream's best: the highest perf-file geomean of any round
    upstream_geomean_speedup: float | None = None  # upstream's: that round's perf files against the baseline's
    upstream_avg_improvement: float | None = None  # fraction, of the same two perf files

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "avg_improvement": self.avg_improvement,
            "geomean_speedup": self.geomean_speedup,
            "best_round": self.best_round,
            "logged_best": self.logged_best,
            "verified": self.verified,
            "verified_geomean_speedup": self.verified_geomean_speedup,
            "warnings": list(self.warnings),
            "path": str(self.path),
            "latest_verify": str(self.latest_verify) if self.latest_verify else None,
            "phase": self.phase,
            "current_round": self.current_round,
            "rounds": self.rounds,
            "problems": [p.to_json() for p in self.problems],
            "next_step": self.next_step,
            "promoted_best_round": self.promoted_best_round,
            "promoted_geomean": estimate_to_json(self.promoted_geomean),
            "promoted_geomean_measured": ("paired run" if self.promoted_paired else "perf files")
            if self.promoted_geomean is not None else None,
            "noise_margin": self.noise_margin,
            "measured": self.best_number.measured if self.best_number is not None else None,
            "geomean_ci95": self.best_number.to_json()["geomean_ci95"] if self.best_number is not None else None,
            "upstream_best_round": self.upstream_best_round,
            "upstream_geomean_speedup": self.upstream_geomean_speedup,
            "upstream_avg_improvement": self.upstream_avg_improvement,
        }

    def round_speedups(self) -> dict[str, float]:
        return {f"round-{r['round']}": r["geomean_speedup"] for r in self.rounds
                if r["comparable"] and r["geomean_speedup"] is not None}


def round_status(view: RoundView, snap: WorkspaceSnapshot) -> str:
    """active | completed | failed | incomplete (workflow state first, then the artifacts)."""
    wf = snap.workflow
    if view.workflow_status == "active" or (wf is not None and wf.phase == "round_active"
                                            and wf.current_round == view.number):
        return "active"
    if view.completed:
        return "completed"
    if view.workflow_status == "failed" or view.terminal:
        return "failed"
    return "incomplete"


def operator_status(snap: WorkspaceSnapshot, metric: str | None = None) -> OperatorStatus:
    """The status of one loaded workspace; ``metric`` is the ``-m`` choice (None: per round)."""
    ev = snap.evaluation if metric is None else None
    if ev is None:
        ev = status_rules.evaluate(snap, metric)
    best = ev.best
    verify = snap.extra.get("verify") or {}
    rounds = []
    numbers: dict[int, RoundNumber | None] = {}
    for n in sorted(snap.rounds):
        view = snap.rounds[n]
        result = ev.results.get(n)
        comp = result.comparison if result is not None and result.comparable else None
        number = round_number(comp, ev.promotion.rounds.get(n))
        numbers[n] = number
        shown = number.to_json() if number is not None else {}
        rounds.append({
            "round": n,
            "dir": view.name,
            "status": round_status(view, snap),
            "parent": view.parent,
            "comparable": comp is not None,
            "geomean_speedup": shown.get("geomean_speedup"),  # round_number: one number per round
            "geomean_ci95": shown.get("geomean_ci95"),
            "avg_improvement": shown.get("avg_improvement"),
            "measured": shown.get("measured"),
            "upstream_geomean_speedup": shown.get("upstream_geomean_speedup"),
            "upstream_avg_improvement": shown.get("upstream_avg_improvement"),
            "metric_source": comp.metric_source if comp else None,
            "skip_reason": ev.skipped.get(n),
            "problems": len(view.problems),
            "promotion": _promotion_json(ev.promotion.rounds.get(n)),
            "changed_since_submit": [],  # filled by _seal_warnings
        })
    companions = set(ev.problems)
    for result in ev.results.values():
        companions.update(result.problems)
    problems = list(snap.problems)
    if metric is not None:  # problems of a re-evaluation under another metric
        problems = [p for p in problems if p not in _evaluation_problems(snap)] + list(companions)
    from helix_engine.workspace.leftovers import temp_problem  # a folder scan, so status only (not the cockpit)

    temps = temp_problem(snap.root)
    if temps is not None:
        problems.append(temps)
    wf = snap.workflow
    promoted = numbers.get(ev.promotion.best_round) if ev.promotion.best_round is not None else None
    return OperatorStatus(
        name=snap.name,
        path=snap.root,
        state=ev.state,
        avg_improvement=(promoted.avg_improvement_pct / 100.0 if promoted and promoted.avg_improvement_pct is not None
                         else None),
        geomean_speedup=promoted.point if promoted else None,
        best_round=f"round-{ev.promotion.best_round}" if ev.promotion.best_round is not None else None,
        best_number=promoted,
        upstream_best_round=f"round-{ev.best_round}" if ev.best_round is not None else None,
        upstream_geomean_speedup=best.geomean_speedup if best else None,
        upstream_avg_improvement=(best.avg_improvement_pct / 100.0 if best and best.avg_improvement_pct is not None
                                  else None),
        logged_best=ev.logged.value,
        verified=bool(verify.get("verified")),
        verified_geomean_speedup=verify.get("geomean"),
        warnings=list(ev.warnings) + _seal_warnings(snap.root, rounds) + _ledger_warnings(snap, ev),
        latest_verify=verify.get("path"),
        phase=wf.phase if wf else None,
        current_round=wf.current_round if wf else None,
        rounds=rounds,
        problems=list(dict.fromkeys(problems)),
        extra_problems=[p for p in dict.fromkeys(problems) if p not in companions],
        next_step=next_step(snap),
        promoted_best_round=ev.promotion.best_label,
        promoted_geomean=ev.promotion.best_geomean(), promoted_paired=ev.promotion.best_geomean_paired(),
        noise_margin=ev.promotion.margin_text or f"default {ev.promotion.noise_margin:.0%}",
    )


def _seal_warnings(root: Path, rounds: list[dict[str, Any]]) -> list[str]:
    """The files of record changed since they were sealed (state/seals.py), said, not refused (status
    only reads): the accepted baseline, which every round command then refuses to judge against, and
    each submitted round, marked in its ``rounds`` entry, whose numbers here are read from its files
    as they are now. Costs a hash of the sealed files, and nothing where no seal was made."""
    from helix_engine.state import seals

    found = [why for why in [seals.baseline_problem(root)] if why]
    changed = seals.changed_submitted_rounds(root)
    for entry in rounds:
        entry["changed_since_submit"] = changed.get(str(entry["dir"]), [])
    for name, changes in changed.items():
        found.append(f"{name} is not what was submitted: {'; '.join(changes[:6])}; its numbers here are read from "
                     "its files as they are now, opt-note.md's from what was submitted, and submit-round refuses a "
                     "round built on it or judged against it")
    return found


LEDGER_EDITED = "opt-note.md logs"


def _ledger_warnings(snap: WorkspaceSnapshot, ev: status_rules.Evaluation) -> list[str]:
    """opt-note.md's best round against the promotion rule's. submit-round writes the promoted best
    into the ledger (``Final best round:``, the ``current best`` marker), so a ledger that names
    another best was edited by hand or is stale (a noise margin or a round's files changed since):
    said, since status only reads, unless upstream's best/log mismatch line (a log that is neither
    upstream's best nor the promoted one) already says it. A workspace without helix's
    workflow state keeps upstream's ledger, which logs the highest geomean instead: not checked."""
    if snap.workflow is None:
        return []
    promotion = (snap.evaluation or ev).promotion  # the ledger's is the default metric's (not -m's)
    note = snap.extra.get("opt_note")
    final = str(getattr(note, "final_best_round", None) or "").strip().lower()
    logged = "baseline" if final == "baseline" else ev.logged.value
    if logged is None or logged == promotion.best_label:
        return []
    if any(w.startswith(logged_best.BEST_MISMATCH_PREFIX) for w in ev.warnings):
        return []  # upstream's mismatch line says it already (the log is neither best)
    return [f"{LEDGER_EDITED} {logged} as the best round but the promotion rule's best is {promotion.best_label}: "
            "the ledger was edited by hand or is stale (submit-round writes the promoted best there); Promoted best "
            "is the one that counts"]


def _promotion_json(found: RoundPromotion | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"status": found.status, "reason": found.reason, "basis": found.basis,
            "vs_baseline": estimate_to_json(found.vs_baseline),
            "vs_previous_best": estimate_to_json(found.vs_previous_best),
            "previous_best": _previous_best(found)}


def _previous_best(found: RoundPromotion) -> str | None:
    """The best this round was judged against: a round, the baseline (it became the first best,
    superseded since or not), or None (not promoted: it never got past the baseline, so no best
    was compared with it)."""
    if found.previous_best is not None:
        return f"round-{found.previous_best}"
    return None if found.status == NOT_PROMOTED else "baseline"


def promoted_text(item: OperatorStatus) -> str:
    """``Promoted best:`` line (ours): the promotion rule's best, its geomean beside its interval."""
    geo = item.promoted_geomean
    if item.promoted_best_round == "baseline" or geo is None:
        unsubmitted = _not_accepted(item)
        if not unsubmitted:
            return "Promoted best: baseline (no round is faster beyond the noise margin)"
        return f"Promoted best: baseline (no submitted round is faster beyond the noise margin; {unsubmitted})"
    shown = f"{geo.point:.2f}x"
    if geo.interval is not None:
        shown += f" [{geo.interval.low:.2f}x, {geo.interval.high:.2f}x]"
    measured = "paired run, ratio of means" if item.promoted_paired else "ratio of means"
    return f"Promoted best: {item.promoted_best_round}, geomean speedup ({measured}) {shown}"


def _not_accepted(item: OperatorStatus) -> str:
    """The compared rounds the promotion rule left out because submit-round never accepted them
    (``opt-round-1 was never submitted``), or ""."""
    reasons = {status_rules.NOT_ACCEPTED: "never submitted", status_rules.NOT_ACCEPTED_ACTIVE: "not submitted yet"}
    found: dict[str, list[str]] = {}
    for entry in item.rounds:
        reason = (entry.get("promotion") or {}).get("reason")
        if reason in reasons and entry.get("comparable"):
            found.setdefault(reasons[reason], []).append(str(entry["dir"]))
    parts = []
    for how, names in found.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{shown} {'is' if len(names) == 1 else 'are'} {how}" if how == "not submitted yet"
                     else f"{shown} {'was' if len(names) == 1 else 'were'} {how}")
    return "; ".join(parts)


def next_step(snap: WorkspaceSnapshot) -> str | None:
    """The command that moves the workspace on, when the files make it unambiguous (so a
    freshly prepared baseline does not read as a dead end)."""
    wf = snap.workflow
    if wf is None:
        if snap.rounds or snap.operator_file is None:
            return None
        state = snap.baseline.state if snap.baseline is not None else None
        if state is not None and state.baseline_established and state.correctness_status == "passed" \
                and state.benchmark_status == "passed":
            return "helix submit-baseline --baseline-dir baseline"
        return "helix prepare-baseline (snapshot, test and bench the operator)"
    if wf.phase == "awaiting_round_start" and wf.baseline.status == "passed":
        done = _session_done(snap)
        if done is not None:
            return done
        taken = set(snap.rounds) | {int(k) for k in wf.rounds if k.isdigit()}
        n = max(taken, default=0) + 1
        before = snap.rounds.get(n - 1)
        if n > 1 and (before is None or not before.terminal):
            # start-round refuses a round whose predecessor is not terminal (its folder gone, its state
            # unreadable, a piece missing): say what to mend first, in start-round's own words
            from helix_engine.state.checks import not_terminal_reason

            name = f"opt-round-{n - 1}"
            why = not_terminal_reason(snap.root / name)
            return f"mend {name} first ({why}), then helix start-round --round-dir opt-round-{n}"
        return f"helix start-round --round-dir opt-round-{n} ... (see start-round -h)"
    if wf.phase == "baseline" or wf.baseline.status != "passed":
        return "helix submit-baseline --baseline-dir baseline (once baseline/ is ready)"
    return None


def _session_done(snap: WorkspaceSnapshot) -> str | None:
    """The session goals' stop (state/goals.session_end, the guideline's own check), so Next never
    proposes a round right after submit-round said stop."""
    from helix_engine.state.goals import session_end

    wf = snap.workflow
    submitted = [int(k) for k, r in (wf.rounds.items() if wf else ()) if k.isdigit() and r.status != "active"]
    promotion = snap.evaluation.promotion if snap.evaluation is not None else None
    best = promotion.best_geomean() if promotion is not None else None
    label = promotion.best_label if promotion is not None else "baseline"
    return session_end(snap.root, best, label, max(submitted, default=None))


def phase_text(item: OperatorStatus) -> str:
    """``Phase:`` line (ours): the workflow phase and the active round."""
    if item.phase is None:
        return "Phase: no workflow state (.helix/state.json)"
    if item.phase == "round_active" and item.current_round is not None:
        return f"Phase: round_active, current round opt-round-{item.current_round}"
    return f"Phase: {item.phase}, no active round"


def _evaluation_problems(snap: WorkspaceSnapshot) -> set[Problem]:
    ev = snap.evaluation
    if ev is None:
        return set()
    found = set(ev.problems)
    for result in ev.results.values():
        found.update(result.problems)
    return found


def collect(paths: list[Path], metric: str | None = None) -> tuple[list[OperatorStatus], list[str]]:
    """Statuses of every workspace found under ``paths``, and a sentence per path with none."""
    seen: set[Path] = set()
    statuses: list[OperatorStatus] = []
    missing: list[str] = []
    for path in paths:
        found = find_workspaces(path)
        if not found:
            if not path.exists():
                missing.append(f"{path} does not exist")
            elif not path.is_dir():
                missing.append(f"{path} is not a folder")
            else:
                missing.append(f"{path} is not an operator workspace and none of its subfolders is one")
            continue
        for ws in found:
            key = ws.resolve()
            if key in seen:
                continue
            seen.add(key)
            statuses.append(operator_status(load_workspace(ws), metric))
    return statuses, missing


# ---------------------------------------------------------------------------------- rendering


def _paint(text: str, color: str | None, enabled: bool) -> str:
    return f"{_COLORS[color]}{text}{_RESET}" if enabled and color else text


def _wrap(text: str, indent: str = "  ", more: str = "    ") -> list[str]:
    import textwrap  # text output only: not imported by `helix status --json`

    return textwrap.wrap(text, width=WIDTH, initial_indent=indent, subsequent_indent=more,
                         break_on_hyphens=False) or [indent.rstrip()]


def _sorted(items: list[OperatorStatus]) -> list[OperatorStatus]:
    return sorted(items, key=lambda s: (0 if s.state == "no-session" else 1, s.name))


def render_best_text(items: list[OperatorStatus], *, color: bool = False) -> str:
    """The upstream best/text block per workspace, wrapped to 80 columns, then the summary."""
    lines: list[str] = []
    for item in _sorted(items):
        lines.append(_paint(f"[{_TAGS[item.state]}] {clean(item.name)}", item.state, color))
        if item.state == "no-session":
            lines += _ours(item)
            continue
        lines += _best_lines(item)
        if item.logged_best is not None:
            lines.append(f"  Logged best: {clean(item.logged_best)}")
        if item.latest_verify is not None:
            lines += _wrap(f"Latest verify: {clean(item.latest_verify)}")
        for warning in item.warnings:
            lines += [_paint(x, "warn", color) for x in _wrap(f"Warning: {clean(warning)}")]
        shown = item.extra_problems[:MAX_PROBLEM_LINES]
        for problem in shown:
            lines += [_paint(x, "error" if problem.severity == "error" else "warn", color)
                      for x in _wrap(f"Problem: {clean(problem)}")]
        if len(item.extra_problems) > len(shown):
            lines += _wrap(f"... and {len(item.extra_problems) - len(shown)} more problems "
                           "(`helix status --json` lists them all)")
        lines += _ours(item)
    lines.append(summary_line(items))
    return "\n".join(lines) + "\n"


def _best_lines(item: OperatorStatus) -> list[str]:
    """Upstream's three lines, on the promotion rule's best round and its number (the one every
    screen shows: paired when measured so, with its interval); upstream's own best and numbers,
    from the perf files, on a line that says so when they differ."""
    number = item.best_number
    imp = None if item.avg_improvement is None else item.avg_improvement * 100.0
    if number is None:
        lines = ["  Avg improvement: unknown", "  Geomean speedup: unknown",
                 f"  Best round: {'baseline (no round promoted)' if item.upstream_best_round else 'unknown'}"]
    else:
        lines = [f"  Avg improvement: {'unknown' if imp is None else f'{imp:+.1f}%'}",
                 f"  Geomean speedup: {number.text(source=number.measured == 'paired run')}", f"  Best round: {item.best_round}"]
    up = item.upstream_geomean_speedup
    if up is not None and (item.upstream_best_round != item.best_round or number is None
                           or f"{up:.2f}" != f"{number.point:.2f}"):
        up_imp = "" if item.upstream_avg_improvement is None else f", avg {item.upstream_avg_improvement * 100:+.1f}%"
        lines += _wrap(f"Perf files (upstream's rule, unpaired): {item.upstream_best_round} {up:.2f}x{up_imp}")
    return lines


def summary_line(items: list[OperatorStatus]) -> str:
    """Upstream's ``Summary: a ok, b warning, c no-session`` (workspaces by state), then the
    Warning:/Problem: entries printed above: an ok workspace can carry warnings, and a summary
    reading "0 warning" under a printed warning looked like it had missed them."""
    counts = {s: sum(1 for i in items if i.state == s) for s in _TAGS}
    line = f"Summary: {counts['ok']} ok, {counts['warning']} warning, {counts['no-session']} no-session"
    shown = [i for i in items if i.state != "no-session"]
    warnings = sum(len(i.warnings) for i in shown)
    problems = sum(len(i.extra_problems) for i in shown)
    printed = [f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((warnings, "warning"), (problems, "problem")) if n]
    return f"{line} workspaces; {' and '.join(printed)} above" if printed else line


def _ours(item: OperatorStatus) -> list[str]:
    """Promoted best, phase and next step, after the upstream lines (80 columns)."""
    lines = _wrap(promoted_text(item)) if item.state != "no-session" else []
    if item.state != "no-session":
        lines += _wrap(f"Noise margin: {clean(item.noise_margin)}")
    lines += _wrap(clean(phase_text(item)))
    if item.next_step:
        lines += _wrap(f"Next: {clean(item.next_step)}")
    return lines


def render_best_json(items: list[OperatorStatus]) -> dict[str, Any]:
    return {"operators": [i.to_json() for i in _sorted(items)]}


def render_best_markdown(items: list[OperatorStatus]) -> str:
    lines = ["| 名称 | Geomean speedup | Verified | Verified Geomean speedup | Notes |",
             "| --- | --- | --- | --- | --- |"]
    for item in sorted((i for i in items if i.state != "no-session"), key=lambda i: i.name):
        notes = []
        if item.best_round and item.logged_best and item.best_round != item.logged_best:
            notes.append("best≠log")
        if any(not w.startswith(logged_best.BEST_MISMATCH_PREFIX) for w in item.warnings):
            notes.append("warn")
        geo = "-" if item.geomean_speedup is None else f"{item.geomean_speedup:.2f}x"
        vgeo = "" if item.verified_geomean_speedup is None else f"{item.verified_geomean_speedup:.2f}x"
        lines.append(f"| {clean(item.name)} | {geo} | {'Verified' if item.verified else '-'} | {vgeo} | "
                     f"{','.join(notes) or '-'} |")
    return "\n".join(lines) + "\n"


def _trend_rows(items: list[OperatorStatus]) -> tuple[list[OperatorStatus], list[str]]:
    rows = sorted((i for i in items if i.state != "no-session"), key=lambda i: i.name)
    names = sorted({k for i in rows for k in i.round_speedups()}, key=lambda k: int(k.split("-")[1]))
    return rows, names


def render_trend_json(items: list[OperatorStatus]) -> dict[str, Any]:
    rows, names = _trend_rows(items)
    return {"operators": [{"name": i.name, "round_speedups": {k: i.round_speedups().get(k) for k in names}}
                          for i in rows]}


def _cell(item: OperatorStatus, name: str) -> str:
    value = item.round_speedups().get(name)
    return "-" if value is None else f"{value:.2f}x"


def render_trend_markdown(items: list[OperatorStatus]) -> str:
    rows, names = _trend_rows(items)
    headers = ["Name", *names]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join([clean(i.name), *[_cell(i, k) for k in names]]) + " |" for i in rows]
    return "\n".join(lines) + "\n"


def render_trend_text(items: list[OperatorStatus]) -> str:
    """Padded columns; when the rounds do not fit 80 columns they continue in further blocks,
    each repeating the Name column."""
    rows, names = _trend_rows(items)
    table = [[clean(i.name), *[_cell(i, k) for k in names]] for i in rows]
    name_w = max([len("Name"), *[len(r[0]) for r in table]])
    widths = [max([len(k), *[len(r[j + 1]) for r in table]]) for j, k in enumerate(names)]
    blocks: list[list[int]] = [[]]
    used = name_w
    for j, w in enumerate(widths):
        if blocks[-1] and used + 2 + w > WIDTH:
            blocks.append([])
            used = name_w
        blocks[-1].append(j)
        used += 2 + w
    out: list[str] = []
    for b, cols in enumerate(blocks):
        if b:
            out.append("")
        out.append("  ".join(["Name".ljust(name_w), *[names[j].ljust(widths[j]) for j in cols]]).rstrip())
        for row in table:
            out.append("  ".join([row[0].ljust(name_w), *[row[j + 1].ljust(widths[j]) for j in cols]]).rstrip())
    return "\n".join(out) + "\n"


def json_chunks(items: list[OperatorStatus], *, view: str = "best") -> Iterator[str]:
    """``render(..., fmt="json")`` in pieces of ~64 KiB, for writing: at 1000 rounds the JSON is
    1 MB, made by json_indent (json's indenting encoder was ~40 ms of it, in ~100k pieces)."""
    from helix_engine.json_indent import indented_chunks  # json.dumps(indent=2)'s text, not its speed

    data = render_trend_json(items) if view == "trend" else render_best_json(items)
    yield from indented_chunks(data)


def render(items: list[OperatorStatus], *, view: str = "best", fmt: str = "text", color: bool = False) -> str:
    if view == "trend":
        if fmt == "html":
            from helix_engine.status_html import render_trend_html

            return render_trend_html(items)
        if fmt == "json":
            return json.dumps(render_trend_json(items), indent=2, ensure_ascii=False) + "\n"
        return render_trend_markdown(items) if fmt == "markdown" else render_trend_text(items)
    if fmt == "json":
        return json.dumps(render_best_json(items), indent=2, ensure_ascii=False) + "\n"
    return render_best_markdown(items) if fmt == "markdown" else render_best_text(items, color=color)
