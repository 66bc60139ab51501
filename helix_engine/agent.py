"""``helix agent start``: run the user's own agent command on the workspace, as a job.

Why a job: the agent session is then seen like any benchmark (``.helix/jobs/<id>/``, its output
live in the cockpit's Jobs pane, ``x`` or ``helix jobs cancel`` stops it and every process it
started). helix bundles no agent and ships no prompt of the workflow: the user configures the
command (``--command``, else ``HELIX_AGENT_COMMAND``, else ``.helix/agent.json``) and the skill
file that is their workflow (``--skill``, ``HELIX_AGENT_SKILL``, ``skill_file``). The job hands
the agent the workspace, the skill file's path and the session's stop conditions
(.helix/goals.json) as environment variables, plus a short prompt naming them.

The agent job leases no device and sets no backend: each helix command the agent runs picks
its own and leases a device for its own job.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from helix_engine.errors import HelixError
from helix_engine.workspace import files, layout
from helix_engine.workspace.reading import load_model

KIND = "agent"
CONFIG_NAME = "agent.json"  # inside .helix/
COMMAND_ENV = "HELIX_AGENT_COMMAND"
SKILL_ENV = "HELIX_AGENT_SKILL"
DEFAULT_TIMEOUT_S = 12 * 3600.0
#: What the agent's process gets (besides the inherited environment).
WORKSPACE_VAR, SKILL_VAR, PROMPT_VAR = "HELIX_WORKSPACE", "HELIX_SKILL_FILE", "HELIX_AGENT_PROMPT"
TARGET_VAR, ROUNDS_VAR = "HELIX_TARGET_SPEEDUP", "HELIX_MAX_ROUNDS"
HOW_TO_CONFIGURE = (
    "helix bundles no agent: configure yours with `helix agent config --command 'CMD'` (kept in "
    f".helix/{CONFIG_NAME}), set {COMMAND_ENV}, or pass `helix agent start --command 'CMD'`. The command runs "
    f"in the workspace through /bin/sh and finds the workspace, the skill file and the stop conditions in "
    f"${WORKSPACE_VAR}, ${SKILL_VAR}, ${TARGET_VAR} / ${ROUNDS_VAR}, and a prompt naming them in ${PROMPT_VAR}"
)


class AgentConfig(BaseModel):
    """``.helix/agent.json``: the agent command (a shell line, or an argv list), the skill file
    (relative paths are relative to the workspace) and the job's time limit."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    command: str | list[str] | None = None
    skill_file: str | None = None
    timeout_s: float | None = None

    @field_validator("command")
    @classmethod
    def _not_blank(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, list) and not value:
            raise ValueError("command must not be an empty list")
        return value

    @field_validator("timeout_s")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError("timeout_s must be a positive number of seconds")
        return value


def config_path(workspace: Path) -> Path:
    return Path(workspace) / layout.HELIX_DIR / CONFIG_NAME


def load_config(workspace: Path) -> AgentConfig:
    """The configured agent (an empty one when none is); HelixError naming the fix when the file
    is unreadable or invalid (read through the safe reader)."""
    path = config_path(workspace)
    if not path.exists() and not path.is_symlink():
        return AgentConfig()
    fix = "rewrite it with `helix agent config --command 'CMD'` or remove it with `helix agent config --clear`"
    config, _raw, problems = load_model(path, Path(workspace), AgentConfig, what="agent configuration", fix=fix)
    if config is None:
        raise HelixError(str(problems[0]) if problems else f"{path} cannot be read; {fix}")
    return config


def save_config(workspace: Path, *, command: str | None = None, skill_file: str | None = None,
                timeout_s: float | None = None, clear: bool = False) -> AgentConfig:
    """Set the given fields of .helix/agent.json (the others are kept; ``clear`` starts empty)."""
    with files.workspace_lock(Path(workspace)):
        data = {} if clear else load_config(workspace).model_dump(mode="json", exclude_none=True)
        if command is not None:
            data["command"] = command
        if skill_file is not None:
            data["skill_file"] = skill_file
        if timeout_s is not None:
            data["timeout_s"] = timeout_s
        try:
            config = AgentConfig.model_validate(data)
        except ValueError as exc:  # pydantic's ValidationError: name the field
            from helix_engine.workspace.reading import describe_validation

            why = describe_validation(exc) if isinstance(exc, ValidationError) else str(exc)
            raise HelixError(f"the agent configuration is not valid ({why}); nothing was written") from None
        files.atomic_write_json(config_path(workspace), config.model_dump(mode="json", exclude_none=True))
    return config


def command_argv(command: str | list[str]) -> list[str]:
    """A shell line runs through ``/bin/sh -c`` (the user's own line: pipes and $VARS work); a
    list is the argv itself."""
    if isinstance(command, list):
        return [str(a) for a in command]
    return [shutil.which("sh") or "/bin/sh", "-c", command]


