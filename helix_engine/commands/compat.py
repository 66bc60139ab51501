"""The names and flags an agent brings from the sibling skills' command lines (issue 14):
the ``run-test-baseline|convert|optimize`` aliases, ``--verbose`` where upstream has it,
``--cluster`` (helix's way to another machine: a Ray cluster) and upstream's SSH ``--remote*``
refused with a sentence that names it.

Only argparse plumbing and printing live here; every alias runs the same engine function as
the helix command it stands for.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.sanitize import clean

REMOTE_REFUSAL = ("remote runs over SSH are not supported; run helix on that machine, or send the job to a "
                  "Ray cluster with --cluster ADDRESS (or HELIX_CLUSTER)")
CLUSTER_HELP = ("run the job on the Ray cluster at ADDRESS (e.g. head:6379; default $HELIX_CLUSTER): one free "
                "NPU, GPU or CPU of the cluster ($HELIX_CLUSTER_RESOURCE names another resource), the files sent "
                "by content, the job followed here in .helix/jobs/")

#: Upstream's run-test skill names → (help, whether a differential run needs a reference).
#: spec upstream-eval §2: "baseline accepts at most one reference flag; convert and optimize
#: require exactly one" (standalone tests take none in every variant).
RUN_TEST_SIBLINGS: dict[str, tuple[str, bool]] = {
    "run-test-baseline": ("run-test for the baseline operator (a reference is optional)", False),
    "run-test-convert": (("run-test for a converted operator (triton_<op>.py) against the original: "
                          "a differential test needs --ref-operator-file or --ref-result"), True),
    "run-test-optimize": (("run-test for a round candidate against the baseline: a differential test "
                           "needs --ref-operator-file or --ref-result"), True),
}


class _RefuseRemote(argparse.Action):
    """``--remote``, ``--remote-workdir``, ``--keep-remote-workdir``: a usage error (exit 2)
    that says why, instead of argparse's 'unrecognized arguments'."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string}: {REMOTE_REFUSAL}")


def add_remote_flags(parser: argparse.ArgumentParser) -> None:
    """``--cluster ADDRESS``, and upstream's SSH remote-execution flags, accepted by name and
    refused with a sentence that points to ``--cluster``."""
    group = parser.add_argument_group("remote")
    group.add_argument("--cluster", metavar="ADDRESS", default=None, help=CLUSTER_HELP)
    for flag, nargs in (("--remote", "?"), ("--remote-workdir", "?"), ("--keep-remote-workdir", 0)):
        group.add_argument(flag, nargs=nargs, action=_RefuseRemote, default=argparse.SUPPRESS,
                           help=f"refused: {REMOTE_REFUSAL}" if flag == "--remote" else argparse.SUPPRESS)


def add_job_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true",
                        help="also print the job's output (the child's stdout and stderr, as in output.log)")


def check_sibling_reference(args: argparse.Namespace) -> None:
    """The run-test sibling contract: convert and optimize compare against exactly one
    reference when the test is differential (argparse already refuses two)."""
    name = getattr(args, "sibling", None)
    if name is None or not RUN_TEST_SIBLINGS[name][1] or args.ref_operator_file or args.ref_result:
        return
    from helix_engine.eval.discovery import find_test_file, test_mode_of

    test = Path(args.test_file) if args.test_file else find_test_file(Path(args.operator_file), args.test_mode)
    if test_mode_of(test, args.test_mode) == "differential":
        raise HelixError(f"{name} compares the operator against a reference: add --ref-operator-file REF_OP "
                         "(e.g. baseline/<op>.py) or --ref-result REF_PT; `helix run-test` runs without one")


def write_report_copy(path: Path, text: str) -> None:
    """``run-test -o FILE``: what was printed (the text, or the JSON with --json), also in FILE."""
    from helix_engine.workspace.files import atomic_write_text

    target = Path(path).expanduser()
    try:
        atomic_write_text(target, text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise HelixError(f"cannot write {target} ({exc.strerror or exc}); pick a writable path for -o/--output") from None


def job_output(operator_file: Path | str, job_ids: list[str], max_bytes: int = 64 * 1024) -> str:
    """The output.log of each job (its last ``max_bytes``), read through the safe reader inside
    the operator's workspace, escaped for a terminal. For ``--verbose``."""
    from helix_engine.jobs.registry import OUTPUT_NAME, job_dir
    from helix_engine.workspace.layout import workspace_of
    from helix_engine.workspace.reading import open_workspace_file

    ws = workspace_of(Path(operator_file).resolve())
    parts: list[str] = []
    for job_id in job_ids:
        path = job_dir(ws, job_id) / OUTPUT_NAME
        cut = ""
        try:
            with open_workspace_file(path, path.parent) as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - max_bytes))
                data = handle.read(max_bytes).decode("utf-8", "replace")
                cut = "… (earlier output is in the file)\n" if size > max_bytes else ""
        except OSError:
            data = "(no output.log)"
        parts.append(f"--- job {clean(job_id)} output ({clean(path)}) ---\n{cut}{clean(data, multiline=True).rstrip()}")
    return "\n".join(parts)
