"""``helix lint [--round-dir D | FILE]``: the skill's hard-rule lints, alone.

The same function (`state.lints.lint_round`) that fills submit-round's ``lints`` field and the
cockpit's badges, so an agent can see them before it submits (the pattern cards point here).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from helix_engine.commands.workspace_flag import add_workspace_flag
from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's type
    p = sub.add_parser(
        "lint", help="the skill's hard-rule lints of a round's operator (the ones submit-round --check returns)",
        description="Warn about the skill's hard rules in an operator: more than one @triton.jit kernel (fuse "
        "them first), tl.maximum/tl.minimum without propagate_nan, num_warps on an NPU target, no Triton launch "
        "left. Exactly the `lints` of `helix submit-round --check --json`. Warnings only: exit 0 either way.")
    p.add_argument("file", nargs="?", type=Path, metavar="FILE", help="an operator file (default: --round-dir's)")
    p.add_argument("--round-dir", type=Path, help="the opt-round-N folder whose operator to lint")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workspace_flag(p, folder_flag="--round-dir")
    p.set_defaults(func=_lint)


def _lint(args: argparse.Namespace) -> int:
    from helix_engine.state.lints import lint_file, lint_round

    if (args.file is None) == (args.round_dir is None):
        raise HelixError("give one of FILE or --round-dir, e.g. `helix lint --round-dir opt-round-1`")
    if args.round_dir is not None:
        round_dir = Path(args.round_dir).expanduser().resolve()
        if not round_dir.is_dir():
            raise HelixError(f"{clean(args.round_dir)} is not a folder; pass the round's opt-round-N folder")
        found = lint_round(round_dir)
        subject = round_dir.name
    else:
        if not Path(args.file).is_file():
            raise HelixError(f"{clean(args.file)} is not a file; pass the operator file to lint")
        found = lint_file(Path(args.file))
        subject = str(args.file)
    if args.json:
        print_json({"subject": subject, "lints": [str(p) for p in found], "problems": [p.to_json() for p in found]})
        return 0
    if not found:
        print(f"{clean(subject)}: no hard-rule lint")
    for problem in found:
        print(f"! {clean(problem, multiline=True)}")
    return 0
