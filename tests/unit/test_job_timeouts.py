"""Time limits from the environment: one parser for the eval and the profile/IR variables."""

from __future__ import annotations

import pytest

from helix_engine.errors import HelixError
from helix_engine.jobs import settings
from helix_engine.profile import bench


def test_eval_timeout_from_argument_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.TIMEOUT_ENV, raising=False)
    assert settings.resolve_timeout(None)[0] == settings.DEFAULT_TIMEOUT_S
    monkeypatch.setenv(settings.TIMEOUT_ENV, " 42.5 ")
    assert settings.resolve_timeout(None) == (42.5, f"{settings.TIMEOUT_ENV}=42.5")
    assert settings.resolve_timeout(7)[0] == 7.0


def test_profile_timeout_from_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bench.TIMEOUT_ENV, raising=False)
    assert bench.profile_timeout() == 900.0
    monkeypatch.setenv(bench.TIMEOUT_ENV, "12")
    assert bench.profile_timeout() == 12.0


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "inf", "nan"])
def test_bad_env_values_are_refused_with_how_to_set_them(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(settings.TIMEOUT_ENV, raw)
    with pytest.raises(HelixError, match="set it like 600"):
        settings.resolve_timeout(None)
    monkeypatch.setenv(bench.TIMEOUT_ENV, raw)
    with pytest.raises(HelixError, match=f"{bench.TIMEOUT_ENV}=.*set it like 900"):
        bench.profile_timeout()
