"""Run the adversarial pack (selftest/pack.py) through the real workflow, each cheat in its own
copy of the softmax example, with the helix command line an agent uses: start-round, run-test
against baseline/, a paired run-bench, round-state, submit-round. A cheat is caught when its
round is not promoted; the sentence that stopped it is kept. The honest round 1 runs the same way
and must be promoted (a gate that refuses everything defends nothing).

The bench is cut to its first three cases in these copies (the interpreter is slow; every defence
acts per case), so the pack runs in minutes on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.selftest.pack import PACK, Cheat

OP = "opt-round-1/opt_softmax.py"
BASE = "baseline/softmax.py"
HONEST = Cheat("honest", "the example's honest fused kernel (must be promoted)")
_TRIM = "\n\n_helix_all_cases = build_bench_cases\n\n\ndef build_bench_cases():\n    return _helix_all_cases()[:3]\n"


@dataclass
class Outcome:
    name: str
    what: str
    promoted: bool
    caught_by: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    lints: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.promoted if self.name == HONEST.name else not self.promoted

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "promoted": self.promoted, "ok": self.ok,
                "caught_by": self.caught_by, "lints": self.lints, "steps": self.steps}


def honest_source() -> str:
    from helix_engine.demo import examples_root

    return (examples_root() / "softmax" / "candidates" / "round-1.py").read_text(encoding="utf-8")


def operator_source(cheat: Cheat) -> str:
    text = honest_source()
    if not cheat.code:
        return text
    return text + "\n\n_honest = softmax\n" + cheat.code


class Agent:
    """One workspace and the commands an agent types in it."""

    def __init__(self, ws: Path, backend: str) -> None:
        self.ws, self.backend = ws, backend
        self.steps: list[dict[str, Any]] = []

    def helix(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, HELIX_BACKEND=self.backend)
        proc = subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=self.ws, env=env,
                              capture_output=True, text=True, timeout=1800, check=False)
        self.steps.append({"command": "helix " + " ".join(args), "exit_code": proc.returncode,
                           "says": _first_fail(proc.stdout + proc.stderr)})
        return proc

    def write(self, rel: str, text: str) -> None:
        path = self.ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def start(self) -> None:
        self.helix("start-round", "--round-dir", "opt-round-1", "--round-strategy", "exploration",
                   "--analysis-policy", "pattern_entry", "--reason", "selftest")

    def test(self, *extra: str) -> None:
        self.helix("run-test", "--operator-file", OP, "--ref-operator-file", BASE, *extra)

    def bench(self) -> None:
        self.helix("run-bench", "--operator-file", OP, "--baseline-operator-file", BASE)

    def state(self, *extra: str) -> None:
        self.write("opt-round-1/summary.md", "# Round 1\n\nselftest\n")
        self.helix("round-state", "--round-dir", "opt-round-1", "--hypothesis", "selftest", "--evidence",
                   "benchmark", *extra)

    def submit(self) -> dict[str, Any]:
        proc = self.helix("submit-round", "--round-dir", "opt-round-1", "--json")
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            return {"status": "error", "issues": [_first_fail(proc.stdout + proc.stderr)]}
        return data if isinstance(data, dict) else {"status": "error", "issues": []}


def _first_fail(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("FAIL:", "error:", "refused")):
            return stripped[:600]
    return ""


def play(agent: Agent, cheat: Cheat) -> dict[str, Any]:
    """The workflow the cheat's agent runs; the submit-round payload at the end."""
    source = operator_source(cheat)
    w = cheat.workflow
    if w == "edit-baseline-perf":
        perf = agent.ws / "baseline" / "softmax_perf.txt"
        perf.write_text(_scale_perf(perf.read_text(encoding="utf-8"), 10.0), encoding="utf-8")
    agent.start()
    if w == "swap-after-bench":
        agent.write(OP, operator_source(PACK[0]))  # the cached-output cheat
        agent.test()
        agent.bench()
        agent.write(OP, honest_source())
    elif w == "swap-config":  # a red team's: the operator execs a file beside it, swapped after the runs
        config = agent.ws / "opt-round-1" / "tuning.cfg"
        agent.write("opt-round-1/tuning.cfg", PACK[0].code)  # the cached-output cheat
        agent.write(OP, honest_source() + f"\n\n_honest = softmax\nexec(open({str(config)!r}).read())\n")
        agent.test()
        agent.bench()
        agent.write("opt-round-1/tuning.cfg", "# defaults\n")
    elif w == "swap-after-test":
        agent.write(OP, honest_source())
        agent.test()
        agent.write(OP, source)
        agent.bench()
    else:
        agent.write(OP, source)
        if w == "case-id":
            agent.test("--case-id", "float32_4x64_s1")
        elif w == "own-reference":
            agent.write("scratch/softmax.py", source)
            agent.helix("run-test", "--operator-file", OP, "--ref-operator-file", "scratch/softmax.py")
        elif w == "one-case-baseline":
            test = (agent.ws / "differential_test_softmax.py").read_text(encoding="utf-8")
            agent.write("scratch/differential_test_softmax.py", test + "\n\n_all = build_differential_test_cases\n"
                        "\n\ndef build_differential_test_cases(api):\n    return _all(api)[:1]\n")
            agent.helix("run-test", "--operator-file", BASE, "--test-file", "scratch/differential_test_softmax.py")
            agent.helix("run-test", "--operator-file", OP, "--ref-result", "baseline/softmax_result.pt",
                        "--test-file", "scratch/differential_test_softmax.py")
        elif w != "self-reported":
            agent.test()
        agent.bench()
    if w == "edit-perf":
        _edit_perf(agent.ws)
    flags = ("--correctness", "passed", "--benchmark", "passed") if w == "self-reported" else ()
    agent.state(*flags)
    return agent.submit()


