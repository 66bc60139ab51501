"""The gate: what stands between a round's operator (code written to pass) and a verdict.

The supervisor (the eval worker) makes the inputs, hands out slots, times, compares and writes;
each operator runs in its own process (opproc.py) on a private copy of its file. See DESIGN.md,
principle 9.
"""
