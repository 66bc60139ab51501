"""Read the knowledge cards: list them, show one, check their sections, resolve a name.

Why a module of its own: the profile routing (`helix_engine.profile.routing`), the CLI
(``helix patterns``) and the cockpit's Hotspots pane all name cards; one reader answers
"does this card exist and what does it say" for all three, so a routed name can never point
at a card that is not shipped.

Card format (plain markdown, written by us): ``# <name>`` on the first line, one summary line,
then ``## <section>`` headings. Pattern cards carry `PATTERN_SECTIONS`, symptom cards
`SYMPTOM_SECTIONS`. Names come only from the files shipped in this package: a name typed
by a user is looked up in that list, never joined onto a path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

PATTERN_SECTIONS: tuple[str, ...] = (
    "When it applies", "Evidence that points to it", "The change", "How to verify", "Risks",
)
SYMPTOM_SECTIONS: tuple[str, ...] = (
    "What it means", "Profiler evidence", "IR evidence", "Candidate cards", "Ruling it out",
)
#: Reference pages (the workspace contract, the ledger's format): the pages the skill tells an
#: agent to read as ``references/artifacts.md``, ``opt-note-format.md`` and ``round-failure-handling.md``,
#: in our words.
REFERENCE_SECTIONS: tuple[str, ...] = ()
KINDS: dict[str, tuple[str, ...]] = {"pattern": PATTERN_SECTIONS, "symptom": SYMPTOM_SECTIONS,
                                     "reference": REFERENCE_SECTIONS}
FOLDERS: dict[str, str] = {"pattern": "patterns", "symptom": "symptoms", "reference": "reference"}
INDEX = "index"

#: ``name`` written in backticks inside a card: how one card points at another.
CARD_REF_RE = re.compile(r"`([a-z0-9][a-z0-9_-]*)`")


@dataclass(frozen=True)
class Card:
    """One card: its name (file stem), kind, one-line summary, sections and whole text."""

    name: str
    kind: str
    summary: str
    text: str
    sections: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "summary": self.summary,
                "sections": list(self.sections), "text": self.text}


def _package() -> Any:
    return resources.files("helix_engine.knowledge")


@lru_cache(maxsize=1)
def _names() -> dict[str, str]:
    """Every shipped card name → its kind (``pattern`` | ``symptom`` | ``reference``)."""
    found: dict[str, str] = {}
    for kind, folder in FOLDERS.items():
        for entry in _package().joinpath(folder).iterdir():
            if entry.name.endswith(".md") and entry.is_file():
                found[entry.name[: -len(".md")]] = kind
    return dict(sorted(found.items()))


def card_names(kind: str | None = None) -> list[str]:
    """Card names in alphabetical order, of one kind or of all."""
    return [n for n, k in _names().items() if kind is None or k == kind]


def has_card(name: str | None) -> bool:
    return name is not None and name in _names()


def parse_card(name: str, kind: str, text: str) -> Card:
    """Split a card into its summary line and ``## `` sections (see the module docstring)."""
    lines = text.splitlines()
    summary = next((ln.strip() for ln in lines[1:] if ln.strip() and not ln.startswith("#")), "")
    sections: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return Card(name, kind, summary, text, {k: v.strip() for k, v in sections.items()})


@cache
def load_card(name: str) -> Card:
    """The card ``name`` (exact card name; see `resolve` for aliases). KeyError if unknown."""
    if name == INDEX:
        return parse_card(INDEX, INDEX, index_text())
    kind = _names()[name]
    text = _package().joinpath(FOLDERS[kind], f"{name}.md").read_text(encoding="utf-8")
    return parse_card(name, kind, text)


def index_text() -> str:
    """index.md: how to use the cards, symptom → cards, topic → cards, every card."""
    return _package().joinpath("index.md").read_text(encoding="utf-8")


