"""``helix compiler-source locate|show|terms``: the compiler-source escalation level over a
read-only checkout (thin: parse → helix_engine.compiler_source → print text or JSON).

Everything printed from the checkout or the IR (paths, lines, names) is escaped with ``clean``.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import Any

from helix_engine.console import print_json
from helix_engine.sanitize import clean

SOURCE_ENV = "HELIX_COMPILER_SOURCE"


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    p = sub.add_parser("compiler-source", help="search a read-only compiler checkout for the passes, ops and options "
                       "a round's IR names; writes opt-round-N/compiler-analysis.md",
                       description="Compiler-source escalation (after profile and IR evidence): rank where terms "
                       "live in an AscendNPU-IR, triton-ascend or triton checkout (docs, then lib, include, test), "
                       "show the pass/option definitions, show a file's lines. The checkout is only read: nothing "
                       f"is written into it or run from it, and links are not followed. ${SOURCE_ENV} gives "
                       "--source-root.")
    csub = p.add_subparsers(dest="compiler_source_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])

    loc = csub.add_parser("locate", help="rank files for terms (upstream's score) with their lines and definitions; "
                          "--round N searches the names in that round's IR and writes compiler-analysis.md")
    _root(loc)
    loc.add_argument("--term", action="extend", nargs="+", default=[], metavar="TERM",
                     help="a pass, op, option or attribute name (repeatable; case-insensitive substring)")
    loc.add_argument("--round", dest="round_n", type=int, default=None, metavar="N",
                     help="add the names in opt-round-N's IR capture and write opt-round-N/compiler-analysis.md")
    loc.add_argument("--workspace", "-w", type=Path, default=Path("."), help="workspace of --round (default: here)")
    loc.add_argument("--hint", default=None, choices=("pass", "feature", "dialect", "conversion", "layout", "memory",
                                                      "pipeline"))
    loc.add_argument("--limit", type=int, default=10, help="files per area (default 10)")
    loc.add_argument("--no-write", action="store_true", help="with --round: print only, leave compiler-analysis.md")
    loc.add_argument("--format", choices=("text", "json"), default="text")
    loc.add_argument("--json", action="store_true")
    loc.set_defaults(func=_locate)

    show = csub.add_parser("show", help="print a checkout file's lines around PATH:LINE (as locate prints it)")
    _root(show)
    show.add_argument("location", metavar="PATH[:LINE]", help="path relative to --source-root, optionally :LINE")
    show.add_argument("--context", type=int, default=20, help="lines before and after LINE (default 20)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)

    terms = csub.add_parser("terms", help="the names opt-round-N's IR capture holds (what --round searches for)")
    terms.add_argument("--round", dest="round_n", type=int, required=True, metavar="N")
    terms.add_argument("--workspace", "-w", type=Path, default=Path("."), help="the operator workspace (default: here)")
    terms.add_argument("--json", action="store_true")
    terms.set_defaults(func=_terms)


def _root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source-root", default=os.environ.get(SOURCE_ENV) or None, metavar="DIR",
                   help=f"the compiler checkout (default ${SOURCE_ENV})")


def _round_terms(args: argparse.Namespace) -> tuple[list[Any], Path]:
    from helix_engine.compiler_source.ir_terms import round_ir_dir, terms_from_ir

    ir_dir = round_ir_dir(args.workspace, args.round_n)
    return terms_from_ir(ir_dir), ir_dir


def _command_line(args: argparse.Namespace) -> str:
    words = ["helix", "compiler-source", "locate"]
    if args.round_n is not None:
        words += ["--round", str(args.round_n)]
    words += ["--source-root", str(args.source_root)]
    for term in args.term:
        words += ["--term", term]
    if args.hint:
        words += ["--hint", args.hint]
    return shlex.join(words)


def _locate(args: argparse.Namespace) -> int:
    from helix_engine.compiler_source.analysis import write_analysis
    from helix_engine.compiler_source.locate import locate
    from helix_engine.compiler_source.tree import check_root
    from helix_engine.workspace import layout

    check_root(args.source_root)  # a missing root is said before the IR is read
    ir_terms: list[Any] = []
    ir_dir: Path | None = None
    if args.round_n is not None:
        ir_terms, ir_dir = _round_terms(args)
    located = locate(args.source_root, [t.name for t in ir_terms] + list(args.term), hint=args.hint,
                     limit=args.limit)
    written: Path | None = None
    if args.round_n is not None and not args.no_write:
        extra = [t for t in located.terms if t not in {x.name.lower() for x in ir_terms}]
        from helix_engine.compiler_source.ir_terms import Term

        shown_terms = ir_terms + [Term(name=t, kind="given", count=0, source="--term") for t in extra]
        written = write_analysis(args.workspace / layout.round_dir_name(args.round_n), located, shown_terms,
                                 str(ir_dir), _command_line(args))
    if args.json or args.format == "json":
        payload = located.to_json()
        payload["ir_terms"] = [{"name": t.name, "kind": t.kind, "count": t.count, "source": t.source} for t in ir_terms]
        payload["ir_dir"] = str(ir_dir) if ir_dir else None
        payload["analysis_file"] = str(written) if written else None
        print_json(payload)
        return 0
    print(f"Compiler source candidates in {clean(located.source_root)} (commit {clean(located.commit or 'unknown')}; "
          f"{located.tree['files']} files searched in {located.elapsed_s:.2f} s)")
    if ir_dir is not None:
        print(f"Terms from {clean(ir_dir)}: " + ", ".join(clean(t.name) for t in ir_terms))
    for area, hits in located.areas.items():
        print(f"\n{area}:")
        if not hits:
            print("  (no matches)")
        for hit in hits:
            where = f"{hit.path}:{hit.line}" if hit.line else hit.path
            print(f"  {clean(where)}  score={hit.score}  matched_terms={clean(','.join(hit.matched_terms))}  "
                  f"why={hit.why}")
            for number, text in hit.lines:
                print(f"      {number}: {clean(text)}")
    print("\nDefinitions:" if located.definitions else "\nDefinitions: (none names these terms)")
    for d in located.definitions:
        print(f"  {d.kind:<16} {clean(d.label)}  {clean(d.path)}:{d.line}")
    if located.tree.get("truncated"):
        print(f"\nNote: {clean(located.tree['truncated'])}")
    if written is not None:
        print(f"\nWrote helix's evidence block in {clean(written)} (your sections there are kept); "
              "`helix round-state` lists compiler-source in evidence_sources.")
    print("Read a location with `helix compiler-source show --source-root DIR PATH:LINE`.")
    return 0


def _show(args: argparse.Namespace) -> int:
    from helix_engine.compiler_source.locate import show

    data = show(args.source_root, args.location, context=args.context)
    if args.json:
        print_json(data)
        return 0
    print(f"{clean(data['path'])} (lines {data['first']}-{data['last']} of {data['total_lines']})")
    for row in data["lines"]:
        mark = ">" if row["line"] == data["line"] else " "
        print(f"{mark}{row['line']:>6}  {clean(row['text'])}")
    return 0


def _terms(args: argparse.Namespace) -> int:
    terms, ir_dir = _round_terms(args)
    if args.json:
        print_json({"ir_dir": str(ir_dir), "terms": [{"name": t.name, "kind": t.kind, "count": t.count,
                                                      "source": t.source} for t in terms]})
        return 0
    print(f"Names in {clean(ir_dir)}:")
    for t in terms:
        print(f"  {t.kind:<9} {clean(t.name)}  x{t.count}  ({clean(t.source)})")
    if not terms:
        print("  (none: the capture holds no pass names, ops or attributes helix recognizes)")
    return 0
