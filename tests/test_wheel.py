"""The package as a user gets it: the sdist built by ``python -m build``, the wheel built
from that sdist, installed with the ``[torch]`` extra into a fresh virtual environment
and run from another folder, where the checkout cannot be imported.

An editable install fills gaps from the checkout (a subpackage left out of the build
still imports there); only a wheel in its own environment shows what ships.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import shared
from tests.installs import FORMATS, ROOT, TRACES, analyze_json, build, make_venv, run, source_tree
from tests.test_project import _modules

# the wheel, the sdist and their virtual environments are built once, on one xdist worker
pytestmark = pytest.mark.xdist_group("installs")

TINY = ["--preset", "ptb_lm", "--batch", "4", "--seq", "5", "--hidden", "16", "--layers", "2",
        "--vocab", "50", "--embed", "8", "--warmup", "1", "--steps", "3",
        "--profile-steps", "2", "--device", "cpu"]


def test_wheel_built_in_the_folder_leaves_out_stale_modules(tmp_path):
    """``pip install .`` builds in the source folder: a module deleted from the source but
    still in the previous build's ``build/lib`` does not ship."""
    src = source_tree(tmp_path / "src")
    stale = src / "build" / "lib" / "traceviz" / "deleted_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("GONE = True\n")
    r = build(src, tmp_path / "dist", "--wheel")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheel, = (tmp_path / "dist").glob("traceviz-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "traceviz/opcost/matrix.py" in names
    assert "traceviz/deleted_module.py" not in names


@pytest.fixture(scope="session")
def unpacked(dists, tmp_path_factory) -> Path:
    """The wheel's files as an install lays them out, without the dependencies."""
    site = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(dists["wheel"]) as z:
        z.extractall(site)
    return site


@pytest.fixture(scope="session")
def venv(dists, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel and its ``[torch]`` extra installed
    (from pip's configured indexes; torch's pinned CPU wheel comes from local disk)."""
    env = tmp_path_factory.mktemp("wheel") / "venv"
    r = make_venv(env, f"traceviz[torch] @ {dists['wheel'].as_uri()}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return env


def test_wheel_ships_every_module(unpacked):
    """Every module of the source tree, under its import name, and nothing else (a
    subpackage added without being packaged, or a module deleted but left in a build
    folder, fails here)."""
    shipped = {str(p.relative_to(unpacked)) for p in unpacked.rglob("*.py")}
    wanted = set()
    for name, path in _modules().items():
        rel = name.replace(".", "/")
        wanted.add(rel + ("/__init__.py" if path.name == "__init__.py" else ".py"))
    assert shipped == wanted, {"missing": sorted(wanted - shipped),
                               "extra": sorted(shipped - wanted)}
    assert (unpacked / "traceviz" / "py.typed").is_file()


def test_sdist_ships_no_partial_test_suite(dists):
    """The tests need ``../shared/traces`` and ``sample_traces/``: none of them ship,
    rather than the test files without their fixtures and data."""
    with tarfile.open(dists["sdist"]) as t:
        names = t.getnames()
    top = names[0].split("/")[0]
    assert not [n for n in names if n.startswith(f"{top}/tests")]
    assert f"{top}/traceviz/opcost/matrix.py" in names
    assert f"{top}/runners/torch/torch_runner.py" in names
    assert f"{top}/analyses/summary/idle_breakdown.py" in names


def test_types_check_on_the_installed_package(unpacked):
    """mypy follows traceviz.analyses / traceviz.runners through the installed layout (the
    source tree maps them from analyses/ and runners/); the package checks clean."""
    mypy = pytest.importorskip("mypy", reason="mypy is part of the test extras")
    assert mypy
    r = subprocess.run([sys.executable, "-m", "mypy", "-p", "traceviz",
                        "--ignore-missing-imports", "--cache-dir", str(unpacked / ".mypy")],
                       cwd=unpacked, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def _traceviz(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    r = run([str(venv / "bin" / "traceviz"), *args], cwd=cwd)
    assert r.returncode == 0, f"traceviz {' '.join(args)}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    return r


def test_installed_wheel_is_the_one_imported(venv, tmp_path):
    """In the fresh environment traceviz comes from the wheel, and nothing of the checkout
    (its top-level ``analyses``, ``runners``, ``tests``) is importable."""
    code = ("import importlib.util, sys, traceviz, traceviz.opcost, traceviz.runners, "
            "traceviz.analyses\n"
            "print(traceviz.__file__)\n"
            "print([m for m in ('analyses', 'runners', 'tests') "
            "if importlib.util.find_spec(m)])\n")
    r = run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where, importable = r.stdout.splitlines()
    assert Path(where).is_relative_to(venv) and not Path(where).is_relative_to(ROOT)
    assert importable == "[]"


@pytest.mark.parametrize("fmt", FORMATS)
def test_installed_wheel_analyzes_every_format(venv, tmp_path, fmt):
    """``analyze --json`` from the wheel gives the figures the checkout gives."""
    r = _traceviz(venv, tmp_path, "analyze", str(TRACES[fmt]), "--json")
    installed = json.loads(r.stdout)
    assert installed["busy_ns"] > 0 and installed["source"]["source_format"]
    ref = analyze_json(sys.executable, TRACES[fmt], tmp_path)
    assert ref.returncode == 0, ref.stderr
    assert installed == json.loads(ref.stdout)


def test_installed_wheel_runs_the_commands(venv, tmp_path):
    """report, whatif, advise, import and ``traceviz.load()`` from the wheel."""
    trace = str(shared(TRACES["kineto"]))
    _traceviz(venv, tmp_path, "report", trace, "-o", str(tmp_path / "r.md"))
    assert "| " in (tmp_path / "r.md").read_text()
    whatif = json.loads(_traceviz(venv, tmp_path, "whatif", trace, "--json").stdout)
    advise = json.loads(_traceviz(venv, tmp_path, "advise", trace, "--json").stdout)
    assert whatif and advise is not None
    _traceviz(venv, tmp_path, "import", trace, "-o", str(tmp_path / "t.parquet"))
    code = ("import sys, traceviz\n"
            "t = traceviz.load(sys.argv[1])\n"
            "print(len(t.events), int((t.events['kind'] == 'kernel').sum()))\n")
    r = run([str(venv / "bin" / "python"), "-c", code, str(tmp_path / "t.parquet")],
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows, kernels = map(int, r.stdout.split())
    import traceviz

    ref = traceviz.load(TRACES["kineto"])
    assert (rows, kernels) == (len(ref.events), int((ref.events["kind"] == "kernel").sum()))


def test_installed_wheel_captures_on_cpu(venv, tmp_path):
    """The ``[torch]`` extra: one tiny CPU capture, analysed by the wheel's own runner."""
    out = tmp_path / "run"
    _traceviz(venv, tmp_path, "capture", "--model", "cudnn_torch", *TINY, "--out", str(out))
    assert (out / "trace.parquet").is_file() and (out / "bench.json").is_file()
    figures = json.loads(_traceviz(venv, tmp_path, "analyze", str(out), "--json").stdout)
    assert figures["trace_type"] == "cpu" and figures["steps"] == 2, figures["steps"]
    assert figures["busy_ns"] > 0
