"""Issue 11 finding 6: helix's own helpers never import modules from the folder helix runs in.

A workspace holding ``json.py`` and ``torch.py`` (each writes a marker file when imported):
``helix backend`` (its probe runs ``python -c``), ``python3 -m helix_engine`` and the
README's safe form ``python3 -P -m helix_engine`` run there import neither.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.isolated import DROP_CWD, code_argv
from tests.conftest import ROOT

MODULES = ("json", "torch", "pydantic")


def _trap(folder: Path) -> Path:
    """Modules named like what helix and its probe import; each leaves a marker if imported."""
    marker = folder / "IMPORTED"
    for name in MODULES:
        (folder / f"{name}.py").write_text(
            f"with open({str(marker)!r}, 'a') as f:\n    f.write({name!r} + '\\n')\n")
    return marker


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "HELIX_BACKEND_CACHE": "0"}
    env.pop("HELIX_BACKEND", None)
    return env


@pytest.mark.slow
def test_helix_backend_probe_imports_nothing_from_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = _trap(ws)
    for key, value in _env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HELIX_BACKEND", raising=False)
    monkeypatch.chdir(ws)
    from helix_engine.eval import backends
    from helix_tui.cli import main  # the `helix` console script

    monkeypatch.setattr(backends, "_CACHE", {})
    assert main(["backend"]) == 0
    out = capsys.readouterr().out
    assert "backend:" in out
    assert not marker.exists(), f"the probe imported {marker.read_text().split()} from the workspace"
    if __import__("importlib.util").util.find_spec("torch") is not None:
        assert "torch -" not in out  # the real torch was found


@pytest.mark.parametrize("flags", [[], ["-P"]], ids=["python -m", "python -P -m (README)"])
def test_python_m_helix_engine_imports_nothing_from_the_cwd(tmp_path: Path, flags: list[str]) -> None:
    if flags and sys.version_info < (3, 11):
        pytest.skip("-P needs Python 3.11")
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = _trap(ws)
    proc = subprocess.run([sys.executable, *flags, "-m", "helix_engine", "--help"], cwd=ws, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "run-bench" in proc.stdout
    assert not marker.exists(), f"imported {marker.read_text().split()} from the current folder"


def test_code_argv_drops_the_cwd_and_keeps_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helix_probe_dep.py").write_text("VALUE = 7\n")
    marker = _trap(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib")}
    proc = subprocess.run(code_argv(sys.executable, "import json, helix_probe_dep; print(helix_probe_dep.VALUE)"),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "7"
    assert not marker.exists()
    assert DROP_CWD.startswith("import sys;")
