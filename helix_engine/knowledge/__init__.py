"""The pattern knowledge base shipped with helix: markdown cards an engineer or an agent reads
during pattern triage (``helix patterns``), and the reader that finds them.

The cards are package data (``patterns/*.md``, ``symptoms/*.md``, ``index.md``); `cards`
reads them, checks their sections and resolves the names the profile routing uses.
"""
