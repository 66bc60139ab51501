"""Held-out inputs for submit-round: the test's cases with new values and shapes near its own.

Why: a round that is right only on the inputs it was shown (a table of the test's outputs, a
kernel that only handles the test's widths) passes the visible test. Here every case gets new
seeds and, in the dimensions the test's own cases vary, nearby sizes: an odd size, one either side
of a power of two, a larger batch. Sizes that never vary across the test's cases stay (they may be
the operator's contract), and sizes of 1 stay (broadcast dimensions). A dimension's size is a
symbol shared by every tensor of the case that has it, so a matmul's K changes in both operands,
and an integer argument equal to a changed size changes with it.

Values follow each input's own: floats drawn with its mean and spread (non-negative stays
non-negative), integers within its range, booleans with its density. The reference runs on the
same inputs; a held-out input the reference refuses is skipped, not held against the candidate.
"""

from __future__ import annotations

import random
from typing import Any

from helix_engine.gate.harness import DiffCase, TracedTest
from helix_engine.gate.recorder import CallProgram

#: a held-out tensor holds at most this many elements (or its original's count, if larger)
MAX_ELEMENTS = 1 << 20
VARIANTS = 2


def varying_sizes(cases: list[DiffCase]) -> set[int]:
    """Sizes that sit in a (tensor, dimension) position whose size differs between the cases."""
    positions: dict[tuple[int, int, int], set[int]] = {}
    for case in cases:
        for t_index, t in enumerate(_tensors(case.program)):
            for d, size in enumerate(t.shape):
                positions.setdefault((t_index, t.dim(), d), set()).add(int(size))
    out: set[int] = set()
    for sizes in positions.values():
        if len(sizes) > 1:
            out |= sizes
    out.discard(1)
    out.discard(0)
    return out


def _tensors(program: CallProgram) -> list[Any]:
    import torch

    return [t for t in program.tensors if isinstance(t, torch.Tensor)]


def nearby(size: int, variant: int, rng: random.Random) -> int:
    """An odd size near ``size`` (variant 0) or one beside a power of two / a larger one (variant 1)."""
    if variant == 0:
        choices = [size + 1, size - 1] if size > 2 else [size + 1]
        odd = [c for c in choices if c % 2 == 1] or choices
        return rng.choice(odd)
    power = 1 << max(1, (size - 1).bit_length())
    return rng.choice([power + 1, max(2, power - 1), size * 2 if size < 64 else size + 3])


def derive_program(program: CallProgram, mapping: dict[int, int], rng_seed: int) -> CallProgram | None:
    """``program`` with every tensor redrawn at the mapped sizes (None: nothing would change)."""
    import torch

    gen = torch.Generator().manual_seed(rng_seed)
    tensors: list[Any] = []
    changed = False
    for t in program.tensors:
        if not isinstance(t, torch.Tensor):
            tensors.append(t)
            continue
        shape = [mapping.get(int(s), int(s)) for s in t.shape]
        changed |= shape != list(t.shape)
        numel = 1
        for s in shape:
            numel *= s
        if numel > max(MAX_ELEMENTS, t.numel()):
            return None
        tensors.append(_like(t, shape, gen))
    steps = [_map_ints(s, mapping) for s in program.steps]
    new = CallProgram(steps, program.output, tensors)
    return new if changed or tensors else None


def _like(t: Any, shape: list[int], gen: Any) -> Any:
    import torch

    src = t.detach().cpu()
    if src.dtype == torch.bool:
        density = float(src.float().mean()) if src.numel() else 0.5
        out = torch.rand(shape, generator=gen) < density
    elif src.is_floating_point() or src.is_complex():
        ref = src.float() if not src.is_complex() else src.real.float()
        finite = ref[torch.isfinite(ref)] if ref.numel() else ref
        mean = float(finite.mean()) if finite.numel() else 0.0
        std = float(finite.std()) if finite.numel() > 1 else 1.0
        out = torch.randn(shape, generator=gen) * (std if std > 0 else 1.0) + mean
        if finite.numel() and float(finite.min()) >= 0:
            out = out.abs()
        out = out.to(src.dtype)
    else:
        lo = int(src.min()) if src.numel() else 0
        hi = int(src.max()) if src.numel() else 1
        out = torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64).to(src.dtype)
    return out.to(t.device)


def _map_ints(value: Any, mapping: dict[int, int]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_map_ints(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in ("op", "out", "fn", "src", "$node", "$t", "name", "timed") else _map_ints(v, mapping))
                for k, v in value.items()}
    return value


def held_out_cases(test: TracedTest, cases: list[DiffCase], seed: int) -> tuple[list[DiffCase], list[dict[str, Any]]]:
    """For each case: its new-seed twin (same shapes) and VARIANTS nearby-shape variants."""
    rng = random.Random(seed)
    sizes = varying_sizes(cases)
    out: list[DiffCase] = []
    log: list[dict[str, Any]] = []
    for case in cases:
        twin = derive_program(case.program, {}, rng.randrange(1 << 30))
        if twin is not None:
            out.append(DiffCase(f"{case.id}/new-values", twin))
            log.append({"case": f"{case.id}/new-values", "shapes": _shapes(twin)})
        mine = sorted({int(s) for t in _tensors(case.program) for s in t.shape} & sizes)
        for variant in range(VARIANTS if mine else 0):
            mapping = {s: nearby(s, variant, rng) for s in mine}
            program = derive_program(case.program, mapping, rng.randrange(1 << 30))
            if program is None:
                continue
            label = f"{case.id}/held-out-{variant + 1}"
            out.append(DiffCase(label, program))
            log.append({"case": label, "shapes": _shapes(program)})
    return out, log


def _shapes(program: CallProgram) -> list[list[int]]:
    return [list(t.shape) for t in _tensors(program)]
