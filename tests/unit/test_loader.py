"""The harness contract: metadata header, kernel resolution, and every contract violation
naming the file and the hook (bench, standalone and differential)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.eval import loader
from helix_engine.eval.loader import HarnessContractError

OPERATOR = textwrap.dedent('''\
    import triton
    import triton.language as tl
    from triton import jit

    @triton.jit
    def k_plain(x):
        pass

    @triton.autotune(configs=[], key=[])
    @triton.jit(do_not_specialize=["n"])
    def k_called(x, n):
        pass

    @jit
    def k_bare(x):
        pass

    def helper():
        @triton.jit
        def nested(x):
            pass
        return nested

    def op(x):
        return x
    ''')


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- metadata


def test_metadata_header_rules() -> None:
    text = "#!/usr/bin/env python\n\n# api-name: Foo\n# some prose\n# Kernels: a_kernel, b_kernel \n\n# test-mode: x\n"
    meta = loader.parse_metadata(text)
    assert meta == {"api-name": "Foo", "kernels": "a_kernel, b_kernel"}
    assert loader.metadata_kernels(meta) == ["a_kernel", "b_kernel"]


def test_metadata_stops_at_code_and_reads_legacy_kernel_key() -> None:
    meta = loader.parse_metadata("# kernel: only_one\nimport os\n# api-name: late\n")
    assert meta == {"kernel": "only_one"}
    assert loader.metadata_kernels(meta) == ["only_one"]
    assert loader.parse_metadata("import os\n# api-name: x\n") == {}


# ---------------------------------------------------------------------- kernel resolution


def test_jit_functions_found_by_ast() -> None:
    assert loader.jit_functions(OPERATOR) == ["k_plain", "k_called", "k_bare"]
    assert loader.jit_functions("import tilelang\n@tilelang.jit\ndef t(): pass\n") == []


def test_resolve_kernels_sources(tmp_path: Path) -> None:
    op = write(tmp_path, "op.py", OPERATOR.replace("import triton\n", "import triton\nfrom lib import extra_kernel\n"))
    names, source = loader.resolve_kernels(op, {"kernels": "extra_kernel, k_plain"})
    assert names == ["extra_kernel", "k_plain", "k_called", "k_bare"]  # upstream's union: header first
    assert source == "metadata+operator"
    assert loader.resolve_kernels(op, {}) == (["k_plain", "k_called", "k_bare"], "operator")
    plain = write(tmp_path, "plain.py", "def op(x):\n    return x\n")
    assert loader.resolve_kernels(plain, {"kernels": "k"}) == (["k"], "metadata")


def test_a_fused_round_names_only_the_kernels_it_defines_or_uses(tmp_path: Path) -> None:
    """The agent walk: a round that fused the softmax's three kernels into one still wrote all four
    names into its perf records, from the bench header the baseline needed. A header name the
    operator neither defines nor uses in code is dropped; one it uses (an imported kernel, an
    attribute of a module) is kept; an operator that defines no kernel keeps the header."""
    fused = write(tmp_path, "opt_softmax.py", '''\
        # row_max_kernel, exp_sum_kernel and normalize_kernel were fused (a comment is no use)
        import triton
        import kernels_lib

        @triton.jit
        def softmax_fused_kernel(x):
            pass

        def softmax(x):
            kernels_lib.normalize_kernel[(1,)](x)
            softmax_fused_kernel[(1,)](x)
        ''')
    header = {"kernels": "row_max_kernel, exp_sum_kernel, normalize_kernel"}
    assert loader.resolve_kernels(fused, header) == (["normalize_kernel", "softmax_fused_kernel"], "metadata+operator")
    alone = write(tmp_path, "alone.py", "import triton\n@triton.jit\ndef softmax_fused_kernel(x):\n    pass\n")
    assert loader.resolve_kernels(alone, header) == (["softmax_fused_kernel"], "operator")
    wrapper = write(tmp_path, "wrapper.py", "from lib import softmax\n")
    assert loader.resolve_kernels(wrapper, header)[0] == ["row_max_kernel", "exp_sum_kernel", "normalize_kernel"]


def test_no_kernels_is_an_error_naming_file(tmp_path: Path) -> None:
    plain = write(tmp_path, "plain.py", "def op(x):\n    return x\n")
    with pytest.raises(HarnessContractError) as exc:
        loader.resolve_kernels(plain, {})
    assert "plain.py" in str(exc.value) and "kernels" in str(exc.value)


def test_operator_syntax_error_is_clear(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.py", "def op(:\n")
    with pytest.raises(HarnessContractError, match="bad.py:1: SyntaxError: .* fix the operator and run again"):
        loader.resolve_kernels(bad, {})


# ---------------------------------------------------------------------------- bench hooks

GOOD_BENCH = '''\
    # api-name: op
    # api-kind: triton-wrapper
    def build_operator_api(m):
        return m.op
    def build_bench_cases():
        return CASES
    def build_bench_case_fn(api, case):
        return lambda: api(1)
    '''


def bench_with(tmp_path: Path, cases: str, header: str = "", drop: str | None = None) -> Path:
    write(tmp_path, "op.py", OPERATOR)
    body = GOOD_BENCH.replace("return CASES", f"return {cases}")
    if header:
        body = body.replace("# api-kind: triton-wrapper", header)
    if drop:
        body = body.replace(f"def {drop}(", f"def _unused_{drop}(")
    return write(tmp_path, "bench_op.py", body)


def test_good_bench_harness_loads(tmp_path: Path) -> None:
    bench = bench_with(tmp_path, '[{"id": "a"}, {"id": "b", "warmup": 0, "repeats": 7}]')
    h = loader.load_bench_harness(bench, tmp_path / "op.py")
    assert [(c.id, c.warmup, c.repeats) for c in h.cases] == [("a", 5, 50), ("b", 0, 7)]
    assert h.kernel_names == ["k_plain", "k_called", "k_bare"]
    assert h.build_fn(h.cases[0])() == 1


@pytest.mark.parametrize("hook", ["build_operator_api", "build_bench_cases", "build_bench_case_fn"])
def test_missing_bench_hook_names_file_and_hook(tmp_path: Path, hook: str) -> None:
    bench = bench_with(tmp_path, '[{"id": "a"}]', drop=hook)
    with pytest.raises(HarnessContractError) as exc:
        loader.load_bench_harness(bench, tmp_path / "op.py")
    assert str(exc.value).startswith(f"bench_op.py: {hook}: the hook is missing")


@pytest.mark.parametrize(
    ("cases", "needle"),
    [
        ('[{"id": "a"}, {"id": "a"}]', "duplicate case id 'a'"),
        ('[{"id": ""}]', "empty or missing id"),
        ('[{"name": "x"}]', "empty or missing id"),
        ('[{"id": "a", "warmup": -1}]', "warmup=-1 is invalid"),
        ('[{"id": "a", "warmup": True}]', "warmup=True is invalid"),
        ('[{"id": "a", "repeats": 0}]', "repeats=0 is invalid"),
        ('[{"id": "a", "repeats": "3"}]', "repeats='3' is invalid"),
        ("[]", "returned no cases"),
        ('{"id": "a"}', "returned dict"),
        ('["a"]', "case #0 is str"),
    ],
)
def test_bad_bench_cases(tmp_path: Path, cases: str, needle: str) -> None:
    bench = bench_with(tmp_path, cases)
    with pytest.raises(HarnessContractError) as exc:
        loader.load_bench_harness(bench, tmp_path / "op.py")
    assert "bench_op.py: build_bench_cases:" in str(exc.value)
    assert needle in str(exc.value)


def test_unknown_api_kind(tmp_path: Path) -> None:
    bench = bench_with(tmp_path, '[{"id": "a"}]', header="# api-kind: cuda-graph")
    with pytest.raises(HarnessContractError, match="bench_op.py: api-kind: unknown api-kind 'cuda-graph'"):
        loader.load_bench_harness(bench, tmp_path / "op.py")


def test_case_fn_must_return_callable(tmp_path: Path) -> None:
    bench = bench_with(tmp_path, '[{"id": "a"}]')
    bench.write_text(bench.read_text().replace("return lambda: api(1)", "return 42"))
    h = loader.load_bench_harness(bench, tmp_path / "op.py")
    with pytest.raises(HarnessContractError, match="bench_op.py: build_bench_case_fn: case 'a': returned int"):
        h.build_fn(h.cases[0])


# ----------------------------------------------------------------------------- test hooks


def test_standalone_uses_metadata_api(tmp_path: Path) -> None:
    write(tmp_path, "op.py", OPERATOR)
    test = write(tmp_path, "test_op.py", "# test-mode: standalone\n# api-name: op\ndef main(api):\n    return api(3)\n")
    main, api = loader.load_standalone_test(test, tmp_path / "op.py")
    assert main(api) == 3


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("# api-name: op\ndef not_main(api): pass\n", "test_op.py: main: the hook is missing"),
        ("# api-name: op\n# api-kind: tilelang-wrapper\ndef main(api): pass\n",
         "test_op.py: api-kind: unknown api-kind 'tilelang-wrapper'"),
        ("# test-mode: standalone\ndef main(api): pass\n", "test_op.py: api-name: the header names no operator API"),
        ("# api-name: nope\ndef main(api): pass\n", "test_op.py: api-name: the operator defines no 'nope'"),
    ],
)
def test_standalone_violations(tmp_path: Path, source: str, needle: str) -> None:
    write(tmp_path, "op.py", OPERATOR)
    test = write(tmp_path, "test_op.py", source)
    with pytest.raises(HarnessContractError) as exc:
        loader.load_standalone_test(test, tmp_path / "op.py")
    assert needle in str(exc.value)


DIFF = '''\
    # test-mode: differential
    # compute-kind: non-compute
    def build_operator_api(m):
        return m.op
    def build_differential_test_cases(api):
        return CASES
    '''


@pytest.mark.parametrize(
    ("cases", "needle"),
    [
        ('[{"id": "a", "inputs": (1,), "fn": lambda: 1}, {"id": "a", "inputs": (), "fn": lambda: 2}]', "duplicate case id 'a'"),
        ('[{"id": " ", "inputs": (), "fn": lambda: 1}]', "empty or missing id"),
        ('[{"id": "a", "inputs": 5, "fn": lambda: 1}]', "inputs must be a tuple or list"),
        ('[{"id": "a", "inputs": (), "fn": 3}]', "fn must be a zero-argument callable"),
        ("None", "returned NoneType"),
    ],
)
def test_differential_violations(tmp_path: Path, cases: str, needle: str) -> None:
    write(tmp_path, "op.py", OPERATOR)
    test = write(tmp_path, "differential_test_op.py", DIFF.replace("return CASES", f"return {cases}"))
    with pytest.raises(HarnessContractError) as exc:
        loader.load_differential_cases(test, tmp_path / "op.py")
    assert "differential_test_op.py: build_differential_test_cases:" in str(exc.value)
    assert needle in str(exc.value)


def test_differential_ok_and_compute_flag(tmp_path: Path) -> None:
    write(tmp_path, "op.py", OPERATOR)
    test = write(tmp_path, "differential_test_op.py",
                 DIFF.replace("return CASES", 'return [{"id": "a", "inputs": [2], "fn": lambda: api(2)}]'))
    cases, compute = loader.load_differential_cases(test, tmp_path / "op.py")
    assert compute is False and cases[0].fn() == 2


def test_missing_differential_hook(tmp_path: Path) -> None:
    write(tmp_path, "op.py", OPERATOR)
    test = write(tmp_path, "differential_test_op.py", "def build_operator_api(m):\n    return m.op\n")
    with pytest.raises(HarnessContractError, match="build_differential_test_cases: the hook is missing"):
        loader.load_differential_cases(test, tmp_path / "op.py")


def test_test_mode_header_required(tmp_path: Path) -> None:
    test = write(tmp_path, "test_op.py", "def main(api): pass\n")
    with pytest.raises(HarnessContractError, match="test_op.py: test-mode: the header has no"):
        loader.test_mode_of(test)
    assert loader.test_mode_of(test, "standalone") == "standalone"
    bad = write(tmp_path, "t2.py", "# test-mode: fuzzy\n")
    with pytest.raises(HarnessContractError, match="unknown test mode 'fuzzy'"):
        loader.test_mode_of(bad)


def test_harness_discovery_for_round_operator(tmp_path: Path) -> None:
    write(tmp_path, "op.py", OPERATOR)
    write(tmp_path, "bench_op.py", GOOD_BENCH)
    write(tmp_path, "differential_test_op.py", DIFF)
    round_dir = tmp_path / "opt-round-2"
    round_dir.mkdir()
    cand = write(round_dir, "opt_op.py", OPERATOR)
    assert loader.find_bench_file(cand) == tmp_path / "bench_op.py"
    assert loader.find_test_file(cand) == tmp_path / "differential_test_op.py"
    with pytest.raises(HelixError, match="no test file found"):
        loader.find_test_file(cand, "standalone")
