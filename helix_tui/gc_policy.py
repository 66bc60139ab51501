"""The cockpit's settings for Python's cyclic garbage collector (issue 12).

The cockpit is a long-lived process whose garbage is almost all acyclic: a reload builds a new
snapshot and the one it replaces is freed by reference counting. At the default young-generation
threshold (700 allocations) a pass comes at the end of every reload and walks what that reload
just built: when a mid round of 1000 becomes the best, ~14k references into objects no longer in
the CPU's caches (measured with gc callbacks: 60 passes in 60 reloads, 1.4-2.2 ms a reload). At
10,000, 1-3 passes came in 60 such reloads (0.07-0.34 ms a reload), and by then most of what they
built had been freed. Cyclic garbage (Textual's) waits a little longer for its pass: at most
~10,000 objects.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: allocations (less deallocations) between two passes over the young generation
GEN0_THRESHOLD = 10_000


def apply() -> None:
    """Raise the young generation's threshold to GEN0_THRESHOLD. A higher one is kept, and so is 0
    (automatic collection turned off by whoever runs the cockpit)."""
    first, second, third = gc.get_threshold()
    if 0 < first < GEN0_THRESHOLD:
        gc.set_threshold(GEN0_THRESHOLD, second, third)


@contextlib.contextmanager
def frozen_after() -> Iterator[None]:
    """No collection while the block runs, and what is alive at its end moved out of the
    collector's reach (gc.freeze) before collection resumes. For the cockpit's full load: the
    snapshot stays alive, so the pass that came right after the load (its objects all still in the
    young generation) walked the whole of it and freed nothing (load plus the next 20k allocations
    at 1000 rounds: 165 ms with this, 169-183 ms without, on a quiet 2-core box), on whichever
    thread allocated next. Collection is left off when it was off."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
