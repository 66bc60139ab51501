"""Markdown rendering of a ProfileReport (what `helix profile-report` prints by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helix_engine.sanitize import clean

if TYPE_CHECKING:
    from helix_engine.profile.report import ProfileReport


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return clean(value)  # op and kernel names come from profiler files


def _table(header: list[str], rows: list[list[Any]], width: int | None = None,
           drop_order: tuple[int, ...] = ()) -> list[str]:
    """A markdown table; with ``width``, the columns of ``drop_order`` go (first first) until the
    rest fits whole, so a narrow terminal shows fewer columns instead of cutting every cell
    (``softma…  interp…  27407.…``)."""
    cells = [[_num(c) for c in row] for row in rows]
    keep = list(range(len(header)))

    def need(cols: list[int]) -> int:  # a rendered column: its widest cell plus one space each side
        return sum(max([len(header[i])] + [len(row[i]) for row in cells]) + 2 for i in cols)

    if width is not None:
        for index in drop_order:
            if need(keep) <= width:
                break
            keep.remove(index)
    out = ["| " + " | ".join(header[i] for i in keep) + " |", "|" + "|".join("---" for _ in keep) + "|"]
    out += ["| " + " | ".join(row[i] for i in keep) + " |" for row in cells]
    return out


def _roofline_lines(roof: dict[str, Any]) -> list[str]:
    """Achieved bandwidth/throughput of the profiled case and of each kernel whose bytes are
    declared (perf/roofline.py computed every figure; this only lays them out)."""
    if not roof:
        return []
    lines = ["", f"## Roofline (per call, over {roof.get('steps')} profiled steps)", ""]
    op = roof.get("operator")
    if op:
        kernels = ", ".join(f"`{clean(k)}`" for k in op.get("kernels", []))
        lines.append(f"- operator ({kernels}): {clean(op.get('text', ''))}"
                     + (f" → **{clean(op['bound'])}**" if op.get("bound") else "")
                     + (f" ({clean(op['caveat'])})" if op.get("caveat") else ""))
    for k in roof.get("kernels", []):
        lines.append(f"- `{clean(k['name'])}`: {_num(k['bytes'], 0)} bytes ({clean(k['declared'])}) in "
                     f"{_num(k['time_us'])} µs: {clean(k['text'])}")
    if roof.get("peak"):
        lines.append(f"- {clean(roof['peak'])}")
    elif roof.get("note"):
        lines.append(f"- {clean(roof['note'])}")
    if roof.get("routing"):
        lines.append(f"- routing: {clean(roof['routing'])}")
    return lines


def render_markdown(r: ProfileReport, width: int | None = None) -> str:
    """Sections in the order a person reads them: what is hot, what bounds it, what to read next.
    ``width``: the columns the text will be shown in (the cockpit's pane); the hotspot table then
    keeps the op, its ratio and total time, and drops core type, count and average first.

    Every name or sentence that can hold profiler text (op names, paths, reasons) passes
    through ``sanitize.clean``."""
    target = clean(r.target_operator)
    lines = [f"# Profile report: {target or '(no ops)'}", ""]
    lines.append(f"- Source: {clean(r.source)} ({clean(r.time_label)}); profile dir: `{clean(r.profile_dir)}`")
    if r.target_operator:
        how = "largest total time" if r.selection == "inferred" else "--target-op"
        lines.append(f"- Target: `{target}` ({clean(r.selection)}: {how})")
    lines.append(f"- Bound: **{clean(r.bound)}**; op type: {clean(r.operator_type_guess.get('kind', 'unknown'))}")
    lines += ["", f"## Hotspots (top {len(r.hotspots)} of {r.op_count} ops, total {r.total_time_us:.3f} µs)", ""]
    lines += _table(["OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Ratio(%)"],
                    [[h.op_type, h.core_type, h.count, h.total_us, h.avg_us, h.ratio_pct] for h in r.hotspots],
                    width, drop_order=(1, 2, 4, 3))
    per_call = r.launch_signals.get("launches_per_call")
    if per_call:
        lines += ["", f"- Launches per call: {per_call:g} ({r.launch_signals.get('calls')} profiled calls)"]
    if r.core_type_totals:
        lines += ["", "## Core buckets", ""]
        lines += _table(["Bucket", "Total Time(us)", "Ratio(%)"],
                        [[k, v["total_time_us"], v["ratio_pct"]] for k, v in r.core_type_totals.items()],
                        width, drop_order=(1,))
    lines += ["", "## Data-movement hotspots", ""]
    if r.data_movement_hotspots:
        lines += [f"- `{clean(d['op_type'])}`: {_num(d['total_time_us'])} µs ({_num(d['ratio_pct'])}%)"
                  for d in r.data_movement_hotspots]
    else:
        lines.append("- none (no copy/memcpy/transdata/dma/load/store/move op)")
    if r.op_summary:
        s = r.op_summary
        lines += ["", "## Target cross-check (per invocation)", "",
                  f"- count {s['count']}, sum {_num(s['sum_us'])} µs, avg {_num(s['avg_us'])} µs, "
                  f"min {_num(s['min_us'])} µs, max {_num(s['max_us'])} µs"]
    pct = r.pipeline_signals.get("ratios_pct") or {}
    if pct:
        lines += ["", "## Pipeline (busy % of task time, averaged over the target's invocations)", ""]
        lines.append("- " + ", ".join(f"{clean(k.removesuffix('_ratio'))} {v:.1f}%" for k, v in pct.items() if v))
        util = r.pipeline_signals.get("cube_utilization_percent", {}).get("avg")
        if util is not None:
            lines.append(f"- cube_utilization {util:.2f}% (core occupancy)")
        dims = r.pipeline_signals.get("block_dim", {}).get("observed_values")
        if dims:
            lines.append(f"- Block Dim: {', '.join(map(clean, dims))}")
        wait = r.pipeline_signals.get("task_wait_time_us", {})
        if wait.get("count"):
            lines.append(f"- task wait (>0 only): avg {_num(wait['avg'])} µs over {wait['count']} invocations")
    lines += ["", f"## Bound: {clean(r.bound)}", ""]
    lines += [f"- {clean(why)}" for why in r.bound_analysis.get("reasoning", [])]
    lines += _roofline_lines(r.roofline)
    tracks = r.msprof_timeline_signals.get("stream_like_tracks")
    if r.task_timeline_signals or tracks is not None:
        lines += ["", "## Timeline", ""]
        if r.task_timeline_signals:
            t = r.task_timeline_signals
            lines.append(f"- task_time rows of the target {t.get('matched_rows')}, max gap {_num(t.get('max_gap_us'))} µs, "
                         f"total gap {_num(t.get('total_gap_us'))} µs, span {_num(t.get('span_us'))} µs")
        if tracks is not None:
            lines.append(f"- timeline tracks (distinct tid): {tracks}")
    if r.host_api_signals:
        h = r.host_api_signals
        lines += ["", "## Host APIs", "", f"- launch-related APIs present: {h.get('launch_related_present')}"]
        lines += [f"- `{clean(a['name'])}`: {_num(a['time_us'])} µs × {clean(a['count'])}" for a in h.get("top_apis", [])[:5]]
    lines += ["", "## Suggested patterns", ""]
    if not r.suggested_patterns:
        lines.append("- no symptom detected from these files; read the IR (`helix ir capture`) next")
    evidence = {s["symptom"]: clean(s.get("evidence", "")) for s in r.symptoms}
    for entry in r.suggested_patterns:
        names = []
        for p in entry["patterns"]:
            if p["pattern_file"] is None:
                names.append(f"{p['name']} (no card)")
            elif p["pattern_file"] != p["name"]:
                names.append(f"{p['name']} → {p['pattern_file']}")
            else:
                names.append(p["name"])
        card = f" — symptom card {entry['symptom_card']}" if entry.get("symptom_card") else ""
        lines.append(f"- **{clean(entry['symptom'])}** ({evidence.get(entry['symptom'], clean(entry['trigger']))}){card}: "
                     + ", ".join(names))
    if r.suggested_patterns:
        lines.append("- Read a card with `helix patterns show NAME`; `helix patterns route` lists them in reading order.")
    if r.notes:
        lines += ["", "## Notes", ""] + [f"- {clean(n)}" for n in r.notes]
    if r.problems:
        lines += ["", "## Problems", ""]
        lines += [clean(f"- {p['file']}{':' + str(p['line']) if p.get('line') else ''}: {p['message']}") for p in r.problems]
    return "\n".join(lines) + "\n"
