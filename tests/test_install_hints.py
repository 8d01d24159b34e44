"""What traceviz says to install when a framework or an extra is missing: the command
that works where it runs. Installed from a wheel, ``pip install 'traceviz[torch]'``;
from an editable checkout, ``pip install -e '.[torch]'``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import shared
from tests.installs import TRACES, run

# the wheel, the sdist and their virtual environments are built once, on one xdist worker
pytestmark = pytest.mark.xdist_group("installs")

TRACE = TRACES["kineto"]


def _error_line(r: subprocess.CompletedProcess) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("traceviz: error:"), lines
    return lines[0]


def test_wheel_without_torch_names_the_extra(floor_venv, tmp_path):
    """The wheel alone (no torch, DuckDB, Ray): models, capture, traceviz.profile(), a
    rank dataset and --ray each say ``pip install 'traceviz[EXTRA]'``."""
    traceviz = str(floor_venv / "bin" / "traceviz")
    models = run([traceviz, "models", "--framework", "torch"], cwd=tmp_path)
    assert models.returncode == 0, models.stderr
    assert "pip install 'traceviz[torch]'" in models.stdout.replace("\n", " ")
    assert "-e '." not in models.stdout
    line = _error_line(run([traceviz, "capture", "--model", "cudnn_torch", "--device", "cpu",
                            "--out", str(tmp_path / "run")], cwd=tmp_path))
    assert "pip install 'traceviz[torch]'" in line
    assert not (tmp_path / "run").exists()

    code = ("import traceviz\n"
            "try:\n"
            "    traceviz.profile(out='prof')\n"
            "except traceviz.TraceVizError as e:\n"
            "    print(type(e).__name__, e)\n")
    r = run([str(floor_venv / "bin" / "python"), "-c", code], cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("TraceVizError traceviz.profile() profiles PyTorch code")
    assert r.stdout.rstrip().endswith("pip install 'traceviz[torch]'")
    assert not (tmp_path / "prof").exists()

    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for k in (0, 1):
        (ranks / f"rank-{k}.json.gz").write_bytes(shared(TRACE).read_bytes())
    line = _error_line(run([traceviz, "import", str(ranks), "-o", str(tmp_path / "ds"),
                            "--ray"], cwd=tmp_path))
    assert "--ray needs Ray: pip install 'traceviz[dist]'" in line
    r = run([traceviz, "import", str(ranks), "-o", str(tmp_path / "ds")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = _error_line(run([traceviz, "analyze", str(tmp_path / "ds")], cwd=tmp_path))
    assert "needs DuckDB: pip install 'traceviz[dist]'" in line


def test_editable_checkout_says_install_from_the_checkout(tmp_path: Path):
    """This test environment's editable install: ``pip install -e '.[torch]'`` (torch made
    unimportable in the child process)."""
    from traceviz.system.install_hint import editable_checkout, pip_install

    assert editable_checkout()
    assert pip_install("dist") == "pip install -e '.[dist]'"
    code = ("import sys\n"
            "sys.modules['torch'] = None\n"
            "import traceviz\n"
            "from traceviz.runners import FRAMEWORKS\n"
            "print(FRAMEWORKS['torch'].missing())\n"
            "try:\n"
            "    traceviz.profile(out='prof')\n"
            "except traceviz.TraceVizError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    missing, profile = r.stdout.splitlines()
    assert missing == "needs torch, which is not installed (pip install -e '.[torch]')"
    assert profile.endswith("pip install -e '.[torch]'") and not (tmp_path / "prof").exists()
