"""``helix cluster status``: the Ray cluster's nodes, devices free and busy, and helix jobs
running where (thin: parse → helix_engine.cluster.status → print text or ``--json``)."""

from __future__ import annotations

import argparse

from helix_engine.console import print_json
from helix_engine.errors import HelixError
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser("cluster", help="the Ray cluster that --cluster sends jobs to",
                             description="Look at the Ray cluster helix jobs run on (`--cluster ADDRESS` on "
                             "run-test, run-bench, probe-bench, profile-bench and ir capture).")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="COMMAND")
    status = csub.add_parser("status", help="nodes, devices free and busy, helix jobs running where",
                             description="Each node of the cluster (alive or dead), its device resources free "
                             "and busy, and the helix jobs running on it (job id, kind, device, workspace).")
    status.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help="the cluster's address, e.g. head:6379 (default: $HELIX_CLUSTER)")
    status.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.set_defaults(func=cmd_cluster_status)
    cluster.set_defaults(func=lambda _args: _usage(cluster))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from helix_engine.cluster import cluster_address
    from helix_engine.cluster.status import cluster_status

    address = cluster_address()
    if not address:
        raise HelixError("which cluster? pass --cluster HEAD:6379 or set HELIX_CLUSTER")
    found = cluster_status(address)
    if args.json:
        print_json(found.to_json())
    else:
        print(clean(found.to_text(), multiline=True))
    return 0
