"""``helix patterns list | show NAME | route --profile-dir D`` (thin: parse → knowledge → print).

The cards are helix's own text; what a route prints around them (op names, paths, evidence)
comes from profiler files and is escaped with ``sanitize.clean``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("patterns", help="the pattern knowledge base: list, show a card, route a profile to cards",
                       description="Pattern triage: read the index (`helix patterns show index`), then one or two "
                       "cards. `route` turns a profile's symptoms into the symptom and pattern cards to read.")
    psub = p.add_subparsers(dest="patterns_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])

    ls = psub.add_parser("list", help="every card with its one-line summary (symptom cards first)")
    ls.add_argument("--kind", choices=("pattern", "symptom", "reference"), default=None, help="only one kind of card")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)

    show = psub.add_parser("show", help="print one card (or `index`, `artifacts`, `opt-note-format`, "
                           "`round-failure-handling`); routing aliases, "
                           "symptom names and the skill's file names (artifacts.md, pattern_index.md) work too")
    show.add_argument("name", help="card name, e.g. tiling, memory-bound, index, artifacts, opt-note-format, cache-use")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)

    route = psub.add_parser("route", help="the cards a profile's symptoms point to, in reading order")
    route.add_argument("--profile-dir", required=True, type=Path, help="profile folder (as for profile-report)")
    route.add_argument("--target-op", default=None, help="exact op/kernel name (default: largest total time)")
    route.add_argument("--json", action="store_true")
    route.set_defaults(func=_route)

    ref = sub.add_parser("reference", help="the workspace artifact contract, the opt-note.md format and closing a "
                         "failed round (the skill's references/artifacts.md, opt-note-format.md, round-failure-handling.md)",
                         description="Reference pages the optimize skill asks you to read: `artifacts` (which files "
                         "are authoritative, who writes them, what round-state.json names), "
                         "`round-failure-handling` (closing a round that failed or did not pay off) and `opt-note-format` "
                         "(the ledger's entries and who owns each line). Without NAME: the list.")
    ref.add_argument("name", nargs="?", help="artifacts, opt-note-format or round-failure-handling "
                     "(artifacts.md, references/artifacts.md work too)")
    ref.add_argument("--json", action="store_true")
    ref.set_defaults(func=_reference)


def _list(args: argparse.Namespace) -> int:
    from helix_engine.knowledge.cards import listing

    rows = [r for r in listing() if args.kind is None or r["kind"] == args.kind]
    if args.json:
        print_json({"cards": rows})
        return 0
    width = max(len(r["name"]) for r in rows) if rows else 0
    kind = None
    for r in rows:
        if r["kind"] != kind:
            kind = r["kind"]
            print({"symptom": "Symptom cards:", "pattern": "Pattern cards:"}.get(kind, "Reference pages:"))
        print(f"  {r['name']:<{width}}  {r['summary']}")
    print("Read one with `helix patterns show NAME`; the index is `helix patterns show index`; the reference pages "
          "are also `helix reference NAME`.")
    return 0


def _show(args: argparse.Namespace) -> int:
    from helix_engine.cli import close_matches
    from helix_engine.knowledge.cards import all_names, load_card, resolve

    try:
        name, note = resolve(args.name)
    except KeyError:
        guess = close_matches(args.name, all_names())
        hint = ("did you mean " + " or ".join(f"`{g}`" for g in guess) + "? ") if guess else ""
        raise HelixError(f"no card named {clean(args.name)!r}; {hint}`helix patterns list` lists every card") from None
    card = load_card(name)
    if args.json:
        print_json({**card.to_json(), "requested": args.name, "note": note})
        return 0
    if note:
        print(f"({clean(note)})\n")
    sys.stdout.write(card.text if card.text.endswith("\n") else card.text + "\n")
    return 0


def _reference(args: argparse.Namespace) -> int:
    """``helix reference [NAME]``: the reference pages, by the same reader as ``patterns show``."""
    if args.name is None:
        args.kind = "reference"
        return _list(args)
    from helix_engine.knowledge.cards import load_card, resolve

    try:
        name, _ = resolve(args.name)
    except KeyError:
        name = ""
    if not name or load_card(name).kind != "reference":
        raise HelixError(f"no reference page named {clean(args.name)!r}; `helix reference` lists them "
                         "(artifacts, opt-note-format, round-failure-handling); pattern cards are `helix patterns show NAME`")
    return _show(args)


def _route(args: argparse.Namespace) -> int:
    from helix_engine.knowledge.cards import route_report
    from helix_engine.profile.report import build_report

    routed = route_report(build_report(args.profile_dir, target_op=args.target_op))
    if args.json:
        print_json(routed)
        return 0
    print(f"Profile: {clean(routed['profile_dir'])}")
    print(f"Target: {clean(routed['target_operator'] or '(no ops)')}; bound: {clean(routed['bound'])}"
          + (f" (read `helix patterns show {routed['bound_card']}`)" if routed["bound_card"] else ""))
    if not routed["routes"]:
        print("No symptom detected from these files: start from `helix patterns show index`, or capture the IR "
              "(`helix ir capture`) for evidence the counters do not give.")
    for r in routed["routes"]:
        print(f"\n{clean(r['symptom'])}: {clean(r['evidence'])}")
        if r["symptom_card"]:
            print(f"  symptom card: {r['symptom_card']}")
        for c in r["cards"]:
            if c["card"] is None:
                print(f"  - {c['name']} (no card: {clean(c['note'])})")
                continue
            shown = c["name"] if c["card"] == c["name"] else f"{c['name']} → {c['card']}"
            print(f"  - {shown}: {c['summary']}")
    if routed["cards"]:
        print(f"\nReading order: {', '.join(routed['cards'])}")
        print("Read the symptom card first, then the one or two pattern cards that match the kernel's structure "
              "(`helix patterns show NAME`).")
    return 0
