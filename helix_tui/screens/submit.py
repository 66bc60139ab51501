"""The submit form: round-state.json fields, then submit-round, safely.

It opens pre-filled (statuses from the round's latest jobs that ran to a verdict, evidence
sources where the round folder holds them) with the focus on the first empty required field,
and shows what submit-round would do with these values (`helix submit-round --check`, writing
nothing). ctrl+s checks again; a round that would pass is submitted; a round that would be
closed as failed is not, until a second ctrl+s (or the "Submit anyway" button) on the same values
confirms it. Only then are round-state.json (and a missing summary.md the form collected)
written and submit-round called.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widget import Widget
from textual.widgets import (
    Button,
    Input,
    Label,
    Select,
    SelectionList,
    Static,
    TextArea,
)

from helix_engine.sanitize import clean
from helix_engine.state.round_fill import EVIDENCE_SOURCES
from helix_engine.workspace.models import METRIC_SOURCES, STATUSES, WorkspaceSnapshot
from helix_tui import actions
from helix_tui.render import plain, round_key
from helix_tui.screens.forms import EngineAnswer, EngineForm

#: What the seed asks summary.md to hold (shown in the empty summary area).
SUMMARY_PLACEHOLDER = ("The round's conclusion: the optimization points that mattered, the final pattern "
                       "direction, the final analysis level, the evidence that decided it, open questions.")


class CheckText(Message):
    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text


def _value(select: Select) -> str | None:
    value = select.value
    return None if value is Select.NULL or value is None else str(value)


def check_line(payload: dict[str, Any]) -> Text:
    """The dry run as the form shows it under the fields: what would happen, then why."""
    record = payload.get("would_record")
    style = {"passed": "green", "failed": "bold red"}.get(str(record), "yellow")
    text = Text("if submitted now: ", style="bold")
    text.append(clean(payload.get("would", ""), multiline=True), style=style)
    if payload.get("status") != "pass":
        for issue in payload.get("issues") or []:
            text.append(f"\n  ✘ {clean(issue, multiline=True)}", style="red")
    for lint in payload.get("lints") or []:
        text.append(f"\n  ! {clean(lint, multiline=True)}", style="yellow")
    return text


class SubmitRoundScreen(EngineForm):
    TITLE_TEXT = "Submit round"
    RUN_LABEL = "Submit"

    def __init__(self, snapshot: WorkspaceSnapshot, prefill: actions.SubmitPrefill) -> None:
        super().__init__(snapshot)
        self.prefill = prefill
        self.confirmed: tuple[Any, ...] | None = None  # the values a "would fail" answer was about
        self._asked: tuple[Any, ...] | None = None  # the values of the call in flight

    def fields(self) -> ComposeResult:
        p = self.prefill
        source = f"statuses from {p.status_source}"
        evidence = ", ".join(p.evidence_sources) or "none"
        yield Static(plain(f"{round_key(p.number)} · {source} · evidence found: {evidence}"), classes="hint")
        yield Label("Parent round (baseline or opt-round-M)")
        # pre-filled from workspace files: shown escaped (what is shown is what gets submitted)
        yield Input(clean(p.parent_round), id="parent", compact=True)
        yield Label(plain("Hypothesis" + (f" (from the {p.hypothesis_source})" if p.hypothesis_source else "")))
        yield Input(clean(p.hypothesis), id="hypothesis", compact=True)
        if p.summary_missing:
            yield Label(plain(f"Summary ({actions.summary_target(p).name} is missing: written before submitting)"))
            yield TextArea("", id="summary", soft_wrap=True, tab_behavior="focus", placeholder=SUMMARY_PLACEHOLDER)
        yield Label("Evidence sources (ticked: found in the round folder)")
        yield SelectionList[str](*[(e, e, e in p.evidence_sources) for e in EVIDENCE_SOURCES], id="evidence", compact=True)
        yield Label("Correctness status")
        yield Select([(s, s) for s in STATUSES], value=p.correctness_status, allow_blank=False, id="correctness", compact=True)
        yield Label("Benchmark status")
        yield Select([(s, s) for s in STATUSES], value=p.benchmark_status, allow_blank=False, id="benchmark", compact=True)
        yield Label("Effective metric source")
        yield Select([(s, s) for s in METRIC_SOURCES], value=p.effective_metric_source, allow_blank=False, id="metric",
                     compact=True)
        yield Static("checking the round…", id="check", classes="hint")

    def on_mount(self) -> None:  # (EngineForm.on_mount, which sets the focus, runs too)
        self.refresh_check()

    def first_input(self) -> Widget:
        """The first empty required field: parent, hypothesis, summary, evidence; else Submit."""
        for selector in ("#parent", "#hypothesis"):
            field = self.query_one(selector, Input)
            if not field.value.strip():
                return field
        summary = self.query("#summary")
        if summary and not summary.first(TextArea).text.strip():
            return summary.first(TextArea)
        evidence = self.query_one("#evidence", SelectionList)
        if not evidence.selected:
            return evidence
        return self.query_one("#run", Button)

    # --------------------------------------------------------------------- the values

    def _fields(self) -> dict[str, Any]:
        return actions.round_state_fields(
            self.prefill,
            self.query_one("#hypothesis", Input).value,
            list(self.query_one("#evidence", SelectionList).selected),
            _value(self.query_one("#correctness", Select)) or "not_run",
            _value(self.query_one("#benchmark", Select)) or "not_run",
            _value(self.query_one("#metric", Select)) or "kernel",
            self.query_one("#parent", Input).value,
        )

    def _summary(self) -> str | None:
        found = self.query("#summary")
        return found.first(TextArea).text if found else None

    def _current_round(self) -> int | None:
        wf = self.snapshot.workflow
        return self.prefill.number if wf is not None and wf.current_round == self.prefill.number else None

    # --------------------------------------------------------------------- the dry run

    def refresh_check(self) -> None:
        self.run_check(self._fields(), self._summary() is not None, self._current_round())

    @work(thread=True, exclusive=True, group="check", exit_on_error=False, description="helix form")
    def run_check(self, fields: dict[str, Any], summary_pending: bool, current: int | None) -> None:
        """`submit-round --check` on the form's values (reads only), shown under the fields."""
        try:
            from helix_engine.state.submit_check import check_submit

            payload, _ = check_submit(self.prefill.round_dir, current_round=current, state_data=fields,
                                      summary_pending=summary_pending)
            text = check_line(payload)
        except Exception as exc:  # noqa: BLE001
            text = plain(f"cannot check the round: {exc}", "red")
        self.post_message(CheckText(text))

    def on_check_text(self, message: CheckText) -> None:
        self.query_one("#check", Static).update(message.text)

    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    def _values_changed(self) -> None:
        if self.is_mounted:
            self._withdraw_confirmation()
            self.refresh_check()

    @on(Input.Changed)
    @on(TextArea.Changed)
    def _text_changed(self) -> None:
        if self.is_mounted:
            self._withdraw_confirmation()

    def _values(self) -> tuple[Any, ...]:
        """What a confirmation is about: the fields submit would write, and the summary."""
        return tuple(sorted((k, repr(v)) for k, v in self._fields().items())), self._summary()

    def _withdraw_confirmation(self) -> None:
        """Other values than the ones the "would fail" answer was about: ctrl+s checks again."""
        if self.confirmed is not None and self._values() != self.confirmed:
            self.confirmed = None
            run = self.query_one("#run", Button)
            run.label, run.variant = self.RUN_LABEL + " (ctrl+s)", "primary"

    # --------------------------------------------------------------------- submit

    def engine_call(self) -> actions.EngineCall:
        fields = self._fields()
        if not fields["hypothesis"]:
            raise actions.ActionRefused("write the hypothesis this round tested")
        summary = self._summary()
        if summary is not None and not summary.strip():
            raise actions.ActionRefused("write the round summary: submit-round needs summary.md")
        values = self._values()
        confirmed = values == self.confirmed
        self._asked = values
        prefill = self.prefill
        round_dir = prefill.round_dir
        current = self._current_round()

        def call() -> tuple[dict[str, Any], int]:
            from helix_engine.state import workflow
            from helix_engine.state.lifecycle import submit_round, write_round_state
            from helix_engine.state.submit_check import check_submit

            check, code = check_submit(round_dir, current_round=current, state_data=fields,
                                       summary_pending=summary is not None)
            if not (check["would_record"] == "passed" or (check["would_record"] == "failed" and confirmed)):
                return check, code  # nothing written: the form shows why, and asks to confirm a fail
            if summary is not None and actions.summary_file(prefill) is None:
                actions.write_summary(prefill, summary)
            write_round_state(round_dir, **fields)
            payload, code = submit_round(round_dir, current_round=current)
            try:  # what the state now records for the round (a fail payload may have closed it)
                entry = workflow.load_workflow(workflow.state_path(round_dir.parent)).rounds.get(str(prefill.number))
                payload["recorded"] = entry.status if entry is not None and entry.status != "active" else None
            except (FileNotFoundError, ValueError):
                payload["recorded"] = None
            return payload, code

        return call

    def on_engine_answer(self, message: EngineAnswer) -> None:
        message.prevent_default()  # this replaces EngineForm's handler (Textual would call both)
        payload = message.payload
        run = self.query_one("#run", Button)
        if message.error is None and payload.get("recorded"):  # submitted: passed, or a confirmed fail
            self.app.notify(self.done_text(payload), title=self.TITLE_TEXT, timeout=10,
                            severity="information" if payload["recorded"] == "passed" else "warning")
            self.dismiss()
            return
        if message.error is None and payload.get("check") and payload.get("would_record") == "failed":
            self.confirmed = self._asked
            run.label = "Submit anyway (ctrl+s)"
            run.variant = "error"
            payload = {**payload, "guideline": "Not submitted. Press ctrl+s again to submit it anyway (the round is "
                       "recorded as failed and closed), or change the values. " + str(payload.get("guideline", ""))}
        else:
            self.confirmed = None
            run.label = self.RUN_LABEL + " (ctrl+s)"
            run.variant = "primary"
        self.show_answer(payload, message.code, message.error)
        self.refresh_check()

    def done_text(self, payload: dict[str, Any]) -> str:
        name = round_key(self.prefill.number)
        if payload.get("recorded") == "passed":
            text = f"{name} submitted: passed"
        else:
            text = f"{name} recorded as failed (rejected): " + "; ".join(str(i) for i in payload.get("issues") or [])
        recorded = actions.ledger_line(payload)
        if recorded is not None:
            text += f"\n{recorded}"
        if payload.get("guideline"):
            text += f"\n{payload['guideline']}"
        return text