def card_problems(card: Card) -> list[str]:
    """What is wrong with a card's shape: a wrong title, a missing or empty section, a
    reference to a card that does not exist. Empty when the card is sound."""
    problems: list[str] = []
    first = card.text.splitlines()[0] if card.text else ""
    if first != f"# {card.name}":
        problems.append(f"{card.name}: the first line must be '# {card.name}', not {first!r}")
    if not card.summary:
        problems.append(f"{card.name}: no summary line under the title")
    for section in KINDS.get(card.kind, ()):
        if not card.sections.get(section):
            problems.append(f"{card.name}: section '## {section}' is missing or empty")
    for ref in sorted(set(CARD_REF_RE.findall(card.text))):
        if not _looks_like_card_name(ref):
            continue
        try:
            resolve(ref)
        except KeyError:
            problems.append(f"{card.name}: refers to `{ref}`, which is no card")
    return problems


def _looks_like_card_name(word: str) -> bool:
    """A backticked word with a hyphen or underscore that is not code (``tl.load`` has a
    dot, ``num_warps`` is a Triton name): card names are hyphenated words."""
    return "-" in word and not word.startswith("-")


def resolve(name: str) -> tuple[str, str | None]:
    """(card name, note) for what a person or the routing table calls a card: a card name, a
    routing alias (``cache-use``), an upstream symptom name (``high-transfer-pressure``), or a
    spelling with ``_``/``-`` swapped. KeyError when nothing matches."""
    from helix_engine.profile import routing

    asked = name.strip()
    # the skill's file names: ``references/artifacts.md``, ``pattern_index.md``, ``tiling.md``
    name = asked.rsplit("/", 1)[-1].removesuffix(".md")
    if name in ("pattern_index", "pattern-index"):
        name = INDEX
    if has_card(name) or name == INDEX:
        return name, (None if name == asked else f"{asked} is shown as {name}")
    target = routing.ALIASES.get(name) or routing.SYMPTOM_CARDS.get(name)
    if target is not None and has_card(target):
        return target, f"{name} is shown as the card {target}"
    for spelling in (name.replace("_", "-"), name.replace("-", "_")):
        if has_card(spelling):
            return spelling, f"{name} is spelled {spelling}"
    raise KeyError(name)


def all_names() -> list[str]:
    """Every name `resolve` accepts (for "did you mean")."""
    from helix_engine.profile import routing

    return sorted({*card_names(), INDEX, *routing.ALIASES, *routing.SYMPTOM_CARDS})


def listing() -> list[dict[str, str]]:
    """``{name, kind, summary}`` of every card, symptoms first (they say where to start), then
    patterns, then the reference pages."""
    rows = [load_card(n) for kind in ("symptom", "pattern", "reference") for n in card_names(kind)]
    return [{"name": c.name, "kind": c.kind, "summary": c.summary} for c in rows]


def route_report(report: Any) -> dict[str, Any]:
    """What a profile report routes to, card by card: each detected symptom with its evidence,
    its symptom card and the candidate pattern cards (with their summaries), the card the
    bound classification points at, and the distinct cards in reading order."""
    from helix_engine.profile import routing

    evidence = {s["symptom"]: s.get("evidence", "") for s in report.symptoms}
    routes = []
    order: list[str] = []
    for entry in report.suggested_patterns:
        cards = []
        for p in entry["patterns"]:
            card = p.get("pattern_file")
            cards.append({"name": p["name"], "card": card, "note": p.get("note"),
                          "summary": load_card(card).summary if has_card(card) else None})
            if card and card not in order:
                order.append(card)
        routes.append({"symptom": entry["symptom"], "evidence": evidence.get(entry["symptom"], entry["trigger"]),
                       "symptom_card": entry.get("symptom_card"), "cards": cards})
    bound_card = routing.BOUND_CARDS.get(report.bound)
    symptom_cards = [r["symptom_card"] for r in routes if r["symptom_card"]]
    if bound_card and bound_card not in symptom_cards:
        symptom_cards.insert(0, bound_card)
    return {"profile_dir": report.profile_dir, "target_operator": report.target_operator, "bound": report.bound,
            "bound_card": bound_card, "routes": routes,
            "cards": list(dict.fromkeys(symptom_cards)) + order}
