"""NPU accuracy contract and dtype-close mode, on hand-computed cases."""

from __future__ import annotations

import pytest
import torch

from helix_engine.eval import accuracy
from helix_engine.eval.accuracy import compare_outputs, compare_payloads

F32 = torch.float32


def cmp(actual, golden, inputs=(), compute=True, mode="npu-contract"):
    return compare_outputs("c", actual, golden, inputs, compute, mode)


def test_threshold_table_matches_spec() -> None:
    assert accuracy.npu_thresholds(torch.float16) == {
        "small_thr": 2**-11, "small_err": 2**-16, "rel": 2**-10, "atol": 9e-2, "rtol": 2**-10}
    assert accuracy.npu_thresholds(torch.bfloat16)["rel"] == 2**-7
    assert accuracy.npu_thresholds(torch.bfloat16)["atol"] == 1e-1
    assert accuracy.npu_thresholds(torch.float64) == accuracy.npu_thresholds(torch.float32)
    assert accuracy.npu_thresholds(torch.float32)["small_err"] == 2**-30
    assert accuracy.npu_thresholds(torch.float8_e4m3fn)["rel"] == 2**-3
    assert accuracy.npu_thresholds(torch.float8_e5m2)["small_thr"] == 2**-3
    assert accuracy.npu_thresholds("hifloat32")["small_err"] == 2**-28


def test_fp32_tiny_relative_error_passes() -> None:
    g = torch.linspace(1, 2, 100, dtype=F32)
    res = cmp(g * (1 + 1e-5), g)
    assert res.passed, res.message
    assert res.comparison_path == "floating-point-compute"


def test_fp32_uniform_5e4_error_fails_match_ratio() -> None:
    # diff 5e-4 ≤ cap (1e-3 + 2^-13·1) but rel 5e-4 > 2^-13 for every element → ratio 0
    g = torch.ones(10, dtype=F32)
    res = cmp(g + 5e-4, g)
    assert not res.passed
    assert res.diagnostics["failure_stage"] == "match_ratio"
    assert res.diagnostics["matched_ratio"] == 0.0


def test_fp32_match_ratio_boundary_ninety_percent() -> None:
    g = torch.ones(10, dtype=F32)
    one_bad = g.clone()
    one_bad[0] += 5e-4  # 9/10 match, MERE = 5e-5 < 2^-13
    assert cmp(one_bad, g).passed
    two_bad = one_bad.clone()
    two_bad[1] += 5e-4  # 8/10 match
    res = cmp(two_bad, g)
    assert not res.passed and res.diagnostics["failure_stage"] == "match_ratio"


def test_fp32_mere_fails_while_ratio_and_cap_pass() -> None:
    g = torch.ones(10, dtype=F32)
    g[0] = 0.01
    a = g.clone()
    a[0] += 9e-4  # within cap (1e-3 + ...), rel err 0.09 → MERE 0.009 ≥ 2^-13
    res = cmp(a, g)
    assert not res.passed
    assert res.diagnostics["failure_stage"] == "mere"
    assert res.diagnostics["matched_ratio"] == pytest.approx(0.9)


def test_fp32_cap_violation() -> None:
    g = torch.ones(4, dtype=F32)
    a = g.clone()
    a[2] = 1.01
    res = cmp(a, g)
    assert not res.passed and res.diagnostics["failure_stage"] == "cap"
    assert res.diagnostics["max_abs_diff"] == pytest.approx(0.01, rel=1e-3)
    assert "thresholds" in res.diagnostics


def test_small_values_use_absolute_small_err() -> None:
    g = torch.full((8,), 1e-5, dtype=F32)  # below small_thr 2^-14
    assert cmp(g + 5e-10, g).passed  # ≤ 2^-30 ≈ 9.3e-10
    assert not cmp(g + 5e-9, g).passed


