"""Forms that change the workflow: start round, set round state, prepare the baseline (the
submit form is in screens/submit.py).

Each form calls the same engine function as the CLI, in a thread worker. It opens with the
focus on the first field that needs input and shows current values; a refusal is shown inline
(status, warnings, the issues, the guideline) and the form stays open; a pass closes it with a
notice saying what changed. The forms leave the writing to the engine, and the watcher shows it.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static

from helix_engine.sanitize import clean
from helix_engine.workspace.models import (
    ANALYSIS_POLICIES,
    ROUND_STRATEGIES,
    StrategyState,
    WorkflowState,
    WorkspaceSnapshot,
)
from helix_tui import actions
from helix_tui.actions import describe_payload
from helix_tui.render import plain, round_key


class EngineAnswer(Message):
    def __init__(self, payload: dict[str, Any], code: int, error: str | None = None) -> None:
        super().__init__()
        self.payload = payload
        self.code = code
        self.error = error


def answer_text(payload: dict[str, Any], code: int, error: str | None = None) -> Text:
    """The engine's answer as the form shows it: status, what submit-round would do (a check),
    issues, warnings, guideline (escaped: they quote file names and values from the workspace)."""
    text = Text()
    if error:
        text.append(f"error: {clean(error, multiline=True)}\n", style="bold red")
        return text
    status = clean(payload.get("status", "pass" if code == 0 else "fail"))
    text.append(f"{status}\n", style="bold green" if status == "pass" else "bold red")
    if payload.get("would"):
        text.append(clean(payload["would"], multiline=True) + "\n", style="bold")
    for issue in payload.get("issues") or []:
        text.append(f"  ✘ {clean(issue, multiline=True)}\n", style="red")
    for warning in [*(payload.get("warnings") or []), *(payload.get("lints") or [])]:
        text.append(f"  ! {clean(warning, multiline=True)}\n", style="yellow")
    if payload.get("guideline"):
        text.append(clean(payload["guideline"], multiline=True) + "\n")
    if payload.get("next_option"):
        text.append(f"next: {clean(payload['next_option'], multiline=True)}\n", style="bold")
    return text


def passed(payload: dict[str, Any], code: int) -> bool:
    """The engine did what the form asked (a transition passed, a job started)."""
    return code == 0 and payload.get("status") in ("pass", "started")


class EngineForm(ModalScreen[None]):
    """Shared frame: fields, a Run button (ctrl+s), the engine's answer, esc to close. On mount
    the focus goes to ``first_input()``; on a pass the form closes with ``done_text``."""

    BINDINGS = [Binding("escape", "dismiss", "Close", id="close"), Binding("ctrl+s", "run_form", "Run", id="form-run")]
    TITLE_TEXT = ""
    RUN_LABEL = "Run"

    DEFAULT_CSS = """
    EngineForm { align: center middle; }
    EngineForm > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: round $accent; background: $surface;
                                  padding: 0 1; }
    EngineForm Label { margin-top: 1; color: $text-muted; }
    EngineForm Input, EngineForm Select { background: $boost; }
    EngineForm Button { margin-right: 2; }
    EngineForm .answer { margin-top: 1; height: auto; }
    EngineForm .hint { color: $text-muted; height: auto; }
    EngineForm Horizontal { height: auto; margin-top: 1; }
    EngineForm SelectionList { height: auto; max-height: 6; }
    EngineForm TextArea { height: 8; }
    """

    def __init__(self, snapshot: WorkspaceSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.TITLE_TEXT, style="bold"), classes="title")
            yield from self.fields()
            with Horizontal():
                yield Button(self.RUN_LABEL + " (ctrl+s)", id="run", variant="primary", compact=True)
                yield Button("Close (esc)", id="close", compact=True)
            yield Static("", id="answer", classes="answer")

    def fields(self) -> ComposeResult:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.first_input().focus()

    def first_input(self) -> Widget:
        """The first field that needs input (the Run button when none does)."""
        return self.query_one("#run", Button)

    def done_text(self, payload: dict[str, Any]) -> str:
        """The notice shown when the form closes on a pass: what changed."""
        return describe_payload(self.TITLE_TEXT, payload, 0)

    @on(Button.Pressed, "#run")
    def _run_pressed(self) -> None:
        self.action_run_form()

    @on(Button.Pressed, "#close")
    def _close_pressed(self) -> None:
        self.dismiss()

    def action_run_form(self) -> None:
        try:
            call = self.engine_call()
        except actions.ActionRefused as exc:
            self.show_answer({}, 1, str(exc))
            return
        self.query_one("#answer", Static).update(Text("running…", style="dim"))
        self.run_call(call)

    def engine_call(self) -> actions.EngineCall:
        raise NotImplementedError

    @work(thread=True, exclusive=True, exit_on_error=False, description="helix form")
    def run_call(self, call: actions.EngineCall) -> None:
        try:
            payload, code = call()
        except Exception as exc:  # noqa: BLE001 - HelixError, validation errors: shown inline
            self.post_message(EngineAnswer({}, 1, str(exc) or type(exc).__name__))
            return
        self.post_message(EngineAnswer(payload, code))

    def on_engine_answer(self, message: EngineAnswer) -> None:
        if message.error is None and passed(message.payload, message.code):
            self.app.notify(self.done_text(message.payload), title=self.TITLE_TEXT, timeout=8)
            self.dismiss()
            return
        self.show_answer(message.payload, message.code, message.error)

    def show_answer(self, payload: dict[str, Any], code: int, error: str | None = None) -> None:
        self.last_answer = (payload, code, error)
        answer = self.query_one("#answer", Static)
        answer.update(answer_text(payload, code, error))
        # At 80x24 the answer is below the fold: bring it into view once it has its new height.
        self.call_after_refresh(answer.scroll_visible, animate=False)


def _value(select: Select) -> str | None:
    value = select.value
    return None if value is Select.NULL or value is None else str(value)


class StartRoundScreen(EngineForm):
    TITLE_TEXT = "Start round"
    RUN_LABEL = "Start"

    def fields(self) -> ComposeResult:
        n = actions.next_round_number(self.snapshot)
        stem = self.snapshot.operator_file.stem if self.snapshot.operator_file else "<operator>"
        yield Label("Round folder")
        yield Input(round_key(n), id="round-dir", compact=True)
        yield Label(plain(f"Parent (baseline or opt-round-M; its operator is copied to opt_{stem}.py)"))
        yield Input(actions.default_parent(self.snapshot, n), id="parent", compact=True)
        yield Label("Round strategy")
        yield Select([(s, s) for s in ROUND_STRATEGIES], value="exploration", allow_blank=False, id="strategy", compact=True)
        yield Label("Analysis policy")
        yield Select([(p, p) for p in ANALYSIS_POLICIES], value="pattern_entry", allow_blank=False, id="policy", compact=True)
        yield Label("Reason (why this round, what bottleneck)")
        yield Input(placeholder="e.g. kernel is memory-bound; try vectorized loads", id="reason", compact=True)
        yield Static("", id="preview", classes="hint")

    def on_mount(self) -> None:  # (EngineForm.on_mount runs too: Textual calls each class's handler)
        self._preview()

    def first_input(self) -> Widget:
        return self.query_one("#reason", Input)

    def done_text(self, payload: dict[str, Any]) -> str:
        text = (f"{payload.get('round')} is active ({payload.get('round_strategy')} / "
                f"{payload.get('analysis_policy')}), built on {payload.get('parent_round') or 'its parent'}")
        if payload.get("operator_file"):
            made = "created from the parent's operator" if payload.get("operator_created") else "already there"
            text += f": edit {payload['operator_file']} ({made})"
        warnings = payload.get("warnings") or []
        return text + "".join(f"\n! {w}" for w in warnings)

    @on(Select.Changed)
    def _preview(self) -> None:
        """The engine's combination warnings, before anything is written."""
        try:
            from helix_engine.state.workflow import combination_warnings

            warnings = combination_warnings(_value(self.query_one("#strategy", Select)) or "",
                                            _value(self.query_one("#policy", Select)) or "")
        except Exception:  # noqa: BLE001 - preview only
            warnings = []
        self.query_one("#preview", Static).update(plain("\n".join(f"! {w}" for w in warnings), "yellow", multiline=True))

    @on(Input.Submitted, "#reason")
    def _reason_entered(self) -> None:
        self.action_run_form()

    def engine_call(self) -> actions.EngineCall:
        name = self.query_one("#round-dir", Input).value.strip()
        strategy = _value(self.query_one("#strategy", Select)) or ""
        policy = _value(self.query_one("#policy", Select)) or ""
        reason = self.query_one("#reason", Input).value
        parent = self.query_one("#parent", Input).value.strip() or None
        if not reason.strip():
            raise actions.ActionRefused("write a reason: what bottleneck this round goes after")
        round_dir = self.snapshot.root / name

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state.lifecycle import start_round

            return start_round(round_dir, strategy, policy, reason, parent_round=parent)

        return call


