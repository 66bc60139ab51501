"""The supervisor's stand-in for the operator: it records what a harness does with the operator
API, so the calls can be replayed in the operator's own process on inputs the supervisor made.

A harness's ``build_operator_api(module)`` is given a ``Node`` standing for the module; attribute
reads and calls on nodes are recorded as steps. Calls made while a case's closure (or a test
case's ``fn``) runs are the *timed* calls: the operator process replays exactly those, once per
repetition, on the tensors the closure passed. Tensors are collected by identity (one tensor
passed twice is one input; views keep their storage when sent, through ``torch.save``).

What cannot be recorded (a harness that computes with the operator's result, or calls the
operator outside its closure) raises ``TraceError`` with a sentence the job shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class TraceError(Exception):
    """The harness used the operator API in a way that cannot be replayed in another process."""


@dataclass
class CallProgram:
    """One closure's timed calls: the steps to replay, the output tree and the input tensors."""

    steps: list[dict[str, Any]]
    output: Any
    tensors: list[Any] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        return {"steps": self.steps, "output": self.output, "n_tensors": len(self.tensors)}


class Tracer:
    def __init__(self) -> None:
        self._next = 1
        self.steps: list[dict[str, Any]] = []  # every step so far, in order
        self._timed: list[dict[str, Any]] | None = None
        self._tensors: list[Any] = []
        self._tensor_ids: dict[int, int] = {}
        self.allow_setup_calls = True
        self.root = Node(self, 0)

    # --------------------------------------------------------------------- recording
    def new_id(self) -> int:
        self._next += 1
        return self._next - 1

    def attr(self, src: Node, name: str) -> Node:
        out = Node(self, self.new_id())
        self._add({"op": "attr", "out": out._id, "src": src._id, "name": name})
        return out

    def call(self, fn: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node:
        if self._timed is None and not self.allow_setup_calls:
            raise TraceError("the harness calls the operator outside the case's closure; call it only inside "
                             "the closure build_bench_case_fn returns (or a test case's fn)")
        out = Node(self, self.new_id())
        timed = self._timed is not None
        step = {"op": "call", "out": out._id, "fn": fn._id, "args": self.encode(list(args)) if timed else
                self._plain(list(args)), "kwargs": self.encode(dict(kwargs)) if timed else self._plain(dict(kwargs)),
                "timed": timed}
        self._add(step)
        return out

    def _add(self, step: dict[str, Any]) -> None:
        (self._timed if self._timed is not None else self.steps).append(step)

    def _plain(self, value: Any) -> Any:
        """Setup arguments (build_operator_api's): values only, no tensors."""
        encoded = self.encode(value, tensors_allowed=False)
        return encoded

    def record(self, closure: Callable[[], Any]) -> CallProgram:
        """Run ``closure`` and return its timed calls. The setup steps it needs (attribute reads
        made while building it) are the ones in ``self.steps`` so far."""
        self._timed, self._tensors, self._tensor_ids = [], [], {}
        try:
            result = closure()
            output = self.encode(result)
            if not any(s["op"] == "call" for s in self._timed):
                raise TraceError("the closure never called the operator API")
            return CallProgram(self._timed, output, self._tensors)
        finally:
            self._timed = None

    # ---------------------------------------------------------------------- encoding
    def encode(self, value: Any, tensors_allowed: bool = True) -> Any:
        import torch

        if isinstance(value, Node):
            if value._tracer is not self:
                raise TraceError("a value from another harness load was passed to the operator")
            return {"$node": value._id}
        if isinstance(value, torch.Tensor):
            if not tensors_allowed:
                raise TraceError("build_operator_api passes a tensor to the operator; make tensors in the case's "
                                 "closure or build_bench_case_fn")
            if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
                raise TraceError(f"the harness passes a {type(value).__name__} (a tensor subclass) to the operator")
            index = self._tensor_ids.get(id(value))
            if index is None:
                index = self._tensor_ids[id(value)] = len(self._tensors)
                self._tensors.append(value.detach())
            return {"$t": index}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"$device": value.type}
        if isinstance(value, torch.Size):
            return {"$tuple": list(value)}
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, tensors_allowed) for v in value]}
        if isinstance(value, list):
            return {"$list": [self.encode(v, tensors_allowed) for v in value]}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TraceError("the harness passes a dict with non-string keys to the operator")
            return {"$dict": {k: self.encode(v, tensors_allowed) for k, v in value.items()}}
        raise TraceError(f"the harness passes a {type(value).__name__} to the operator (or returns one from the "
                         "closure); only tensors, numbers, strings, dtypes and lists/tuples/dicts of them can be "
                         "sent to the operator's process")