def test_fp16_ulp_cases() -> None:
    g = torch.ones(16, dtype=torch.float16)
    # one ulp at 1.0: rel err 2^-10/(1+1e-7) is just below rel=2^-10 → ratio and MERE pass
    assert cmp(g + 2**-10, g).passed
    # two ulps everywhere: within the cap (0.09 + 2^-10) but every element misses rel → ratio 0
    res = cmp(g + 2**-9, g)
    assert not res.passed and res.diagnostics["failure_stage"] == "match_ratio"
    one = g.clone()
    one[0] += 2**-9  # 15/16 match, MERE = 2^-9/16 < 2^-10
    assert cmp(one, g).passed


def test_nan_and_inf_position_rules() -> None:
    g = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert cmp(g.clone(), g).passed
    moved = torch.tensor([float("nan"), 1.0, float("inf"), -float("inf")])
    assert cmp(moved, g).diagnostics["failure_stage"] == "nan_position"
    sign = torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")])
    assert cmp(sign, g).diagnostics["failure_stage"] == "inf_sign"
    extra_inf = torch.tensor([float("inf"), float("nan"), float("inf"), -float("inf")])
    assert cmp(extra_inf, g).diagnostics["failure_stage"] == "inf_position"


def test_integer_paths() -> None:
    gi = torch.tensor([1, 2, 3], dtype=torch.int32)
    ints = (torch.tensor([1, 2], dtype=torch.int64),)
    floats = (torch.tensor([1.0, 2.0]),)
    assert cmp(gi.clone(), gi, ints).passed
    off = gi + torch.tensor([0, 1, 0], dtype=torch.int32)
    res = cmp(off, gi, ints)
    assert not res.passed and res.comparison_path == "integer-compute"
    res = cmp(off, gi, floats)
    assert res.passed and res.comparison_path == "quantized-fp-to-int"
    assert not cmp(gi + 2, gi, floats).passed
    assert cmp(gi, gi, ()).comparison_path == "integer-compute"


def test_bool_and_non_compute() -> None:
    gb = torch.tensor([True, False])
    assert cmp(gb.clone(), gb).passed
    assert cmp(~gb, gb).comparison_path == "bool-output"
    assert not cmp(~gb, gb).passed
    g = torch.tensor([0.0, 1.0])
    assert cmp(g.clone(), g, compute=False).passed
    res = cmp(torch.tensor([-0.0, 1.0]), g, compute=False)  # equal values, different bytes
    assert not res.passed and res.diagnostics["failure_stage"] == "bytes"
    assert not cmp(g.to(torch.float64), g, compute=False).passed


def test_nested_outputs_and_structure() -> None:
    g = {"y": (torch.ones(3), 2.5), "n": 3}
    assert cmp({"y": (torch.ones(3), 2.5), "n": 3}, g).passed
    res = cmp({"y": (torch.ones(3), 2.5)}, g)
    assert not res.passed and res.diagnostics["failure_stage"] == "structure"
    res = cmp({"y": (torch.ones(3), 2.6), "n": 3}, g)
    assert not res.passed and res.diagnostics["output_path"] == "output['y'][1]"
    assert not cmp([torch.ones(3)], [torch.ones(3), torch.ones(3)]).passed
    assert not cmp(torch.ones(4), torch.ones(3)).passed


def test_dtype_close_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.ones(8, dtype=F32)
    assert cmp(g * (1 + 5e-5), g, mode="dtype-close").passed  # rtol 1e-4
    res = cmp(g * (1 + 1e-3), g, mode="dtype-close")
    assert not res.passed and res.diagnostics["failure_stage"] == "assert_close"
    assert not cmp(g.to(torch.float64), g, mode="dtype-close").passed  # dtype must match
    assert cmp(torch.tensor([float("nan")]), torch.tensor([float("nan")]), mode="dtype-close").passed
    assert accuracy.close_tolerances(torch.bfloat16) == {"rtol": 1e-3, "atol": 1e-4}
    monkeypatch.setenv("HELIX_RUN_TEST_ATOL", "0.01")
    monkeypatch.setenv("HELIX_RUN_TEST_RTOL", "0")
    assert accuracy.close_tolerances(torch.float16) == {"rtol": 0.0, "atol": 0.01}
    assert cmp(g * (1 + 1e-3), g, mode="dtype-close").passed