class SetRoundStateScreen(EngineForm):
    TITLE_TEXT = "Set the active round's strategy / analysis policy"
    RUN_LABEL = "Set"

    def __init__(self, snapshot: WorkspaceSnapshot) -> None:
        super().__init__(snapshot)
        self.current = current_strategy(snapshot)

    def fields(self) -> ComposeResult:
        wf = self.snapshot.workflow
        current = self.current
        where = f"active round: {round_key(wf.current_round)}" if wf and wf.current_round else "no active round"
        if current is not None:
            where += f" · now {current.round_strategy} / {current.analysis_policy}"
        yield Static(plain(where), classes="hint", id="now")
        yield Label("Round strategy")
        yield Select([(s, s) for s in ROUND_STRATEGIES], id="strategy", compact=True,
                     value=current.round_strategy if current is not None else Select.NULL)
        yield Label("Analysis policy (only deeper is allowed)")
        yield Select([(p, p) for p in ANALYSIS_POLICIES], id="policy", compact=True,
                     value=current.analysis_policy if current is not None else Select.NULL)
        yield Label("Reason")
        yield Input(id="reason", compact=True)

    def first_input(self) -> Widget:
        return self.query_one("#strategy", Select)

    def done_text(self, payload: dict[str, Any]) -> str:
        changes = [f"{what} {payload[f'previous_{key}']} → {payload[key]}"
                   for what, key in (("strategy", "round_strategy"), ("analysis policy", "analysis_policy"))
                   if payload.get(f"previous_{key}") not in (None, payload.get(key))]
        text = f"{payload.get('round')}: " + ("; ".join(changes) or
                                              f"{payload.get('round_strategy')} / {payload.get('analysis_policy')}")
        return text + "".join(f"\n! {w}" for w in payload.get("warnings") or [])

    @on(Input.Submitted, "#reason")
    def _reason_entered(self) -> None:
        self.action_run_form()

    def engine_call(self) -> actions.EngineCall:
        strategy = _value(self.query_one("#strategy", Select))
        policy = _value(self.query_one("#policy", Select))
        reason = self.query_one("#reason", Input).value
        current = self.current
        if current is not None:  # pass only what changed: the engine refuses a no-op
            strategy = None if strategy == current.round_strategy else strategy
            policy = None if policy == current.analysis_policy else policy
            if strategy is None and policy is None:
                raise actions.ActionRefused(f"nothing to change: the round is {current.round_strategy} / "
                                            f"{current.analysis_policy}; pick another strategy or a deeper policy")
        if not reason.strip():
            raise actions.ActionRefused("write a reason: why the round's contract changes")
        workspace = self.snapshot.root

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state.lifecycle import set_current_round_state

            return set_current_round_state(workspace, reason, round_strategy=strategy, analysis_policy=policy)

        return call


