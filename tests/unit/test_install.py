"""Install (issue 13, finding 1): torch is not a dependency (PyPI's Linux torch is a CUDA build of
several GB), so a Python without torch must say what to install, per backend, before a job fails.
The README/.ci/run/pyproject side is in test_readme.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from helix_engine.cli import main

NO_TORCH = ('{"python": "3.11.7", "executable": "/venv/bin/python", '
            '"torch_error": "ModuleNotFoundError: No module named \'torch\'"}')
WITH_TORCH = ('{"python": "3.11.7", "executable": "/venv/bin/python", "torch_version": "2.13.0+cpu", '
              '"npu_error": "torch_npu is not installed", "cuda_available": false}')


@pytest.fixture()
def jobs_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Point the backend probe at a stand-in interpreter that prints what we tell it."""

    def use(probe_output: str) -> None:
        fake = tmp_path / "python"
        fake.write_text(f"#!/bin/sh\ncat <<'JSON'\n{probe_output}\nJSON\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("HELIX_PYTHON", str(fake))
        monkeypatch.setenv("HELIX_BACKEND_CACHE", "0")
        monkeypatch.delenv("HELIX_BACKEND", raising=False)

    return use


def test_backend_without_torch_says_what_to_install(jobs_python, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    jobs_python(NO_TORCH)
    assert main(["backend", "--refresh"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: no job can run: torch does not import (ModuleNotFoundError: No module named 'torch')" in out
    assert "--index-url https://download.pytorch.org/whl/cpu" in out
    assert "-e '.[cuda]'" in out and "-e '.[npu]'" in out


def test_backend_with_torch_has_no_install_warning(jobs_python, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    jobs_python(WITH_TORCH)
    assert main(["backend", "--refresh"]) == 0
    out = capsys.readouterr().out
    assert "torch 2.13.0+cpu" in out and "no job can run" not in out


def test_demo_without_torch_refuses_before_copying(jobs_python, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """Before: the demo copied the example and ran two jobs that failed with ModuleNotFoundError."""
    jobs_python(NO_TORCH)
    dest = tmp_path / "demo"
    assert main(["demo", str(dest), "--no-tui"]) == 1
    err = capsys.readouterr().err
    assert "error: the demo runs real jobs, and torch does not import" in err
    assert "python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in err
    assert not dest.exists()
