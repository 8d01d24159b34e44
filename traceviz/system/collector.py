"""Python's cyclic garbage collector paused while a command imports what it needs.

The modules a command imports (pandas, pyarrow, the analyses) make objects that live for
the whole run; the collector scanned them again and again as they were made: 0.07 s of a
small ``analyze`` went to ~200 collections (0.01 s with the pause, measured by
``gc.callbacks``). ``pause`` stops it before the imports; ``resume`` moves what they made
out of its reach (``gc.freeze``) and starts it again, before the trace is read, so that
the reading and the analyses run with it as usual.

Only in the ``traceviz`` process itself (``entry`` calls ``allow``): in a notebook or a
test that calls the CLI's ``main``, freezing would keep that process's garbage for good.
"""

from __future__ import annotations

import gc

_allowed = False
_paused = False
# a trace of at most this many bytes as read (``resume``), and once read of at most this
# many rows, is small (a Parquet file of 59 MB holds 6.8M rows)
SMALL_BYTES = 64 << 20
SMALL_ROWS = 1_000_000


def allow() -> None:
    """This process is the ``traceviz`` command: ``pause`` may stop the collector."""
    global _allowed
    _allowed = True


def pause() -> None:
    """Stop the collector (where it runs, and ``allow`` was called) until ``resume``."""
    global _paused
    if _allowed and gc.isenabled():
        gc.disable()
        _paused = True


def resume(freeze: bool = True, small: bool = False) -> None:
    """Start the collector again if ``pause`` stopped it; ``freeze``: first set aside every
    object made so far (the imports'), so that collections no longer scan them.

    ``small``: the command reads a small trace (``SMALL_BYTES``), and the collector stays
    stopped to its end (the imports' objects set aside all the same), unless the trace
    read has more than ``SMALL_ROWS`` rows (the caller then resumes it again). Its ~50
    collections took 0.012 s of a small ``analyze`` (``gc.callbacks``), where reference
    counting frees nearly everything: what a cycle holds is a few objects, freed when the
    command ends. A larger trace makes more of them, and the collector runs as usual."""
    global _paused
    if _paused:
        if freeze:
            gc.freeze()
        if not small:
            gc.enable()
            _paused = False
