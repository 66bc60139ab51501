"""Forms that change the workflow: start round, submit round, set round state.

Each form calls the same `helix_engine.state.lifecycle` function as the CLI, in a thread
worker, and shows the engine's answer inline (status, warnings, the checker's issues, the
guideline). The forms leave the writing to the engine, and the watcher shows it; the one
exception is a missing summary.md, which the submit form collects and writes (atomically)
before calling submit-round, since the checker requires it.
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
from textual.widgets import Button, Input, Label, Select, SelectionList, Static, TextArea

from helix_engine.workspace.models import ANALYSIS_POLICIES, METRIC_SOURCES, ROUND_STRATEGIES, STATUSES, WorkspaceSnapshot
from helix_engine.sanitize import clean
from helix_tui import actions
from helix_tui.render import plain, round_key

EVIDENCE_SOURCES: tuple[str, ...] = ("benchmark", "profile", "ir", "compiler-source")
#: What the seed asks summary.md to hold (shown in the empty summary area).
SUMMARY_PLACEHOLDER = ("The round's conclusion: the optimization points that mattered, the final pattern "
                       "direction, the final analysis level, the evidence that decided it, open questions.")


class EngineAnswer(Message):
    def __init__(self, payload: dict[str, Any], code: int, error: str | None = None) -> None:
        super().__init__()
        self.payload = payload
        self.code = code
        self.error = error


class CheckText(Message):
    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text


def answer_text(payload: dict[str, Any], code: int, error: str | None = None) -> Text:
    """The engine's answer as the form shows it: status, issues, warnings, guideline (escaped:
    they quote file names and values from the workspace)."""
    text = Text()
    if error:
        text.append(f"error: {clean(error, multiline=True)}\n", style="bold red")
        return text
    status = clean(payload.get("status", "pass" if code == 0 else "fail"))
    text.append(f"{status}\n", style="bold green" if status == "pass" else "bold red")
    for issue in payload.get("issues") or []:
        text.append(f"  ✘ {clean(issue, multiline=True)}\n", style="red")
    for warning in payload.get("warnings") or []:
        text.append(f"  ! {clean(warning, multiline=True)}\n", style="yellow")
    if payload.get("guideline"):
        text.append(clean(payload["guideline"], multiline=True) + "\n")
    if payload.get("next_option"):
        text.append(f"next: {clean(payload['next_option'], multiline=True)}\n", style="bold")
    return text


class EngineForm(ModalScreen[None]):
    """Shared frame: fields, a Run button (ctrl+s), the engine's answer, esc to close."""

    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("ctrl+s", "run_form", "Run")]
    TITLE_TEXT = ""
    RUN_LABEL = "Run"

    DEFAULT_CSS = """
    EngineForm { align: center middle; }
    EngineForm > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: round $accent; background: $surface; padding: 0 1; }
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
        yield Label("Round folder")
        yield Input(round_key(n), id="round-dir", compact=True)
        yield Label("Round strategy")
        yield Select([(s, s) for s in ROUND_STRATEGIES], value="exploration", allow_blank=False, id="strategy", compact=True)
        yield Label("Analysis policy")
        yield Select([(p, p) for p in ANALYSIS_POLICIES], value="pattern_entry", allow_blank=False, id="policy", compact=True)
        yield Label("Reason (why this round, what bottleneck)")
        yield Input(placeholder="e.g. kernel is memory-bound; try vectorized loads", id="reason", compact=True)
        yield Static("", id="preview", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()
        self._preview()

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
        if not reason.strip():
            raise actions.ActionRefused("write a reason: what bottleneck this round goes after")
        round_dir = self.snapshot.root / name

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state.lifecycle import start_round

            return start_round(round_dir, strategy, policy, reason)

        return call


class SetRoundStateScreen(EngineForm):
    TITLE_TEXT = "Set the active round's strategy / analysis policy"
    RUN_LABEL = "Set"

    def fields(self) -> ComposeResult:
        entry = None
        wf = self.snapshot.workflow
        if wf is not None and wf.current_round is not None:
            entry = wf.rounds.get(str(wf.current_round))
        current = entry.strategy_state if entry is not None else None
        where = f"active round: {round_key(wf.current_round)}" if wf and wf.current_round else "no active round"
        if current is not None:
            where += f" · now {current.round_strategy} / {current.analysis_policy}"
        yield Static(plain(where), classes="hint")
        yield Label("Round strategy (blank: keep)")
        yield Select([(s, s) for s in ROUND_STRATEGIES], id="strategy", compact=True)
        yield Label("Analysis policy (blank: keep; only deeper is allowed)")
        yield Select([(p, p) for p in ANALYSIS_POLICIES], id="policy", compact=True)
        yield Label("Reason")
        yield Input(id="reason", compact=True)

    @on(Input.Submitted, "#reason")
    def _reason_entered(self) -> None:
        self.action_run_form()

    def engine_call(self) -> actions.EngineCall:
        strategy = _value(self.query_one("#strategy", Select))
        policy = _value(self.query_one("#policy", Select))
        reason = self.query_one("#reason", Input).value
        workspace = self.snapshot.root

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state.lifecycle import set_current_round_state

            return set_current_round_state(workspace, reason, round_strategy=strategy, analysis_policy=policy)

        return call


class SubmitRoundScreen(EngineForm):
    TITLE_TEXT = "Submit round"
    RUN_LABEL = "Submit"

    def __init__(self, snapshot: WorkspaceSnapshot, prefill: actions.SubmitPrefill) -> None:
        super().__init__(snapshot)
        self.prefill = prefill

    def fields(self) -> ComposeResult:
        p = self.prefill
        yield Static(plain(f"{round_key(p.number)} · statuses from {p.status_source}"), classes="hint")
        yield Label("Parent round (baseline or opt-round-M)")
        # pre-filled from workspace files: shown escaped (what is shown is what gets submitted)
        yield Input(clean(p.parent_round), id="parent", compact=True)
        yield Label(plain("Hypothesis" + (f" (from the {p.hypothesis_source})" if p.hypothesis_source else "")))
        yield Input(clean(p.hypothesis), id="hypothesis", compact=True)
        if p.summary_missing:
            yield Label(plain(f"Summary ({actions.summary_target(p).name} is missing: written before submitting)"))
            yield TextArea("", id="summary", soft_wrap=True, tab_behavior="focus", placeholder=SUMMARY_PLACEHOLDER)
        yield Label("Evidence sources")
        yield SelectionList[str](*[(e, e, e in p.evidence_sources) for e in EVIDENCE_SOURCES], id="evidence", compact=True)
        yield Label("Correctness status")
        yield Select([(s, s) for s in STATUSES], value=p.correctness_status, allow_blank=False, id="correctness", compact=True)
        yield Label("Benchmark status")
        yield Select([(s, s) for s in STATUSES], value=p.benchmark_status, allow_blank=False, id="benchmark", compact=True)
        yield Label("Effective metric source")
        yield Select([(s, s) for s in METRIC_SOURCES], value=p.effective_metric_source, allow_blank=False, id="metric", compact=True)
        yield Static("checking the round…", id="check", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#hypothesis", Input).focus()
        self.run_check()

    @work(thread=True, exclusive=True, group="check", exit_on_error=False, description="helix form")
    def run_check(self) -> None:
        """The checker's current verdict on the round folder (read-only), shown inline."""
        try:
            from helix_engine.state.checks import check_round

            result = check_round(self.prefill.round_dir)
            text = Text("checker now: ", style="bold")
            if result.status == "pass":
                text.append("the round folder passes the checker", style="green")
            for issue in result.issues:
                text.append(f"\n  ✘ {clean(issue)}", style="red")
            for lint in result.lints:
                text.append(f"\n  ! {clean(lint)}", style="yellow")
        except Exception as exc:  # noqa: BLE001
            text = plain(f"cannot check the round: {exc}", "red")
        self.post_message(CheckText(text))

    def on_check_text(self, message: CheckText) -> None:
        self.query_one("#check", Static).update(message.text)

    def engine_call(self) -> actions.EngineCall:
        fields = actions.round_state_fields(
            self.prefill,
            self.query_one("#hypothesis", Input).value,
            list(self.query_one("#evidence", SelectionList).selected),
            _value(self.query_one("#correctness", Select)) or "not_run",
            _value(self.query_one("#benchmark", Select)) or "not_run",
            _value(self.query_one("#metric", Select)) or "kernel",
            self.query_one("#parent", Input).value,
        )
        if not fields["hypothesis"]:
            raise actions.ActionRefused("write the hypothesis this round tested")
        summary = self.query("#summary").first(TextArea).text if self.query("#summary") else None
        if summary is not None and not summary.strip():
            raise actions.ActionRefused("write the round summary: submit-round needs summary.md")
        prefill = self.prefill
        round_dir = prefill.round_dir
        wf = self.snapshot.workflow
        current = prefill.number if wf is not None and wf.current_round == prefill.number else None

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state.lifecycle import submit_round, write_round_state

            if summary is not None and actions.summary_file(prefill) is None:
                actions.write_summary(prefill, summary)
            write_round_state(round_dir, **fields)
            return submit_round(round_dir, current_round=current)

        return call

    def on_engine_answer(self, message: EngineAnswer) -> None:
        super().on_engine_answer(message)
        self.run_check()

