"""The supervisor's recorder (gate/recorder.py) and the pipe format (gate/wire.py): what a harness
does with the operator API is recorded and replays to the same result; what cannot be replayed
is refused with a sentence; the supervisor never unpickles a class the operator sent."""

from __future__ import annotations

import io
import os
import pickle
import types

import pytest
import torch

from helix_engine.gate import wire
from helix_engine.gate.recorder import TraceError, Tracer, decode, run_steps


def _replay(tracer: Tracer, program, module) -> object:
    env = {0: module}
    run_steps(tracer.steps, env, [], "cpu")
    run_steps(program.steps, env, program.tensors, "cpu")
    return decode(program.output, env, program.tensors, "cpu")


def test_a_bench_closure_replays_to_the_same_output() -> None:
    module = types.SimpleNamespace(scale=lambda x, k, dtype=None: (x * k).to(dtype or x.dtype))
    tracer = Tracer()
    api = tracer.root.scale  # build_operator_api(m) -> m.scale
    tracer.allow_setup_calls = False
    x = torch.randn(3, 4)
    program = tracer.record(lambda: api(x, 2.0, dtype=torch.float64))
    assert len(program.tensors) == 1 and program.tensors[0] is not x or torch.equal(program.tensors[0], x)
    out = _replay(tracer, program, module)
    assert torch.equal(out, (x * 2.0).double())


def test_one_tensor_passed_twice_is_one_input() -> None:
    tracer = Tracer()
    api = tracer.root.add
    x = torch.ones(2)
    program = tracer.record(lambda: api(x, x))
    assert len(program.tensors) == 1


@pytest.mark.parametrize("closure, words", [
    (lambda api, x: api(x) + 1, "unsupported operand"),
    (lambda api, x: bool(api(x)), "tests the truth"),
    (lambda api, x: None, "never called the operator"),
    (lambda api, x: api(x, object()), "passes a object"),
])
def test_what_cannot_be_replayed_is_a_sentence(closure, words) -> None:
    tracer = Tracer()
    api = tracer.root.op
    x = torch.ones(2)
    with pytest.raises((TraceError, TypeError), match=words):
        tracer.record(lambda: closure(api, x))


def test_calls_outside_the_closure_are_refused() -> None:
    tracer = Tracer()
    api = tracer.root.op
    tracer.allow_setup_calls = False
    with pytest.raises(TraceError, match="outside the case's closure"):
        api(torch.ones(1))


class Sub(torch.Tensor):
    pass


def test_the_wire_refuses_classes_and_oversized_frames() -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    buf = io.BytesIO()
    torch.save({"x": Evil()}, buf)
    with pytest.raises(wire.WireError, match="plain tensors"):
        wire.decode_blob(buf.getvalue())
    with pytest.raises(wire.WireError):
        wire.decode_blob(pickle.dumps(Evil()))
    buf = io.BytesIO()
    torch.save(torch.ones(2).as_subclass(Sub), buf)
    with pytest.raises(wire.WireError):  # a tensor subclass (a lazy result) is not a plain tensor
        wire.decode_blob(buf.getvalue())
    r, w = os.pipe()
    os.write(w, wire._FRAME.pack(wire.MAX_HEADER + 1, 0))
    with pytest.raises(wire.WireError, match="over the limit"):
        wire.recv(r)
    os.close(r)
    os.close(w)


def test_a_message_round_trips() -> None:
    r, w = os.pipe()
    blob = wire.encode_blob([torch.arange(4)])
    wire.send(w, {"cmd": "x", "n": 1}, blob)
    head, got = wire.recv(r)
    assert head == {"cmd": "x", "n": 1} and torch.equal(wire.decode_blob(got)[0], torch.arange(4))
    os.close(r)
    os.close(w)
