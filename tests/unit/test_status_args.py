"""`helix status` arguments parsed without argparse (commands/status._plain_args, issue 12: importing
argparse and defining the options was ~7 ms of a ~75 ms computed status): on every invocation it
takes, it gives exactly argparse's namespace; anything else it leaves to argparse."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helix_engine.commands.status import _argparsed, _plain_args

_WORDS = st.sampled_from([
    "ws", "a/b", "x y", "--json", "--verbose", "-i", "--input", "-w", "--workspace", "--format", "json",
    "text", "html", "markdown", "--view", "best", "trend", "-m", "--metric-source", "auto", "kernel",
    "total-op", "bogus", "--js", "--format=json", "-ijson", "-", "--", "", "-h", "--help", "-x", "--view=trend",
])


@settings(max_examples=2000, deadline=None)
@given(st.lists(_WORDS, max_size=7))
def test_the_plain_parse_is_argparses_or_none(words: list[str]) -> None:
    plain = _plain_args(words)
    if plain is None:
        return  # argparse parses it (the fast path never guesses)
    parsed = _argparsed(words)
    assert parsed is not None, words
    assert vars(plain) == vars(parsed), words


def test_the_usual_invocations_take_the_plain_parse() -> None:
    for words in (["ws", "--json"], ["--json"], ["-i", "ws", "--format", "json"], ["a", "b", "--json", "-m", "kernel"],
                  ["--workspace", "ws", "--json", "--view", "trend"]):
        assert _plain_args(words) is not None, words
    for words in (["a", "--json", "b"], ["--format=json"], ["--js"], ["-i"], ["--view", "nope"]):
        assert _plain_args(words) is None, words
