"""``helix selftest --list`` names the whole pack, one cheat a line, and every cheat has a
workflow the runner knows (the runs themselves are CI's ``helix selftest`` step)."""

from __future__ import annotations

import pytest

from helix_engine.cli import main
from helix_engine.selftest.pack import PACK
from helix_engine.selftest.run import HONEST, operator_source

WORKFLOWS = {"standard", "edit-baseline-perf", "self-reported", "case-id", "own-reference", "one-case-baseline",
             "swap-after-test", "swap-after-bench", "edit-perf", "swap-config"}


def test_list_names_every_cheat(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [c.name for c in PACK]
    assert len({c.name for c in PACK}) == len(PACK) and HONEST.name not in {c.name for c in PACK}


@pytest.mark.parametrize("cheat", PACK, ids=[c.name for c in PACK])
def test_every_cheat_is_playable_python(cheat) -> None:  # noqa: ANN001
    assert cheat.workflow in WORKFLOWS
    compile(operator_source(cheat), f"{cheat.name}.py", "exec")
