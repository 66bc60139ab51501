"""The harness files, loaded in the supervisor against a recorder instead of the operator.

The bench and test harnesses are helix's files of record (hash-checked against the accepted
baseline); they make the inputs. Loaded here with ``Tracer.root`` for the operator module, they
give, per case and per seed, a ``CallProgram``: the calls to replay and the tensors to send.
Every timed slot asks for a new program with a new seed: new values in new buffers.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.eval.loader import (
    BenchCase,
    HarnessContractError,
    _attach_work,
    check_api_kind,
    import_file,
    read_metadata,
    require_hook,
    resolve_kernels,
    validate_bench_cases,
)
from helix_engine.gate.recorder import CallProgram, TraceError, Tracer


def fresh_seed() -> int:
    """A seed the operator cannot predict (not derived from the case's own seed)."""
    return secrets.randbits(31)


class TracedHarness:
    def __init__(self, harness_file: Path) -> None:
        self.file = Path(harness_file)
        self.tracer = Tracer()
        self.module = import_file(self.file, f"{self.file.stem}__helix_gate")
        self._sent: dict[str, int] = {}

    def build_api(self) -> Any:
        build = require_hook(self.module, self.file, "build_operator_api",
                             "build_operator_api(operator_module) returning the callable")
        try:
            api = build(self.tracer.root)
        except TraceError as exc:
            raise HarnessContractError(self.file, "build_operator_api", str(exc)) from None
        self.tracer.allow_setup_calls = False
        return api

    def new_steps(self, side: str) -> list[dict[str, Any]]:
        """Setup steps not yet sent to ``side``'s process."""
        start = self._sent.get(side, 0)
        self._sent[side] = len(self.tracer.steps)
        return self.tracer.steps[start:]

    def record(self, closure: Any, hook: str, case_id: str) -> CallProgram:
        try:
            return self.tracer.record(closure)
        except TraceError as exc:
            raise HarnessContractError(self.file, hook, f"case {case_id!r}: {exc}") from None


class TracedBench(TracedHarness):
    def __init__(self, bench_file: Path, operator_file: Path) -> None:
        self.metadata = meta = read_metadata(bench_file)
        check_api_kind(meta, bench_file)
        self.kernel_names, self.kernel_source = resolve_kernels(operator_file, meta)
        super().__init__(bench_file)
        require_hook(self.module, self.file, "build_bench_cases", "build_bench_cases() returning a list of case dicts")
        self.build_fn = require_hook(self.module, self.file, "build_bench_case_fn",
                                     "build_bench_case_fn(api, case) returning a zero-argument closure")
        self.api = self.build_api()
        self.cases: list[BenchCase] = validate_bench_cases(self.module.build_bench_cases(), self.file)
        _attach_work(self.module, self.file, self.cases)

    def program(self, case: BenchCase, seed: int) -> CallProgram:
        """The case's closure built with ``seed`` (torch's global seed and the case's ``seed`` key)."""
        import torch

        raw = dict(case.raw)
        if isinstance(raw.get("seed"), int) and not isinstance(raw.get("seed"), bool):
            raw["seed"] = seed
        torch.manual_seed(seed)
        try:
            fn = self.build_fn(self.api, raw)
        except TraceError as exc:
            raise HarnessContractError(self.file, "build_bench_case_fn", f"case {case.id!r}: {exc}") from None
        if not callable(fn):
            raise HarnessContractError(self.file, "build_bench_case_fn",
                                       f"case {case.id!r}: returned {type(fn).__name__}, expected a zero-argument closure")
        return self.record(fn, "build_bench_case_fn", case.id)


@dataclass
class DiffCase:
    id: str
    program: CallProgram


class TracedTest(TracedHarness):
    def __init__(self, test_file: Path) -> None:
        meta = read_metadata(test_file)
        check_api_kind(meta, test_file)
        kind = meta.get("compute-kind", "compute") or "compute"
        if kind not in ("compute", "non-compute"):
            raise HarnessContractError(test_file, "compute-kind", f"unknown value {kind!r}; use compute or non-compute")
        self.compute = kind == "compute"
        super().__init__(test_file)
        self.build_cases = require_hook(self.module, self.file, "build_differential_test_cases",
                                        "build_differential_test_cases(api) returning [{'id','inputs','fn'}]")
        self.api = self.build_api()

    def cases(self, seed: int | None = None) -> list[DiffCase]:
        """The test file's cases as it makes them (``seed``: torch's global seed first, for held-out
        runs; the test's own seeding still wins where it seeds)."""
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        hook = "build_differential_test_cases"
        try:
            raw = self.build_cases(self.api)
        except TraceError as exc:
            raise HarnessContractError(self.file, hook, str(exc)) from None
        if raw is None or isinstance(raw, (str, bytes, dict)) or not hasattr(raw, "__iter__"):
            raise HarnessContractError(self.file, hook, f"returned {type(raw).__name__}; return a list of case dicts")
        out: list[DiffCase] = []
        seen: set[str] = set()
        for index, case in enumerate(raw):
            if not isinstance(case, dict):
                raise HarnessContractError(self.file, hook, f"case #{index} is {type(case).__name__}, expected a dict")
            cid = case.get("id")
            if not isinstance(cid, str) or not cid.strip() or cid in seen:
                raise HarnessContractError(self.file, hook, f"case #{index} has an empty, missing or repeated id")
            seen.add(cid)
            fn = case.get("fn")
            if not callable(fn):
                raise HarnessContractError(self.file, hook, f"case {cid!r}: fn must be a zero-argument callable")
            out.append(DiffCase(cid, self.record(fn, hook, cid)))
        if not out:
            raise HarnessContractError(self.file, hook, "returned no cases; return at least one case dict")
        return out
