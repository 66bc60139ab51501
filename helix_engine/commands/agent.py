"""``helix agent start | config``: run the user's configured agent on the workspace as a job
(thin: parse → helix_engine.agent → print)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helix_engine.commands.workspace_flag import add_workspace_flag
from helix_engine.console import print_json
from helix_engine.sanitize import clean


def register(sub: argparse._SubParsersAction) -> None:
    agent = sub.add_parser("agent", help="run your configured agent command on the workspace as a job",
                           description="Run the agent command you configure (helix bundles none) in the "
                           "workspace as a job: its output is live in the cockpit's Jobs pane and x (or "
                           "`helix jobs cancel ID`) stops it. The agent gets $HELIX_WORKSPACE, $HELIX_SKILL_FILE, "
                           "$HELIX_TARGET_SPEEDUP / $HELIX_MAX_ROUNDS (from .helix/goals.json) and $HELIX_AGENT_PROMPT.")
    verbs = agent.add_subparsers(dest="agent_command", metavar="ACTION")

    start = verbs.add_parser("start", help="start the agent as a job and follow its output",
                             description="Start the agent command: --command, else $HELIX_AGENT_COMMAND, else "
                             "the one in .helix/agent.json. Without --detach it runs until the agent exits "
                             "(Ctrl-C cancels it) and its output is echoed here.")
    start.add_argument("workspace", nargs="?", default=".", type=Path, metavar="WORKSPACE",
                       help="the operator workspace (default: the current folder)")
    start.add_argument("--command", dest="agent_cmd", metavar="CMD",
                       help="the agent command line (run through /bin/sh in the workspace)")
    start.add_argument("--skill", metavar="FILE",
                       help="your workflow's skill file (else $HELIX_AGENT_SKILL, else the configured one)")
    start.add_argument("--timeout-s", type=float, default=None, metavar="S",
                       help="stop the agent after S seconds (default: the configured one, else 12 hours)")
    start.add_argument("--detach", action="store_true",
                       help="start it in the background (it outlives this terminal); print the job id and return")
    start.add_argument("--job-id", help=argparse.SUPPRESS)  # --detach names the job it spawns
    start.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_workspace_flag(start)
    start.set_defaults(func=_start)

    config = verbs.add_parser("config", help="show or set the agent command and skill file (.helix/agent.json)")
    config.add_argument("workspace", nargs="?", default=".", type=Path, metavar="WORKSPACE",
                        help="the operator workspace (default: the current folder)")
    add_workspace_flag(config)
    config.add_argument("--command", dest="agent_cmd", metavar="CMD", help="the agent command line")
    config.add_argument("--skill", metavar="FILE", help="the skill file (relative paths: to the workspace)")
    config.add_argument("--timeout-s", type=float, default=None, metavar="S", help="the agent job's time limit")
    config.add_argument("--clear", action="store_true", help="forget the configuration (before setting any given)")
    config.add_argument("--json", action="store_true", help="print JSON instead of text")
    config.set_defaults(func=_config)
    agent.set_defaults(func=lambda _args: _usage(agent))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _workspace(path: Path) -> Path:
    from helix_engine.errors import HelixError
    from helix_engine.workspace.snapshot import is_workspace

    workspace = Path(path).expanduser().resolve()
    if not is_workspace(workspace):
        raise HelixError(f"{clean(workspace)} is not an operator workspace; run the command in the workspace "
                         "folder or pass it as WORKSPACE")
    return workspace


def _start(args: argparse.Namespace) -> int:
    from helix_engine import agent

    workspace = _workspace(args.workspace)
    if args.detach:
        return _start_detached(args, workspace)
    info = agent.start_agent(workspace, args.agent_cmd, args.skill, timeout_s=args.timeout_s,
                             echo=not args.json, job_id=args.job_id)
    if args.json:
        print_json(info.to_json())
    else:
        tail = f" ({clean(info.message, multiline=True)})" if info.message else ""
        print(f"agent job {info.id}: {info.status}{tail}", file=sys.stderr)
    return 0 if info.status == "passed" else 1


def _start_detached(args: argparse.Namespace, workspace: Path) -> int:
    from helix_engine import agent
    from helix_engine.jobs.launch import spawn_cli
    from helix_engine.jobs.registry import new_job_id

    agent.resolve(workspace, args.agent_cmd, args.skill, args.timeout_s)  # refuse here, with the sentence
    job_id = new_job_id(agent.KIND)
    argv = ["agent", "start", str(workspace), "--job-id", job_id]
    for flag, value in (("--command", args.agent_cmd), ("--skill", args.skill), ("--timeout-s", args.timeout_s)):
        if value is not None:
            argv += [flag, str(Path(value).resolve()) if flag == "--skill" else str(value)]
    pid = spawn_cli(workspace, argv, refusal_wait_s=1.0)
    if args.json:
        print_json({"status": "started", "job_id": job_id, "pid": pid})
    else:
        print(f"agent job {job_id} started (pid {pid}); follow it with `helix jobs tail {job_id}` or in the "
              f"cockpit's Jobs pane, stop it with `helix jobs cancel {job_id}`")
    return 0


def _config(args: argparse.Namespace) -> int:
    from helix_engine import agent

    workspace = _workspace(args.workspace)
    if args.clear or args.agent_cmd is not None or args.skill is not None or args.timeout_s is not None:
        config = agent.save_config(workspace, command=args.agent_cmd, skill_file=args.skill,
                                   timeout_s=args.timeout_s, clear=args.clear)
    else:
        config = agent.load_config(workspace)
    shown = config.model_dump(mode="json", include={"command", "skill_file", "timeout_s"})
    if args.json:
        print_json({**shown, "path": str(agent.config_path(workspace))})
        return 0
    if not config.command:
        print(f"No agent command is configured. {agent.HOW_TO_CONFIGURE}.")
    else:
        print(f"Agent command: {clean(config.command)}")
    print(f"Skill file: {clean(config.skill_file) if config.skill_file else 'none'}")
    print(f"Time limit: {config.timeout_s or agent.DEFAULT_TIMEOUT_S:g} s")
    return 0
