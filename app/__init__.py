"""Quire's window and command line.

Every process Quire starts (the window, the CLI, the worker) enters through this package, so the one
process-wide setting that must precede ``import numpy`` lives here: numpy's OpenBLAS runs one thread.
Search's only BLAS work is one matrix-vector product over the held vectors (~1 ms on one core); with two
BLAS threads it stalled behind any other busy process (measured under load: p50 0.5 → 12 ms, p95 5 →
24 ms), and torch, which does the heavy work, has its own thread settings.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
