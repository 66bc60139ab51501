"""The NPU capture's pure parts (TRITON_DEBUG output, command re-join, replay rewrite) and the
cpu capture's signature reconstruction."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.ir import capture

STDOUT = """[INFO] compiling
Dumping intermediate results to /tmp/old_dump
[DEBUG] cmd_list: bishengir-compile /tmp/old_dump/kernel.ttadapter.mlir --target=Ascend910B3
Dumping intermediate results to /tmp/triton_dump_42
[DEBUG] cmd_list: bishengir-compile /tmp/triton_dump_42/kernel.ttadapter.mlir --target=Ascend910B3 \
--append-bisheng-options=-O2 -g --enable-auto-multi-buffer=true --bishengir-print-ir-after=hivm-plan-memory \
--mlir-print-ir-tree-dir=/old --triton-to-linalg=named-ops=true global-kernel=false -o /tmp/triton_dump_42/kernel.o
All done
"""


def test_last_dump_and_command_win_and_spaced_values_rejoin() -> None:
    dump, tokens = capture.parse_debug_output(STDOUT)
    assert dump == "/tmp/triton_dump_42"
    assert tokens[:3] == ["bishengir-compile", "/tmp/triton_dump_42/kernel.ttadapter.mlir", "--target=Ascend910B3"]
    assert "--append-bisheng-options=-O2 -g" in tokens
    assert "--triton-to-linalg=named-ops=true global-kernel=false" in tokens
    assert tokens[-2:] == ["-o", "/tmp/triton_dump_42/kernel.o"]


def test_python_list_commands_are_parsed_as_lists() -> None:
    _, tokens = capture.parse_debug_output(
        "Dumping intermediate results to /d\n[DEBUG] cmd_list: ['bishengir-compile', '/d/kernel.ttadapter.mlir', "
        "'--append-bisheng-options=-O2 -g']\n")
    assert tokens == ["bishengir-compile", "/d/kernel.ttadapter.mlir", "--append-bisheng-options=-O2 -g"]


def test_missing_marker_lines_are_named() -> None:
    with pytest.raises(HelixError, match=r"'\[DEBUG\] cmd_list:'"):
        capture.parse_debug_output("Dumping intermediate results to /x\n")
    with pytest.raises(HelixError, match="'Dumping intermediate results to' and"):
        capture.parse_debug_output("nothing\n")


def test_replay_swaps_input_strips_old_print_flags_and_prints_all(tmp_path: Path) -> None:
    _, tokens = capture.parse_debug_output(STDOUT)
    archived = tmp_path / "triton_dump" / "kernel.ttadapter.mlir"
    replay = capture.build_replay(tokens, archived, tmp_path / "bishengir_stages")
    assert replay[1] == str(archived)
    assert not any(t.startswith(("--bishengir-print-ir-after", "--mlir-print-ir-tree-dir=/old")) for t in replay)
    assert replay[-2:] == ["--mlir-print-ir-after-all", f"--mlir-print-ir-tree-dir={tmp_path / 'bishengir_stages'}"]
    with pytest.raises(HelixError, match="names no kernel.ttadapter.mlir"):
        capture.build_replay(["bishengir-compile", "x.mlir"], archived, tmp_path)


def test_capture_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "ir").mkdir()
    with pytest.raises(HelixError, match="already exists"):
        capture.capture_ir(tmp_path / "ir", tmp_path / "op.py")


def test_signature_mirrors_the_cuda_jit_specialization() -> None:
    from triton.runtime.jit import JITFunction

    def kern(x_ptr, n, stride, one, scale, flag, BLOCK):  # noqa: ANN001 - a stand-in kernel signature
        pass

    kern.__annotations__["BLOCK"] = "tl.constexpr"
    jf = JITFunction(kern)
    launch = {"args": {"x_ptr": {"kind": "tensor", "dtype": "float16"}, "n": {"kind": "int", "value": 4096},
                       "stride": {"kind": "int", "value": 3}, "one": {"kind": "int", "value": 1},
                       "scale": {"kind": "float", "value": 0.5}, "flag": {"kind": "bool", "value": True},
                       "BLOCK": {"kind": "int", "value": 128}}}
    from helix_engine.ir.worker import signature_for

    sig, consts, attrs = signature_for(jf, launch)
    assert sig == {"x_ptr": "*fp16", "n": "i32", "stride": "i32", "one": "constexpr", "scale": "fp32",
                   "flag": "i1", "BLOCK": "constexpr"}
    assert consts == {"one": 1, "BLOCK": 128}
    assert attrs == {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
