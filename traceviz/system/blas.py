"""numpy imported with its BLAS (OpenBLAS) held to one thread, by the commands that read
traces and never multiply matrices.

OpenBLAS starts a thread per core when numpy is imported, and each spins for work for
a while before it sleeps: on a small ``analyze`` (two cores) that thread took ~0.06 s of
CPU beside the trace's read-ahead thread, and each memory unmapping of the importing
thread then had to stop the other core (an inter-processor interrupt, costly in a virtual
machine). traceviz's analyses use no BLAS routine. The variable is set for the import
only: processes the command starts (a capture's script) see the environment as it was,
and a value the user set is kept.
"""

from __future__ import annotations

import os
import sys

_THREADS = "OPENBLAS_NUM_THREADS"


def import_numpy_with_one_blas_thread() -> None:
    """Import numpy now, its BLAS on one thread unless the user chose a number; nothing
    where numpy is imported already."""
    if "numpy" in sys.modules:
        return
    if _THREADS in os.environ:  # the user's choice
        import numpy  # noqa: F401
        return
    os.environ[_THREADS] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        os.environ.pop(_THREADS, None)
