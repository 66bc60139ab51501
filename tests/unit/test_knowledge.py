"""The pattern knowledge base: every routed name has a card, every card has its sections,
`helix patterns list | show | route` on the real profiler fixtures, and the cards ship in the wheel."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.knowledge import cards
from helix_engine.profile import routing
from helix_engine.profile.report import build_report

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
PROFILE_DIRS = [
    FIX / "ascend-profiler" / "standalone_real_output",
    FIX / "ascend-profiler" / "msprof_real_output",
    FIX / "ascend-profiler" / "realistic_parent_layout",
    FIX / "kernels" / "profiler" / "standalone",
    FIX / "kernels" / "profiler" / "msprof",
]
#: The topics issue 14 asks the knowledge base to cover (index.md's topic table names a card for each).
TOPICS = ("fusing launches", "block and tile sizing", "persistent programs", "contiguous and vectorised access",
          "Welford", "program ordering", "multi-buffering", "fp32 accumulate", "autotune configurations",
          "index arithmetic hoisting", "masks and boundary handling", "transposes and layouts", "split-K and atomics",
          "UB/L1 limits", "num_warps")


def test_every_routed_name_has_a_card() -> None:
    assert len(routing.PATTERN_FILES) == 34
    assert routing.PATTERN_FILES <= set(cards.card_names("pattern"))
    for alias, target in routing.ALIASES.items():
        assert cards.has_card(target), alias
    for symptom in routing.SYMPTOMS:
        for ref in routing.candidates(symptom):
            assert ref.pattern_file is not None and cards.has_card(ref.pattern_file), (symptom, ref)
    for table in (routing.SYMPTOM_CARDS, routing.BOUND_CARDS):
        assert all(cards.card_names("symptom").count(card) == 1 for card in table.values())
    assert set(cards.card_names("symptom")) == {"memory-bound", "compute-bound", "scalar-bound", "launch-bound",
                                                "transfer-pipeline-imbalance", "poor-occupancy"}


@pytest.mark.parametrize("name", cards.card_names() + [cards.INDEX])
def test_every_card_has_its_sections_and_refers_only_to_cards(name: str) -> None:
    card = cards.load_card(name)
    assert cards.card_problems(card) == []
    expected = cards.KINDS.get(card.kind, ())
    assert [s for s in card.sections if s in expected] == list(expected)  # all of them, in order
    if card.kind != cards.INDEX:
        assert 15 <= len(card.text.splitlines()) <= 70, "cards stay short: one screen or two"


def test_the_checker_finds_a_missing_section_and_a_dangling_reference() -> None:
    text = cards.load_card("tiling").text
    broken = text.replace("## How to verify", "## How we checked").replace("`autotune`", "`auto-tuning`")
    problems = cards.card_problems(cards.parse_card("tiling", "pattern", broken))
    assert "tiling: section '## How to verify' is missing or empty" in problems
    assert "tiling: refers to `auto-tuning`, which is no card" in problems
    assert cards.card_problems(cards.parse_card("tiling", "pattern", "# tilling\n")) != []


def test_the_index_lists_every_card_and_every_topic() -> None:
    index = cards.index_text()
    for name in cards.card_names():
        assert f"`{name}`" in index, name
    topics = cards.load_card(cards.INDEX).sections["Topics"]
    for topic in TOPICS:
        row = next((line for line in topics.splitlines() if topic in line), None)
        assert row is not None and cards.CARD_REF_RE.search(row.split("|")[2]), topic


@pytest.mark.parametrize("name", cards.card_names() + [cards.INDEX])
def test_patterns_show_prints_each_card(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patterns", "show", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {name}\n")
    for section in cards.KINDS.get(cards.load_card(name).kind, ()):
        assert f"\n## {section}\n" in out


def test_patterns_show_takes_routing_and_symptom_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patterns", "show", "cache-use"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("(cache-use is shown as the card on-chip-reuse)\n\n# on-chip-reuse\n")
    assert main(["patterns", "show", "high-transfer-pressure", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["name"], data["kind"], data["requested"]) == ("memory-bound", "symptom", "high-transfer-pressure")
    assert main(["patterns", "show", "slice-coalesce"]) == 0
    assert "# slice_coalesce" in capsys.readouterr().out


def test_patterns_show_an_unknown_name_says_what_it_meant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patterns", "show", "tilng"]) == 1
    err = capsys.readouterr().err
    assert "no card named 'tilng'; did you mean `tiling`?" in err
    assert main(["patterns", "show", "../../etc/passwd"]) == 1  # a name is looked up, never opened as a path
    assert "no card named '../../etc/passwd'" in capsys.readouterr().err


def test_patterns_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patterns", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["cards"]
    assert [r["name"] for r in rows[:6]] == cards.card_names("symptom")
    assert len(rows) == len(cards.card_names()) == 55 and all(r["summary"] for r in rows)
    assert main(["patterns", "list", "--kind", "symptom"]) == 0
    text = capsys.readouterr().out
    assert "Symptom cards:" in text and "Pattern cards:" not in text and "  memory-bound  " in text


@pytest.mark.parametrize("asked", ["artifacts", "artifacts.md", "references/artifacts.md"])
def test_the_skills_reference_files_are_readable_by_their_names(asked: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The skill says "Read artifacts.md" and "Read opt-note-format.md": both names answer, through
    `helix reference` and `helix patterns show`, and both are listed."""
    for argv in (["reference", asked], ["patterns", "show", asked]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "# artifacts\n" in out and "round-state.json" in out and "comparison_target_path" in out
    assert main(["reference", "opt-note-format.md", "--json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert (page["name"], page["kind"]) == ("opt-note-format", "reference")
    for line in ("## Overall Summary", "Final best round:", "Best status:", "Key optimization points:"):
        assert line in page["text"]
    assert main(["reference"]) == 0
    listed = capsys.readouterr().out
    assert "  artifacts  " in listed and "  opt-note-format  " in listed
    assert main(["patterns", "list", "--kind", "reference", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["cards"]] == [
        "artifacts", "opt-note-format", "round-failure-handling"]
    assert main(["reference", "tiling"]) == 1  # a pattern card is not a reference page
    assert "`helix reference` lists them" in capsys.readouterr().err


@pytest.mark.parametrize("folder", PROFILE_DIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_route_on_the_real_profiler_fixtures(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = build_report(folder)
    for entry in report.suggested_patterns:  # profile-report names only cards that exist
        assert all(cards.has_card(p["pattern_file"]) for p in entry["patterns"])
        assert cards.has_card(entry["symptom_card"])
    assert main(["patterns", "route", "--profile-dir", str(folder), "--json"]) == 0
    routed = json.loads(capsys.readouterr().out)
    assert [r["symptom"] for r in routed["routes"]] == [s["symptom"] for s in report.symptoms]
    assert all(cards.has_card(c) for c in routed["cards"]) and len(routed["cards"]) == len(set(routed["cards"]))
    assert main(["patterns", "route", "--profile-dir", str(folder)]) == 0
    text = capsys.readouterr().out
    assert f"Target: {report.target_operator}; bound: {report.bound}" in text
    if report.symptoms:
        first_symptom_card = routed["bound_card"] or routed["routes"][0]["symptom_card"]
        assert routed["cards"][0] == first_symptom_card
        assert "Reading order: " + ", ".join(routed["cards"]) in text
    else:  # kernels/profiler/msprof: no pipeline counters, so no symptom: say where to start instead
        assert routed["cards"] == [] and "No symptom detected" in text and "helix patterns show index" in text


def test_route_of_a_transfer_bound_matmul() -> None:
    routed = cards.route_report(build_report(FIX / "ascend-profiler" / "realistic_parent_layout"))
    assert routed["bound"] == "memory-bound" and routed["bound_card"] == "memory-bound"
    names = {c["name"]: c["card"] for c in routed["routes"][0]["cards"]}
    assert names["cache-use"] == "on-chip-reuse" and names["slice-coalesce"] == "slice_coalesce"
    assert routed["cards"][:3] == ["memory-bound", "tiling", "effective-extent-tiling"]


def test_route_escapes_profiler_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    folder = tmp_path / "prof\x1b]0;x\x07"
    shutil.copytree(FIX / "ascend-profiler" / "msprof_real_output", folder)
    assert main(["patterns", "route", "--profile-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b]0;x\\x07" in out


def test_route_without_a_profile_says_what_to_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patterns", "route", "--profile-dir", str(tmp_path / "none")]) == 1
    assert "run `helix profile-bench` first" in capsys.readouterr().err


def test_the_cards_ship_in_the_wheel() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = project["tool"]["setuptools"]["package-data"]["helix_engine.knowledge"]
    folder = ROOT / "helix_engine" / "knowledge"
    shipped = [p.relative_to(folder).as_posix() for p in folder.rglob("*.md")]
    assert len(shipped) == 56  # 46 patterns, 6 symptoms, 3 reference pages, the index
    assert all(any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs) for rel in shipped)


def test_a_recorded_cpu_profile_of_three_kernels_routes_to_launch_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """The agent walk: profile-bench of the three-kernel softmax on the cpu backend said "No symptom
    detected" although each call launched 3 kernels, the launch-bound card's own evidence."""
    folder = FIX / "profile-cpu-softmax" / "PROF_fp32_16x128"
    report = build_report(folder)
    assert report.backend == "cpu" and report.launch_signals["launches_per_call"] == 3
    assert [s["symptom"] for s in report.symptoms] == ["many-launches"]  # no short-kernels from interpreter time
    assert "3 launches per call" in report.symptoms[0]["evidence"]
    assert main(["patterns", "route", "--profile-dir", str(folder), "--json"]) == 0
    routed = json.loads(capsys.readouterr().out)
    assert routed["cards"][:2] == ["launch-bound", "fuse-launches"]
    assert main(["profile-report", "--profile-dir", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "- Launches per call: 3 (5 profiled calls)" in text and "**many-launches**" in text
    assert "no symptom detected" not in text


def test_an_ascend_profile_with_helix_manifest_routes_launches_and_short_kernels(tmp_path: Path) -> None:
    """Ascend: the calls come from the manifest profile-bench writes (an upstream profile without
    one gives no per-call figure); msprof's matmul runs 6 µs per launch of device time."""
    import shutil

    folder = tmp_path / "prof"
    shutil.copytree(FIX / "ascend-profiler" / "msprof_real_output", folder)
    assert "many-launches" not in [s["symptom"] for s in build_report(folder).symptoms]
    (folder / "profile-manifest.json").write_text(json.dumps({"backend": "npu", "repeats": 1}))
    found = {s["symptom"]: s["evidence"] for s in build_report(folder).symptoms}
    assert found["many-launches"].startswith("9 launches per call (matmul_kernel ×5, Cast ×2")
    assert "matmul_kernel runs 6.03 µs per launch" in found["short-kernels"]


def test_the_skills_third_reference_closes_a_failed_round(capsys: pytest.CaptureFixture[str]) -> None:
    """The skill lists references/round-failure-handling.md beside the other two (an agent walk found
    no page for it): the page names the commands that record a failed round, and each parses."""
    assert main(["reference", "references/round-failure-handling.md"]) == 0
    out = capsys.readouterr().out
    assert "# round-failure-handling\n" in out
    for needle in ("--correctness failed", "helix submit-round --round-dir opt-round-N", "marks the round `failed`",
                   "never replaces the last good", "helix start-round"):
        assert needle in out, needle
