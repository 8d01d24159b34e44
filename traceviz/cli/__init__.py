"""``traceviz`` command line, shaped like memray: one module per command, each a
``Command`` (see ``base``), one list of them, and a testable ``main(argv) -> int``.

Only this package prints or writes files. Library code raises ``TraceVizError``s worded
for any caller; here they become one line on stderr, with options spelled as flags.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from traceviz import __version__
from traceviz.cli.base import Command
from traceviz.errors import Terminated, TraceVizError, UsageError
from traceviz.render.escape import visible
from traceviz.system import collector

# every command: its name, and its module and class under traceviz.cli, in the order of
# the help. A command's module is imported when it runs or the list is shown in full:
# one command's run does not import the other twelve
COMMAND_MODULES: tuple[tuple[str, str, str], ...] = (
    ("import", "import_trace", "ImportCommand"), ("analyze", "analyze", "AnalyzeCommand"),
    ("capture", "capture", "CaptureCommand"), ("models", "models", "ModelsCommand"),
    ("env", "env", "EnvCommand"), ("compare", "compare", "CompareCommand"),
    ("amp", "amp", "AmpCommand"), ("sweep", "sweep", "SweepCommand"),
    ("sweep-plot", "sweep_plot", "SweepPlotCommand"), ("report", "report", "ReportCommand"),
    ("whatif", "whatif", "WhatIfCommand"), ("advise", "advise", "AdviseCommand"),
    ("ladder", "ladder", "LadderCommand"),
)


def command_class(name: str) -> type[Command]:
    """The ``Command`` of the command named ``name``."""
    _, module, cls = next(c for c in COMMAND_MODULES if c[0] == name)
    found: type[Command] = getattr(importlib.import_module(f"traceviz.cli.{module}"), cls)
    return found


INTERNAL_ERROR = 3


class _Parser(argparse.ArgumentParser):
    """argparse, its errors as one line like every other error (``--width: at least 40
    columns, not 0``), not the usage block; ``-h`` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message.removeprefix("argument ")
        else:
            message = f"{message} ({self.prog} -h lists the options)"
        raise UsageError(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``only``: the command being run, the only one whose module
    is imported and whose arguments are added (the others keep their name, for a usage
    error's list): some commands' arguments import modules of their own (``capture``'s,
    the runners), which another command need not pay for."""
    parser = _Parser(
        prog="traceviz",
        description="Profile LSTM variants (PyTorch, TensorFlow, JAX, MXNet) and read any "
                    "torch.profiler, Nsight Systems or TF/JAX trace through one events table: "
                    "top kernels, launch overhead, AMP cast cost.",
    )
    parser.add_argument("--version", action="version", version=f"traceviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, _, _ in COMMAND_MODULES:
        if only is not None and name != only:
            sub.add_parser(name)  # named, for a usage error's list; never run
            continue
        cmd = command_class(name)()
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    names = {c[0] for c in COMMAND_MODULES}
    parser = build_parser(args_in[0] if args_in and args_in[0] in names else None)
    try:
        args = parser.parse_args(args_in)
    except UsageError as e:
        _error(e.cli_text())
        return e.exit_code
    if getattr(args, "_command", None) is None:
        parser.print_help()
        return 2
    # the console script paused the collector for the CLI's imports (``entry``); a
    # command that reads a trace pauses it again for its own (``base.read_ahead``)
    collector.resume()
    try:
        return _run(args)
    finally:
        # a command that ended before reading its trace left the collector paused
        collector.resume(freeze=False)


def _run(args: argparse.Namespace) -> int:
    """The command, its errors turned into one line and an exit status."""
    try:
        return args._command.run(args)
    except TraceVizError as e:
        _debug_traceback(e)
        _error(e.cli_text())
        return e.exit_code
    except KeyboardInterrupt:
        print("traceviz: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("traceviz: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:
        return 0
    except MemoryError as e:
        _debug_traceback(e)
        _error("out of memory")
        return 2
    except OSError as e:
        _debug_traceback(e)
        _error(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e))
        return 2
    except Exception as e:
        if os.environ.get("TRACEVIZ_DEBUG"):
            raise
        _error(f"{type(e).__name__}: {e} (set TRACEVIZ_DEBUG=1 to see the traceback)",
               "internal error")
        return INTERNAL_ERROR


def _debug_traceback(e: BaseException) -> None:
    """With TRACEVIZ_DEBUG set, the traceback of a handled error and of what caused it,
    even where the error was raised ``from None`` to keep the user's line short."""
    if not os.environ.get("TRACEVIZ_DEBUG"):
        return
    cause = e.__cause__ or e.__context__
    if cause is not None and (e.__suppress_context__ and e.__cause__ is None):
        traceback.print_exception(cause, file=sys.stderr)
        print("\nwhich was reported as:\n", file=sys.stderr)
    traceback.print_exception(e, file=sys.stderr)


def _error(message: str, label: str = "error") -> None:
    """One line on stderr, whatever the message holds (Arrow's are two lines)."""
    text = " ".join(part.strip() for part in message.splitlines() if part.strip())
    # file and kernel names in the message: their control characters shown, not sent
    print(f"traceviz: {label}: {visible(text)}", file=sys.stderr)
