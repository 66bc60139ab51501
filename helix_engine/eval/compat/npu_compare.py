"""Upstream-compatible ``npu_compare`` module for standalone tests.

Upstream standalone tests do ``from npu_compare import compare_case_result``; the worker puts
this folder on sys.path so those files run unchanged.
"""

from helix_engine.eval.accuracy import (  # noqa: F401 - re-exported names
    ArtifactCompareResult,
    CaseCompareResult,
    compare_case_result,
    compare_payloads,
)
