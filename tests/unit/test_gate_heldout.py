"""Held-out inputs (gate/heldout.py): only the sizes the test's cases vary change, a size shared
by two inputs changes in both, integer arguments equal to a changed size follow, values keep
their input's kind."""

from __future__ import annotations

import random

import torch

from helix_engine.gate.harness import DiffCase
from helix_engine.gate.heldout import derive_program, nearby, varying_sizes
from helix_engine.gate.recorder import Tracer


def _case(cid: str, *tensors: torch.Tensor, extra: int | None = None) -> DiffCase:
    tracer = Tracer()
    api = tracer.root.mm
    args = (*tensors, extra) if extra is not None else tensors
    return DiffCase(cid, tracer.record(lambda: api(*args)))


def test_only_varying_sizes_change_and_shared_sizes_change_together() -> None:
    cases = [_case("a", torch.randn(8, 64), torch.randn(64, 16)),
             _case("b", torch.randn(12, 64), torch.randn(64, 24))]
    sizes = varying_sizes(cases)
    assert sizes == {8, 12, 16, 24}  # K=64 never varies: it may be the kernel's contract
    program = derive_program(cases[0].program, {8: 9, 16: 17}, 0)
    assert program is not None
    assert [list(t.shape) for t in program.tensors] == [[9, 64], [64, 17]]


def test_integer_arguments_equal_to_a_changed_size_follow_it() -> None:
    case = _case("a", torch.randn(8, 64), extra=8)
    program = derive_program(case.program, {8: 9}, 0)
    assert program is not None
    call = next(s for s in program.steps if s["op"] == "call")
    assert call["args"]["$list"][-1] == 9 and call["args"]["$list"][0] == {"$t": 0}


def test_values_keep_their_kind() -> None:
    ints = torch.randint(3, 7, (5,))
    probs = torch.rand(4, 6)
    flags = torch.rand(10) < 0.3
    case = _case("a", ints, probs, flags)
    program = derive_program(case.program, {5: 6}, 1)
    assert program is not None
    new_ints, new_probs, new_flags = program.tensors
    assert new_ints.dtype == ints.dtype and int(new_ints.min()) >= 3 and int(new_ints.max()) <= 6
    assert float(new_probs.min()) >= 0.0 and new_probs.shape == probs.shape
    assert new_flags.dtype == torch.bool
    assert not torch.equal(new_probs, probs)  # new values, same shape


def test_nearby_sizes_are_odd_or_beside_a_power_of_two() -> None:
    rng = random.Random(0)
    assert all(nearby(64, 0, rng) in (63, 65) for _ in range(20))
    assert all(nearby(64, 1, rng) in (65, 63, 67) for _ in range(20))
