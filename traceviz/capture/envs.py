"""Separate Python environments for frameworks that cannot share traceviz's (MXNet)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from traceviz.errors import TraceVizError
from traceviz.runners import MXNET_REQUIREMENTS


def make_mxnet_env(path: Path, python: str | None = None,
                   on_step: Callable[[str], None] = lambda _: None) -> str:
    """Create a venv at ``path`` with MXNet 1.9.1; return its interpreter.

    Reuses an existing environment in which ``import mxnet`` already works."""
    interp = path / "bin" / "python"
    if interp.is_file() and _imports_mxnet(str(interp)):
        return str(interp)
    base = python or _base_python()
    steps = [
        (f"creating {path}", [base, "-m", "venv", str(path)]),
        (f"installing {' '.join(MXNET_REQUIREMENTS)}",
         [str(interp), "-m", "pip", "install", "-q", *MXNET_REQUIREMENTS]),
    ]
    for label, cmd in steps:
        on_step(label)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        except OSError as e:
            raise TraceVizError(f"{label} failed: cannot run {cmd[0]} ({e.strerror})") from None
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TraceVizError(f"{label} failed: {last[0][:300]}")
    on_step("checking import mxnet")
    if not _imports_mxnet(str(interp)):
        raise TraceVizError(f"{interp}: mxnet installed but does not import")
    return str(interp)


def _base_python() -> str:
    # the interpreter behind traceviz's own venv: a venv made from a venv python works,
    # but its base is the more robust choice
    return getattr(sys, "_base_executable", None) or sys.executable


def _imports_mxnet(interp: str) -> bool:
    done = subprocess.run([interp, "-c", "import mxnet"], capture_output=True)
    return done.returncode == 0
