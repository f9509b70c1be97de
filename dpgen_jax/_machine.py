"""Facts about the machine a fit runs on: its physical memory (a leaf: it imports nothing of ours).

DP-SACTGAN refuses a fit whose attention would not fit in memory, and the advice predicts each
method's memory against the same number; both read it here.
"""

from __future__ import annotations

import os


def physical_memory() -> float | None:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None