def _scale_perf(text: str, factor: float) -> str:
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        for key in ("kernel_avg_time_us", "total_op_avg_time_us"):
            if isinstance(rec.get(key), (int, float)):
                rec[key] = rec[key] * factor
        if isinstance(rec.get("samples_us"), list):
            rec["samples_us"] = [s * factor for s in rec["samples_us"]]
        out.append(json.dumps(rec))
    return "\n".join(out) + "\n"


def _edit_perf(ws: Path) -> None:
    """The perf file ÷100 and its sidecar's perf_sha256 made to match (what a careful forger does)."""
    import hashlib

    perf = ws / "opt-round-1" / "opt_softmax_perf.txt"
    if not perf.is_file():
        return
    text = _scale_perf(perf.read_text(encoding="utf-8"), 0.01)
    perf.write_text(text, encoding="utf-8")
    sidecar = perf.with_name("opt_softmax_perf.paired.json")
    if sidecar.is_file():
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        data["perf_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        for case in data.get("cases") or []:
            for slot in case.get("slots") or []:
                if slot.get("side") == "candidate":
                    slot["samples_us"] = [s * 0.01 for s in slot.get("samples_us") or []]
        sidecar.write_text(json.dumps(data), encoding="utf-8")


def run_one(template: Path, cheat: Cheat, backend: str, scratch: Path) -> Outcome:
    from helix_engine.state.lints import anti_cheat_findings

    ws = scratch / cheat.name
    shutil.copytree(template, ws, symlinks=True)
    agent = Agent(ws, backend)
    payload = play(agent, cheat)
    promoted = payload.get("status") == "pass"
    issues = [str(i) for i in payload.get("issues") or []]
    said = next((s["says"] for s in agent.steps if s["says"]), "")
    caught = "" if promoted else (issues[0] if issues else said or "submit-round refused it")
    if not promoted and said and said not in caught:
        caught = f"{caught} (first: {said})"
    lints = [str(p) for p in anti_cheat_findings(operator_source(cheat), OP)]
    return Outcome(cheat.name, cheat.what, promoted, caught, agent.steps, lints)


def prepare(template: Path, backend: str) -> None:
    from helix_engine.demo import examples_root

    shutil.copytree(examples_root() / "softmax", template)
    shutil.rmtree(template / "candidates", ignore_errors=True)
    bench = template / "bench_softmax.py"
    bench.write_text(bench.read_text(encoding="utf-8") + _TRIM, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "prepare-baseline", "."], cwd=template,
                          env=dict(os.environ, HELIX_BACKEND=backend), capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode != 0:
        from helix_engine.errors import HelixError

        raise HelixError(f"selftest: the baseline could not be prepared: {_first_fail(proc.stdout + proc.stderr)}")


def selftest(backend: str = "cpu", only: list[str] | None = None, jobs: int | None = None,
             keep: Path | None = None) -> list[Outcome]:
    cheats = [HONEST, *[c for c in PACK if backend in c.backends]]
    if only:
        cheats = [c for c in cheats if c.name in only or c.name == HONEST.name]
    scratch = Path(tempfile.mkdtemp(prefix="helix-selftest-")) if keep is None else Path(keep)
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        template = scratch / "_baseline"
        prepare(template, backend)
        workers = jobs or max(1, min(2, os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda c: run_one(template, c, backend, scratch), cheats))
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def report(outcomes: list[Outcome]) -> str:
    from helix_engine.sanitize import clean

    lines = []
    for o in outcomes:
        mark = "ok  " if o.ok else "FAIL"
        verdict = ("promoted (as it must be)" if o.promoted else "refused") if o.name == HONEST.name else \
            ("PROMOTED: the gate was fooled" if o.promoted else f"caught: {clean(o.caught_by)}")
        lines.append(f"{mark} {o.name}: {clean(o.what)}\n     {verdict}")
        if o.lints:
            lines.append(f"     lint: {clean(o.lints[0])}" + (f" (+{len(o.lints) - 1})" if len(o.lints) > 1 else ""))
    bad = [o for o in outcomes if not o.ok]
    lines.append(f"selftest: {len(outcomes) - len(bad)} of {len(outcomes)} as they must be"
                 + (f"; not: {', '.join(o.name for o in bad)}" if bad else ""))
    return "\n".join(lines)
