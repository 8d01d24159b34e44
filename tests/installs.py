"""Building the package and installing it into fresh virtual environments, for the tests
of what a user installs (``test_wheel.py``, ``test_floors.py``).

A fresh environment sees nothing of the checkout or of the test environment: commands run
from another folder with an environment that names neither (``clean_env``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED, SHARED_TRACES

SAMPLES = ROOT / "sample_traces"
# every dependency pinned at the floor pyproject.toml declares
FLOOR_CONSTRAINTS = ROOT / ".ci" / "constraints-floor.txt"
# one small trace of every format the readers take
TRACES = {
    "kineto": SHARED_TRACES / "kineto" / "mi250_rocm_train.json.gz",
    "nsys": SHARED_TRACES / "nsys" / "rtx3080_tiny.sqlite",
    "xplane": SHARED_TRACES / "xplane" / "tf24_bert_amp_gpu.xplane.pb.gz",
    "parquet": SAMPLES / "gpu" / "cudnn_torch" / "forward" / "trace.parquet",
    "mxnet": SAMPLES / "mxnet" / "gluon_mxnet_imdb_w0" / "trace.mxnet.json",
}
# those of ../shared, which a test reading them all needs (``pytest.mark.shared``)
SHARED_FORMATS = [p for p in TRACES.values() if p.is_relative_to(SHARED)]
# the formats as parameters, each marked with the file of ../shared it reads
FORMATS = [pytest.param(fmt, marks=[pytest.mark.shared(p)] if p in SHARED_FORMATS else [])
           for fmt, p in TRACES.items()]


def clean_env() -> dict[str, str]:
    """The environment without anything that points Python at the checkout or this venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV",
            "TRACEVIZ_DEBUG"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def source_tree(dst: Path) -> Path:
    """The checkout's files as git sees them (tracked, or new and not ignored), without
    what builds and installs leave in it (``build/``, ``*.egg-info``: an egg-info's file
    list carried a module into the sdist that the package configuration left out)."""
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       cwd=ROOT, capture_output=True, check=True)
    for rel in filter(None, r.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def build(src: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m build`` (the sdist, then the wheel from it, unless ``args`` say else)."""
    return subprocess.run([sys.executable, "-m", "build", *args, "--outdir", str(out),
                           str(src)], capture_output=True, text=True, timeout=600)


def make_venv(env: Path, *pip_args: str) -> subprocess.CompletedProcess:
    """A fresh virtual environment at ``env`` (this interpreter's version, none of its
    packages), then ``pip install pip_args`` in it."""
    base = getattr(sys, "_base_executable", sys.executable)
    r = run([base, "-m", "venv", str(env)], cwd=env.parent)
    if r.returncode:
        return r
    return run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", *pip_args],
               cwd=env.parent, timeout=1200)


def analyze_json(python: str, trace: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``traceviz analyze TRACE --json`` under ``python``, from ``cwd``."""
    return subprocess.run([python, "-m", "traceviz", "analyze", str(trace), "--json"],
                          cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=clean_env() if python != sys.executable else None)
