"""``helix ir capture|list-stages|stage-summary|diff-stages|find-changes|performance-signals|diff``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from helix_engine.commands import compat
from helix_engine.console import print_json
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    ir = sub.add_parser("ir", help="capture compiler stages and inspect / diff them",
                        description="Capture a kernel's compiler stages (Triton ttir/ttgir/llir/ptx, or the "
                        "Ascend bishengir pipeline) and list, summarize and diff them.")
    isub = ir.add_subparsers(dest="ir_command", metavar="SUBCOMMAND")
    ir.set_defaults(func=lambda args: (ir.print_help(), 1)[1])

    cap = isub.add_parser("capture", help="run the operator once as a job and keep every compiler stage")
    cap.add_argument("--ir-dir", required=True, type=Path, help="new folder for the stages (must not exist)")
    cap.add_argument("--operator-file", required=True, type=Path)
    cap.add_argument("--bench-file", type=Path, default=None, help="default: bench_<op>.py beside the operator")
    cap.add_argument("--case-id", default=None, help="bench case to run (default: the first)")
    cap.add_argument("--backend", default=None, choices=("auto", "npu", "cuda", "cpu"))
    cap.add_argument("--json", action="store_true")
    compat.add_job_verbose(cap)
    compat.add_remote_flags(cap)
    cap.set_defaults(func=_capture)

    ls = isub.add_parser("list-stages", help="stages in pipeline order (or by size/lines/interesting)")
    _ir_dir(ls)
    ls.add_argument("--grep", default=None, help="regular expression on the stage path")
    ls.add_argument("--limit", type=int, default=None)
    ls.add_argument("--sort-by", choices=("order", "size", "lines", "interesting"), default="order")
    ls.set_defaults(func=_list)

    summ = isub.add_parser("stage-summary", help="keyword counts and highlight lines of one stage")
    _ir_dir(summ)
    summ.add_argument("--stage", required=True, help="relative path, file name, stem or unique substring")
    summ.set_defaults(func=_summary)

    dif = isub.add_parser("diff-stages", help="deltas and unified diff between two stages")
    _ir_dir(dif)
    dif.add_argument("--from", dest="from_stage", required=True)
    dif.add_argument("--to", dest="to_stage", required=True)
    dif.add_argument("--context", type=int, default=2)
    dif.set_defaults(func=_diff_stages)

    fc = isub.add_parser("find-changes", help="adjacent stage pairs ranked by how much the pass changed")
    _ir_dir(fc)
    fc.add_argument("--limit", type=int, default=10)
    fc.add_argument("--sort-by", choices=("score", "lines", "size"), default="score")
    fc.set_defaults(func=_find_changes)

    ps = isub.add_parser("performance-signals", help="vector/transfer/sync-heavy stages and suspicious transitions")
    _ir_dir(ps)
    ps.add_argument("--limit", type=int, default=5)
    ps.add_argument("--format", choices=("text", "json"), default="text")
    ps.set_defaults(func=_signals)

    rd = isub.add_parser("diff", help="the same stage in round N and in its parent round")
    rd.add_argument("--round", dest="round_n", required=True, type=int)
    rd.add_argument("--stage", default=None, help="one stage (default: a delta table of every stage)")
    rd.add_argument("--workspace", "-w", type=Path, default=Path("."), help="the operator workspace (default: here)")
    rd.add_argument("--context", type=int, default=2)
    rd.add_argument("--json", action="store_true")
    rd.set_defaults(func=_diff_round)


def _ir_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ir-dir", required=True, type=Path)
    p.add_argument("--json", action="store_true")


def _stages(args: argparse.Namespace) -> list[Any]:
    from helix_engine.ir.stages import list_stages

    return list_stages(args.ir_dir)


def _list(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import filter_stages, sort_stages

    stages = sort_stages(filter_stages(_stages(args), args.grep), args.sort_by)
    if args.limit is not None:
        stages = stages[: max(args.limit, 0)]
    if args.json:
        print_json({"ir_dir": str(args.ir_dir), "stages": [s.to_json() for s in stages]})
        return 0
    print(f"{'#':>3}  {'lines':>7} {'bytes':>9} {'score':>6}  stage")
    for i, s in enumerate(stages, 1):
        print(f"{i:>3}  {s.lines:>7} {s.size:>9} {s.interesting:>6}  {clean(s.rel_path)}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import select_stage, stage_summary

    data = stage_summary(select_stage(_stages(args), args.stage))
    if args.json:
        print_json(data)
        return 0
    print(f"Stage: {clean(data['stage'])}  ({data['lines']} lines, {data['size']} bytes, score {data['interesting_score']})")
    print("Keywords: " + ", ".join(f"{k} {v}" for k, v in data["keywords"].items() if v))
    print(f"vector {data['vector_ops']}, transfer {data['transfer_ops']}, sync {data['sync_ops']}, alloc {data['alloc_ops']}")
    for line in data["highlights"]:
        print(f"  {clean(line)}")
    return 0


def _print_delta(d: dict[str, Any]) -> None:
    print(f"{clean(d['from_stage'])} -> {clean(d['to_stage'])}: lines {d['line_delta']:+d}, bytes {d['size_delta']:+d}")
    if d["keyword_deltas"]:
        print("keywords: " + ", ".join(f"{k} {v:+d}" for k, v in d["keyword_deltas"].items()))


def _diff_stages(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import diff_stages, select_stage

    stages = _stages(args)
    d = diff_stages(select_stage(stages, args.from_stage), select_stage(stages, args.to_stage), args.context)
    if args.json:
        print_json(d)
        return 0
    _print_delta(d)
    print(clean(d["diff"], multiline=True) or "(no textual change)")
    return 0


def _find_changes(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import find_changes

    rows = find_changes(_stages(args), args.limit, args.sort_by)
    if args.json:
        print_json({"ir_dir": str(args.ir_dir), "changes": rows})
        return 0
    if not rows:
        print("no adjacent stage pairs (a single stage per kernel)")
    for r in rows:
        print(f"score {r['score']:>6}  lines {r['line_delta']:+7d}  bytes {r['size_delta']:+9d}  "
              f"{clean(r['from_stage'])} -> {clean(r['to_stage'])}")
    return 0


def _signals(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import performance_signals

    data = performance_signals(_stages(args), args.limit)
    if args.json or args.format == "json":
        print_json(data)
        return 0
    for key, metric in (("vector_heavy_stages", "vector_ops"), ("transfer_heavy_stages", "transfer_ops"),
                        ("sync_heavy_stages", "sync_ops")):
        print(f"{key}:")
        for row in data[key] or [{"stage": "(none)", metric: 0}]:
            print(f"  {row[metric]:>6}  {clean(row['stage'])}")
    print("suspicious_transitions:")
    for t in data["suspicious_transitions"] or []:
        print(f"  {t['signal_score']:>6}  {clean(t['from_stage'])} -> {clean(t['to_stage'])} (vector {t['vector_delta']:+d}, "
              f"transfer {t['transfer_delta']:+d}, sync {t['sync_delta']:+d})")
    if not data["suspicious_transitions"]:
        print("  (none)")
    return 0


def _diff_round(args: argparse.Namespace) -> int:
    from helix_engine.ir.stages import diff_round

    data = diff_round(args.workspace, args.round_n, args.stage, args.context)
    if args.json:
        print_json(data)
        return 0
    print(data.text)  # RoundDiff.text escapes the stage names and IR lines
    return 0


def _capture(args: argparse.Namespace) -> int:
    from helix_engine.ir.capture import capture_ir

    outcome = capture_ir(ir_dir=args.ir_dir, operator_file=args.operator_file, bench_file=args.bench_file,
                         case_id=args.case_id, backend=args.backend)
    if args.json:
        print_json(outcome)
        return int(outcome.get("return_code", 1))
    if args.verbose and outcome.get("job_ids"):
        print(compat.job_output(args.operator_file, [str(j) for j in outcome["job_ids"]]))
    print(f"Return code: {outcome['return_code']}")
    print(f"IR directory: {clean(outcome['ir_dir'])}")
    if outcome.get("label"):
        print(f"Stages: {clean(outcome['label'])}")
    if outcome.get("message"):
        print(clean(outcome["message"], multiline=True))
    for kernel in outcome.get("kernels", []):
        meta = kernel.get("metadata", {})
        facts = ", ".join(f"{k} {clean(meta[k])}" for k in ("n_regs", "shared", "num_warps", "num_stages")
                          if meta.get(k) is not None)
        stages = clean(", ".join(map(str, kernel.get("stages", []))))
        print(f"  {clean(kernel['name'])}: {stages}" + (f" ({facts})" if facts else ""))
    return int(outcome["return_code"])
