"""``traceviz env``: the separate environment a framework needs (MXNet 1.9.1); and, always,
a note on this installation: which Kineto reader it uses (the compiled one, or the Python
one and why)."""

from __future__ import annotations

import argparse
from pathlib import Path

from traceviz.cli.base import Command, stderr, stdout
from traceviz.runners import MXNET_ENV


class EnvCommand(Command):
    name = "env"
    help = ("say which Kineto reader this installation uses; create the separate "
            "environment a framework needs (mxnet: MXNet 1.9.1, numpy<1.24)")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("framework", choices=("mxnet",), nargs="?",
                       help="the framework whose environment to create (none: only the note)")
        p.add_argument("--path", type=Path, default=MXNET_ENV,
                       help=f"where to create it (default ./{MXNET_ENV}, where capture "
                            "looks for it)")
        p.add_argument("--python", metavar="PATH",
                       help="base interpreter for the venv (default: traceviz's own base)")

    def run(self, args: argparse.Namespace) -> int:
        from rich.text import Text

        from traceviz.capture.envs import make_mxnet_env
        from traceviz.parsers.kineto.native import reader_note

        stderr().print(Text.assemble(("note: ", "yellow"), reader_note()), soft_wrap=True)
        if args.framework is None:
            return 0

        with stderr().status("...") as status:
            interp = make_mxnet_env(args.path, args.python,
                                    lambda label: status.update(label + " ..."))
        stdout().print(f"MXNet environment ready: {interp}\n"
                       f"  traceviz capture --model gluon_mxnet"
                       + ("" if args.path == MXNET_ENV else f" --python {interp}"),
                       soft_wrap=True)
        return 0
