"""Every dependency at its floor: the wheel installed into a fresh environment under
``.ci/constraints-floor.txt`` (each dependency pinned to the lowest version
``pyproject.toml`` allows) reads a trace of every format and gives the same figures, and
nothing else on stderr, as the test environment's newest releases.

A floor that stops holding (a pandas or numpy call a newer release added, a protobuf that
crashes the XSpace parser) fails here, not on a user's machine.
"""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest
from packaging.version import Version

from tests.conftest import shared
from tests.installs import FLOOR_CONSTRAINTS as CONSTRAINTS
from tests.installs import FORMATS, ROOT, SHARED_FORMATS, TRACES, analyze_json, run

# the wheel, the sdist and their virtual environments are built once, on one xdist worker
pytestmark = pytest.mark.xdist_group("installs")


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def _floors() -> dict[str, str]:
    """``name: floor`` of every dependency in ``pyproject.toml``'s ``[project]`` table."""
    text = (ROOT / "pyproject.toml").read_text()
    deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    return {m[1].lower(): m[2] for m in re.finditer(r'"([A-Za-z0-9_.-]+)>=([0-9.]+)', deps)}


def test_constraints_pin_every_floor():
    """The constraints file pins exactly the floors ``pyproject.toml`` declares."""
    floors, pins = _floors(), _pins()
    assert sorted(floors) == sorted(pins)
    assert {n: Version(floors[n]) for n in floors} == {n: Version(pins[n]) for n in pins}
    assert _pins()["protobuf"] == "4.25.0" and _pins()["pandas"] == "2.1.0"


def test_floors_are_installed(floor_venv, tmp_path):
    r = run([str(floor_venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
            cwd=tmp_path)
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(r.stdout)}
    assert {name: installed.get(name) for name in _pins()} == _pins()
    assert installed["numpy"] == "1.24.1"


@pytest.mark.parametrize("fmt", FORMATS)
def test_analyze_at_the_floors(floor_venv, tmp_path, fmt):
    """The same ``analyze --json``, byte for byte, and no warning on stderr."""
    floor = analyze_json(str(floor_venv / "bin" / "python"), TRACES[fmt], tmp_path)
    assert floor.returncode == 0 and floor.stderr == "", floor.stderr[-3000:]
    newest = analyze_json(sys.executable, TRACES[fmt], tmp_path)
    assert newest.returncode == 0, newest.stderr
    assert floor.stdout == newest.stdout
    assert json.loads(floor.stdout)["busy_ns"] > 0


def test_report_at_the_floors(floor_venv, tmp_path):
    """The terminal tables (rich), the charts (matplotlib) and report.html (Bokeh)."""
    trace = str(shared(TRACES["kineto"]))
    traceviz = str(floor_venv / "bin" / "traceviz")
    for args in (["analyze", trace], ["report", trace, "-o", "r.md"],
                 ["report", trace, "-o", "r.html"]):
        r = run([traceviz, *args], cwd=tmp_path)
        assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr[-3000:]
    assert (tmp_path / "r_files").is_dir() and "Bokeh" in (tmp_path / "r.html").read_text()


OTHER_PYTHONS = ("3.10", "3.12", "3.13")


def _python(version: str) -> str | None:
    """``python3.X`` that runs: on PATH, else one pyenv installed ($PYENV_ROOT/versions)."""
    import glob
    import os
    import shutil
    import subprocess

    found = [shutil.which(f"python{version}")]
    if os.environ.get("PYENV_ROOT"):
        found += sorted(glob.glob(os.path.join(os.environ["PYENV_ROOT"], "versions",
                                               f"{version}.*", "bin", f"python{version}")))
    for python in filter(None, found):
        if subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.shared(*SHARED_FORMATS)
@pytest.mark.parametrize("version", OTHER_PYTHONS)
def test_analyze_on_other_pythons(dists, tmp_path, version):
    """The package on the other Python versions it supports, where the machine has them:
    the same ``analyze --json``, byte for byte, as here. Installed from the sdist: the
    wheel carries the compiled Kineto reader built for this interpreter only (its tag says
    so), the sdist builds it for that one, where a C compiler is found."""
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    env = tmp_path / "venv"
    r = run([python, "-m", "venv", str(env)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(dists["sdist"])],
            cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    if shutil.which("cc") or shutil.which("gcc"):  # the C source builds on that version
        r = run([str(env / "bin" / "python"), "-c", "import traceviz.parsers._kineto_native"],
                cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
    for fmt, trace in TRACES.items():
        other = analyze_json(str(env / "bin" / "python"), trace, tmp_path)
        assert other.returncode == 0 and other.stderr == "", (fmt, other.stderr[-3000:])
        here = analyze_json(sys.executable, trace, tmp_path)
        assert other.stdout == here.stdout, fmt
