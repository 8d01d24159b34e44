"""The ``traceviz`` console script: signals handled before anything heavy is imported.

Ctrl-C (SIGINT) and SIGTERM end the run with one line and exit status 130 / 143; both
unwind the stack first, so every temporary output is removed on the way out.
"""

from __future__ import annotations

import signal
import sys

from traceviz.errors import Terminated


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def entry() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        from traceviz.cli import main

        code = main()
    except KeyboardInterrupt:
        print("traceviz: interrupted", file=sys.stderr)
        code = 130
    except Terminated:
        print("traceviz: terminated", file=sys.stderr)
        code = 143
    sys.exit(code)