def current_strategy(snap: WorkspaceSnapshot) -> StrategyState | None:
    """The active round's strategy state, read from .helix/state.json now (the snapshot may not
    have seen a change made a moment ago)."""
    from helix_engine.state import workflow

    wf: WorkflowState | None
    try:
        wf = workflow.load_workflow(workflow.state_path(snap.root))
    except (FileNotFoundError, ValueError):
        wf = snap.workflow
    if wf is None or wf.current_round is None:
        return None
    entry = wf.rounds.get(str(wf.current_round))
    return entry.strategy_state if entry is not None else None


class PrepareBaselineScreen(EngineForm):
    """`helix prepare-baseline`, offered when the baseline is missing (b, t, n on a fresh folder)."""

    TITLE_TEXT = "Prepare the baseline"
    RUN_LABEL = "Prepare"

    def __init__(self, snapshot: WorkspaceSnapshot, why: str = "") -> None:
        super().__init__(snapshot)
        self.why = why

    def fields(self) -> ComposeResult:
        op = self.snapshot.operator_file.name if self.snapshot.operator_file else "the operator"
        lines = [self.why] if self.why else []
        lines.append(f"helix prepare-baseline copies {op} into baseline/, runs its test and its bench there "
                     "(jobs: see the Jobs pane, 3), writes baseline/state.json and the perf file, then submits the "
                     "baseline. Rounds start from it (n).")
        if not actions.baseline_missing(self.snapshot):
            lines.append("The baseline is already prepared: preparing it again replaces it (helix refuses while "
                         "rounds measure against it).")
        yield Static(plain("\n\n".join(lines), multiline=True), classes="hint", id="about")

    def engine_call(self) -> actions.EngineCall:
        return actions.spawn_call(self.snapshot.root, actions.prepare_baseline_argv(self.snapshot))
