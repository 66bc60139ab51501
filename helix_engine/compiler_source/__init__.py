"""Compiler-source escalation (the skill's deepest analysis level): search a read-only compiler
checkout (AscendNPU-IR, triton-ascend or triton) for the passes, ops and options a round's
profile and IR narrowed the question to, and keep the evidence in ``opt-round-N/compiler-analysis.md``.

- ``tree``: the checkout walked once (no links followed, caps on sizes and counts, nothing run);
- ``locate``: upstream's score, ranked locations with their lines, pass/option definitions, ``show``;
- ``ir_terms``: the names a round's IR capture holds (pass names, dialect ops, attributes);
- ``analysis``: compiler-analysis.md, whose evidence block helix rewrites and whose prose it never touches.
"""
