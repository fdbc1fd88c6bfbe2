"""Benchmarks, run on purpose (``make bench``), never as timed tests.

Importing ``app`` first gives every benchmark process the settings every Quire process has (``app``'s
package: one OpenBLAS thread, which must precede ``import numpy``), so that what runs in a benchmark's
own process — a scan timed in-process, say — runs as it would in ``quire``.
"""

import app  # noqa: F401