class Node:
    """A value that lives in the operator's process (the module, an attribute, a call's result)."""

    __slots__ = ("_id", "_tracer")

    def __init__(self, tracer: Tracer, node_id: int) -> None:
        object.__setattr__(self, "_tracer", tracer)
        object.__setattr__(self, "_id", node_id)

    def __getattr__(self, name: str) -> Node:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._tracer.attr(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Node:
        return self._tracer.call(self, args, kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TraceError(f"the harness sets {name!r} on the operator API; it can only read and call it")

    def __bool__(self) -> bool:
        raise TraceError("the harness tests the truth of an operator result; it can only pass results on")

    def __iter__(self) -> Any:
        raise TraceError("the harness iterates over an operator result; return it from the closure instead")

    def __repr__(self) -> str:
        return f"<operator value #{self._id}>"


# -------------------------------------------------------------------- the replay side


def decode(value: Any, env: dict[int, Any], tensors: list[Any], device: str) -> Any:
    """The inverse of ``Tracer.encode`` in the operator process (``device``: its device string)."""
    if isinstance(value, dict):
        if "$node" in value:
            return env[int(value["$node"])]
        if "$t" in value:
            return tensors[int(value["$t"])]
        if "$dtype" in value:
            import torch

            dtype = getattr(torch, str(value["$dtype"]), None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"unknown dtype {value['$dtype']!r}")
            return dtype
        if "$device" in value:
            import torch

            return torch.device(device if value["$device"] != "cpu" or device == "cpu" else "cpu")
        if "$tuple" in value:
            return tuple(decode(v, env, tensors, device) for v in value["$tuple"])
        if "$list" in value:
            return [decode(v, env, tensors, device) for v in value["$list"]]
        if "$dict" in value:
            return {k: decode(v, env, tensors, device) for k, v in value["$dict"].items()}
        raise ValueError("unknown encoded value")
    return value


def run_steps(steps: list[dict[str, Any]], env: dict[int, Any], tensors: list[Any], device: str) -> None:
    for step in steps:
        if step["op"] == "attr":
            env[int(step["out"])] = getattr(env[int(step["src"])], str(step["name"]))
        else:
            fn = env[int(step["fn"])]
            args = decode(step["args"], env, tensors, device)
            kwargs = decode(step["kwargs"], env, tensors, device)
            env[int(step["out"])] = fn(*args, **kwargs)


def compile_program(program: dict[str, Any], env: dict[int, Any], tensors: list[Any],
                    device: str) -> Callable[[], Any]:
    """A zero-argument function that makes ``program``'s timed calls on ``tensors``: attribute
    reads and arguments that do not depend on a call of the program are resolved once here, so a
    repetition is the operator's own calls and little else (a 20 µs kernel is not timed with the
    replay's Python around it). A program whose calls feed each other replays step by step."""
    steps = program["steps"]
    produced: set[int] = set()
    calls: list[tuple[int, Any, Any, Any]] = []
    for step in steps:
        if step["op"] == "attr" and int(step["src"]) not in produced:
            env[int(step["out"])] = getattr(env[int(step["src"])], str(step["name"]))
            continue
        if step["op"] != "call" or int(step["fn"]) in produced or _refers(step["args"], produced) \
                or _refers(step["kwargs"], produced):
            def replay() -> Any:
                run_steps(steps, env, tensors, device)
                return decode(program["output"], env, tensors, device)

            return replay
        out = int(step["out"])
        calls.append((out, env[int(step["fn"])], decode(step["args"], env, tensors, device),
                      decode(step["kwargs"], env, tensors, device)))
        produced.add(out)
    output = program["output"]
    if len(calls) == 1 and isinstance(output, dict) and output.get("$node") == calls[0][0]:
        _, fn, args, kwargs = calls[0]
        return lambda: fn(*args, **kwargs)

    def run() -> Any:
        for out, fn, args, kwargs in calls:
            env[out] = fn(*args, **kwargs)
        return decode(output, env, tensors, device)

    return run


def _refers(value: Any, nodes: set[int]) -> bool:
    if isinstance(value, dict):
        if "$node" in value:
            return int(value["$node"]) in nodes
        return any(_refers(v, nodes) for v in value.values())
    if isinstance(value, list):
        return any(_refers(v, nodes) for v in value)
    return False
