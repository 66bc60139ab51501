"""``opt-round-N/compiler-analysis.md``: helix's evidence block, and the agent's analysis around it.

Why two owners in one file: upstream's skill has the agent write compiler-analysis.md (its ten
sections), and the conclusion is the agent's; what helix adds is the part an agent tends to
get wrong by hand: which checkout and commit, which names were searched, where they are
(path:line, the line itself) and which passes/options define them. So helix keeps its evidence
between two marker comments and rewrites only that block on every search; a file without the
markers gets the block inserted under its title; the sections below are written once, as a
skeleton, when the file does not exist, and never again. Every checkout- or IR-derived string
is escaped (``sanitize.clean``) and set in code spans or fences long enough for its backticks,
so a hostile file name or source line renders as text.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from helix_engine.errors import HelixError
from helix_engine.sanitize import clean
from helix_engine.workspace import files, layout
from helix_engine.workspace.reading import owning_workspace, read_text_safe

if TYPE_CHECKING:
    from helix_engine.compiler_source.ir_terms import Term
    from helix_engine.compiler_source.locate import Located

FILE_NAME = "compiler-analysis.md"
TITLE = "# Compiler Source Analysis"
BEGIN = "<!-- helix:compiler-source:begin (rewritten by `helix compiler-source`; write outside this block) -->"
END = "<!-- helix:compiler-source:end -->"
#: Upstream's sections after the title: the agent's, written once as a skeleton, never rewritten.
#: Upstream's "Recommended Next Operator Change" asked for a plan, against the skill's hard rule "Do
#: not write forward-looking optimization plans": helix's skeleton asks for the conclusion the
#: evidence supports for this round instead (files written before keep their own headings).
AGENT_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Executive Summary", "One paragraph: the compiler-side cause behind this round's measurements."),
    ("Round Performance Question", "The one narrowed question profile and IR evidence left open."),
    ("Compiler Source Context", "Checkout and commit (see the evidence block above), subsystem read."),
    ("Round Evidence Used", "profile/, ir/ and perf-analysis.md findings this analysis starts from."),
    ("Source Files Inspected", "path:line of each file read (from the ranked locations above, or others)."),
    ("Source-Backed Explanation", "Direct facts from the source, cited; inference marked as inference."),
    ("Implications For Current Operator", "What the compiler behaviour means for this kernel."),
    ("Conclusion From This Round's Evidence", "What the evidence shows about this round's change (which part of "
     "the measured result the compiler behaviour explains). Not a plan: the next direction comes from fresh evidence "
     "on the changed code."),
    ("Confidence And Evidence Gaps", "What is not yet shown, and how to show it."),
)
_BLOCK = re.compile(re.escape("<!-- helix:compiler-source:begin") + r".*?" + re.escape(END), re.DOTALL)


def code(text: object) -> str:
    """An inline code span of escaped text, fenced with more backticks than it holds."""
    value = clean(text)
    run = max((len(m) for m in re.findall(r"`+", value)), default=0)
    fence = "`" * (run + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or run else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def fenced(lines: list[str]) -> list[str]:
    body = [clean(line) for line in lines] or ["(none)"]
    run = max((len(m) for line in body for m in re.findall(r"`{3,}|~{3,}", line)), default=0)
    fence = "`" * max(3, run + 1)
    return [f"{fence}text", *body, fence]


def evidence_block(located: Located, terms: list[Term] | None, ir_dir: str | None, command: str) -> str:
    tree = located.tree
    by_area = tree.get("by_area", {})
    counts = ", ".join(f"{a} {by_area.get(a, 0)}" for a in ("docs", "lib", "include", "test"))
    skipped = [f"{tree[k]} {what}" for k, what in (("skipped_links", "links (not followed)"),
                                                   ("skipped_large", "files over 1 MB"),
                                                   ("skipped_other", "special files")) if tree.get(k)]
    lines = [BEGIN, "## Compiler Source Evidence (helix)", "",
             f"- Checkout: {code(located.source_root)} at commit {code(located.commit or 'unknown')} (read-only)",
             f"- Searched: {tree.get('files', 0)} files ({counts})" + (f"; skipped {', '.join(skipped)}" if skipped else ""),
             f"- Terms: {len(located.terms)}" + (f", from the IR capture {code(ir_dir)}" if ir_dir else "")
             + (f"; hint {code(located.hint)}" if located.hint else ""),
             f"- Command: {code(command)}",
             f"- Written: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if tree.get("truncated"):
        lines.append(f"- Cut short: {clean(tree['truncated'])}")
    lines += ["", "### Terms", ""]
    if terms:
        width = max(len(clean(t.name)) for t in terms)
        lines += fenced([f"{t.kind:<9} {clean(t.name):<{width}}  x{t.count:<5} {clean(t.source)}" for t in terms])
    else:
        lines += fenced(located.terms)
    lines += ["", "### Ranked locations", "", "Score = 6 x path hits + 2 x min(text hits, 5) + area bonus (docs 2, "
              "lib 1) + hint bonus; read docs, then lib, then include, then test.", ""]
    ranked: list[str] = []
    for area, hits in located.areas.items():
        ranked.append(f"{area}:")
        if not hits:
            ranked.append("  (no matches)")
        for hit in hits:
            where = f"{hit.path}:{hit.line}" if hit.line else hit.path
            ranked.append(f"  {hit.score:>4}  {where}  ({hit.why}; {', '.join(hit.matched_terms)})")
            ranked += [f"          {n}: {text}" for n, text in hit.lines]
    lines += fenced(ranked)
    lines += ["", "### Pass, option and op definitions", ""]
    defs: list[str] = []
    for d in located.definitions:
        defs += [f"{d.kind:<16} {d.label}  {d.path}:{d.line}", f"{'':<18}{d.text}"]
    lines += fenced(defs or ["(no definition names these terms)"])
    lines.append(END)
    return "\n".join(lines)


def skeleton() -> str:
    parts = []
    for heading, hint in AGENT_SECTIONS:
        parts.append(f"## {heading}\n\n<!-- {hint} -->\n")
    return "\n".join(parts)


def write_analysis(round_dir: Path, located: Located, terms: list[Term] | None, ir_dir: str | None,
                   command: str) -> Path:
    """Create or update ``round_dir/compiler-analysis.md``: only helix's block changes."""
    round_dir = Path(round_dir)
    if layout.round_number(round_dir.name) is None or not round_dir.is_dir():
        raise HelixError(f"{round_dir} is not a round folder; compiler-analysis.md belongs in opt-round-N/.")
    root = Path(located.source_root)
    if root == round_dir.resolve() or root in round_dir.resolve().parents:
        raise HelixError(f"{round_dir} lies inside the compiler checkout {root}; helix never writes into a checkout.")
    path = round_dir / FILE_NAME
    block = evidence_block(located, terms, ir_dir, command)
    if not path.exists() and not path.is_symlink():
        files.atomic_write_text(path, f"{TITLE}\n\n{block}\n\n{skeleton()}")
        return path
    text, problem = read_text_safe(path, owning_workspace(path))
    if problem is not None or text is None:
        raise HelixError(f"{path} cannot be updated: {problem.message if problem else 'unreadable'}. helix does not "
                         "overwrite an analysis it cannot read; fix or move the file.")
    files.atomic_write_text(path, merge(text, block))
    return path


def merge(text: str, block: str) -> str:
    """``text`` with helix's block replaced, or inserted under the title (at the top without one)."""
    if _BLOCK.search(text):
        return _BLOCK.sub(lambda _m: block, text, count=1)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("# "):
            return "\n".join([*lines[: i + 1], "", block, "", *lines[i + 1:]])
    return f"{TITLE}\n\n{block}\n\n{text}"