def test_accuracy_mode_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_RUN_TEST_ACCURACY_MODE", "dtype-close")
    assert accuracy.accuracy_mode_from_env() == "dtype-close"
    assert accuracy.accuracy_mode_from_env("npu-contract") == "npu-contract"
    monkeypatch.setenv("HELIX_RUN_TEST_ACCURACY_MODE", "loose")
    with pytest.raises(ValueError, match="unknown accuracy mode"):
        accuracy.accuracy_mode_from_env()


def payload(results, compute=True, ids=None):
    ids = ids or [f"c{i}" for i in range(len(results))]
    return {"compute": compute, "cases": [{"id": i, "inputs": (torch.ones(1),), "result": r}
                                          for i, r in zip(ids, results)]}


def test_compare_payloads_messages() -> None:
    g = [torch.ones(4), torch.ones(4) * 2]
    ok = compare_payloads(payload(g), payload([t.clone() for t in g]))
    assert ok.passed and ok.message == "PASS: all 2 case(s) matched the NPU accuracy contract."
    bad = compare_payloads(payload(g), payload([g[0], g[1] * 1.01]))
    assert not bad.passed and bad.failed_case_count == 1
    assert bad.message.startswith("FAIL: 1 of 2 case(s) failed. First failure: case c1 failed")


@pytest.mark.parametrize(
    ("backend", "mode", "line"),
    [
        ("npu", "npu-contract", "PASS: all 2 case(s) matched the NPU accuracy contract."),
        (None, "npu-contract", "PASS: all 2 case(s) matched the NPU accuracy contract."),
        ("cpu", "npu-contract", "PASS: all 2 case(s) matched accuracy mode npu-contract (checked on cpu)."),
        ("cuda", "npu-contract", "PASS: all 2 case(s) matched accuracy mode npu-contract (checked on cuda)."),
        ("cpu", "dtype-close", "PASS: all 2 case(s) matched accuracy mode dtype-close (checked on cpu)."),
        ("cuda", "dtype-close", "PASS: all 2 case(s) matched accuracy mode dtype-close (checked on cuda)."),
    ],
)
def test_pass_line_names_the_mode_off_npu(backend, mode, line) -> None:  # noqa: ANN001
    """Upstream's wording on an NPU; on cuda and cpu no NPU was involved, so the mode is named."""
    g = [torch.ones(4), torch.ones(4) * 2]
    ok = compare_payloads(payload(g), payload([t.clone() for t in g]), mode, backend)
    assert ok.passed and ok.message == line
    assert ok.to_json()["diagnostics"]["accuracy_mode"] == mode


@pytest.mark.parametrize(
    ("ref", "cand", "needle"),
    [
        ({"results": []}, payload([]), "legacy"),
        (payload([torch.ones(1)]), payload([torch.ones(1)] * 2), "case counts differ"),
        (payload([torch.ones(1)], ids=["a"]), payload([torch.ones(1)], ids=["b"]), "ids differ"),
        (payload([torch.ones(1)], compute=False), payload([torch.ones(1)]), "compute flags"),
        ([1, 2], payload([]), "not a dict"),
    ],
)
def test_compare_payloads_rejects_bad_archives(ref, cand, needle) -> None:
    res = compare_payloads(ref, cand)
    assert not res.passed and needle in res.message


def test_input_summary_priority() -> None:
    assert accuracy.input_summary((torch.ones(1, dtype=torch.float16), torch.ones(1))) == ("float", "float32")
    assert accuracy.input_summary([torch.ones(1, dtype=torch.int8), torch.ones(1, dtype=torch.int64)]) == ("int", "int64")
    assert accuracy.input_summary((3, "x")) == ("no_tensor", None)