def _skill_path(workspace: Path, given: str | None, config: AgentConfig) -> Path | None:
    """The skill file: ``--skill`` (relative to the current folder), else $HELIX_AGENT_SKILL, else
    the configured one (relative to the workspace). helix never reads it: the agent does."""
    if given:
        path = Path(given).expanduser().resolve()
    elif os.environ.get(SKILL_ENV, "").strip():
        path = Path(os.environ[SKILL_ENV].strip()).expanduser().resolve()
    elif config.skill_file:
        path = (Path(workspace) / Path(config.skill_file).expanduser()).resolve()
    else:
        return None
    if not path.is_file():
        raise HelixError(f"the skill file {path} does not exist; point --skill (or {SKILL_ENV}, or "
                         "`helix agent config --skill FILE`) at your workflow's SKILL file")
    return path


def prompt(workspace: Path, skill: Path | None, target: float | None, max_rounds: int | None) -> str:
    """A short instruction naming what the job hands over (the workflow itself is the skill file)."""
    lines = [(f"Optimize the Triton operator in the helix workspace {workspace} with the helix command line "
              "(`helix --help` lists the commands).")]
    lines.append(f"Follow the workflow in the skill file {skill}; read it first." if skill is not None
                 else "No skill file is configured; follow your own optimize workflow.")
    conditions = []
    if target is not None:
        conditions.append(f"stop once the best round's geomean speedup reaches {target:g}x")
    if max_rounds is not None:
        conditions.append(f"stop after round {max_rounds}")
    lines.append(f"Stop conditions: {'; '.join(conditions)}." if conditions else "No stop conditions are set.")
    lines.append("The skill's reference files are helix commands: `helix reference artifacts` and `helix reference "
                 "opt-note-format`; its pattern index and cards are `helix patterns show index` and `helix patterns "
                 "show NAME`.")
    lines.append("After each `helix submit-round`, read its JSON guideline and follow its continue-or-stop instruction.")
    return " ".join(lines)


def agent_environment(workspace: Path, skill: Path | None) -> dict[str, str]:
    """The variables the agent gets: workspace, skill file, stop conditions and the prompt. The
    target is deliberately not HELIX_OPTIMIZE_MIN_SPEEDUP: that would outrank a later change of
    the goals (helix goals) for the whole session."""
    from helix_engine.state.goals import load_goals

    goals, problem = load_goals(workspace)
    if problem is not None:
        raise HelixError(problem)
    target = goals.target_speedup if goals is not None else None
    rounds = goals.max_rounds if goals is not None else None
    env = {WORKSPACE_VAR: str(workspace), PROMPT_VAR: prompt(workspace, skill, target, rounds)}
    if skill is not None:
        env[SKILL_VAR] = str(skill)
    if target is not None:
        env[TARGET_VAR] = f"{target:g}"
    if rounds is not None:
        env[ROUNDS_VAR] = str(rounds)
    return env


class _NoDevice:
    """The job runner's backend slot for a job that runs no operator code itself: no device
    lease, no backend variables (HELIX_BACKEND, TRITON_INTERPRET) forced on the agent."""

    name = "none"
    visible_devices_var = None

    def child_env(self, device: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return {}


def running_agent(workspace: Path) -> Any:
    """The workspace's agent job that is still queued or running, else None."""
    from helix_engine.jobs.registry import list_jobs

    return next((j for j in list_jobs(workspace) if j.kind == KIND and j.active), None)


def resolve(workspace: Path, command: str | None = None, skill: str | None = None,
            timeout_s: float | None = None) -> tuple[list[str], dict[str, str], float]:
    """(argv, environment, time limit) of the agent job; HelixError with the next step when no
    command is configured or the skill file is missing."""
    config = load_config(workspace)
    chosen = command if command and command.strip() else (os.environ.get(COMMAND_ENV, "").strip() or config.command)
    if not chosen:
        raise HelixError(f"no agent command is configured for {workspace}; {HOW_TO_CONFIGURE}")
    env = agent_environment(workspace, _skill_path(workspace, skill, config))
    limit = timeout_s if timeout_s is not None else (config.timeout_s or DEFAULT_TIMEOUT_S)
    return command_argv(chosen), env, limit


def start_agent(workspace: Path, command: str | None = None, skill: str | None = None, *,
                timeout_s: float | None = None, echo: bool = False, job_id: str | None = None) -> Any:
    """Run the agent as a job of ``workspace`` until it exits, times out or is cancelled; its
    final JobInfo. One agent per workspace at a time (two would fight over the active round)."""
    from helix_engine.jobs.runner import run_job

    workspace = Path(workspace).expanduser().resolve()
    argv, env, limit = resolve(workspace, command, skill, timeout_s)
    busy = running_agent(workspace)
    if busy is not None:
        raise HelixError(f"an agent job is already running on this workspace ({busy.id}); stop it first with "
                         f"`helix jobs cancel {busy.id}` (or x on it in the cockpit's Jobs pane)")
    return run_job(workspace, KIND, argv, cwd=workspace, env=env, timeout_s=limit, backend=_NoDevice(),
                   echo=echo, job_id=job_id)
