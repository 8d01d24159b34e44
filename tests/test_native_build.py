"""The compiled Kineto reader as users install it: ``pip install -e .``, the sdist and the
wheel, each where a C compiler is found and where none is.

With a compiler the extension is built, imported and used. Without one the install still
succeeds (the extension is optional), ``traceviz env`` says in one note that the Python
reader is used and why, and ``traceviz import`` of a real trace writes the same table as
with it. Both are compared with the Parquet the test's own checkout writes with the Python
reader (``TRACEVIZ_READER=python``), the oracle.

"No compiler" is ``CC`` naming a file that does not exist: setuptools runs ``CC`` for
every compile (and, without ``LDSHARED``, for the link); each case checks that the build
tried it and failed, and that no extension was installed.

One virtual environment holds the dependencies (installed with the wheel built without a
compiler); each case reinstalls traceviz alone into it (``--no-deps --force-reinstall``)
before its checks, so the cases do not depend on their order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import shared
from tests.installs import TRACES, clean_env, make_venv, run, source_tree

# the wheel, the sdist and their virtual environments are built once, on one xdist worker
pytestmark = pytest.mark.xdist_group("installs")

NO_CC = "/nonexistent/traceviz-test/cc"
SOURCE = "traceviz/parsers/kineto_native.c"
TRACE = TRACES["kineto"]


def no_compiler() -> dict[str, str]:
    """An environment where setuptools finds no C compiler."""
    env = clean_env()
    env.pop("LDSHARED", None)
    env["CC"] = NO_CC
    return env


def _pip(python: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", *args], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def bare_wheel(dists, tmp_path_factory) -> Path:
    """The wheel built from the sdist where no C compiler is found."""
    out = tmp_path_factory.mktemp("bare-wheel")
    r = _pip(Path(sys.executable), "wheel", "-v", "--no-deps", "-w", str(out),
             str(dists["sdist"]), cwd=out, env=no_compiler())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert NO_CC in r.stdout + r.stderr, "the build did not try the compiler named by CC"
    wheel, = out.glob("traceviz-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(bare_wheel, tmp_path_factory) -> Path:
    """A fresh environment with traceviz's dependencies (and the wheel without the
    extension)."""
    env = tmp_path_factory.mktemp("native") / "venv"
    r = make_venv(env, str(bare_wheel))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return env


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Path:
    """The trace's Parquet by the checkout's Python reader."""
    out = tmp_path_factory.mktemp("oracle") / "t.parquet"
    r = subprocess.run([sys.executable, "-m", "traceviz", "import", str(shared(TRACE)), "-o",
                        str(out)], env={**clean_env(), "TRACEVIZ_READER": "python"},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def test_the_sdist_carries_the_source_and_the_wheel_the_extension(dists, bare_wheel):
    """The C source (and its type stub) ship in the sdist; the wheel built with a compiler
    holds the built extension and is tagged for this interpreter and platform; the one
    built without holds no binary."""
    with tarfile.open(dists["sdist"]) as t:
        names = t.getnames()
    top = names[0].split("/")[0]
    assert f"{top}/{SOURCE}" in names and f"{top}/traceviz/parsers/_kineto_native.pyi" in names
    # the parts the source includes
    assert {f"{top}/traceviz/parsers/kineto_native/{h}.h" for h in ("columns", "scan", "event")} \
        <= set(names), names
    # the interval walk's source and stub too
    assert {f"{top}/traceviz/algos/intervals_native.c",
            f"{top}/traceviz/algos/_intervals_native.pyi"} <= set(names), names
    built = zipfile.ZipFile(dists["wheel"]).namelist()
    for module in ("traceviz/parsers/_kineto_native.", "traceviz/algos/_intervals_native."):
        binaries = [n for n in built if n.startswith(module) and n.endswith(".so")]
        assert len(binaries) == 1, (module, built)
    tag = dists["wheel"].name.removesuffix(".whl").split("-")[-3:]
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert tag[0] == py and tag[1] in (py, "abi3") and tag[2] != "any", tag
    assert not [n for n in zipfile.ZipFile(bare_wheel).namelist() if n.endswith(".so")]


def _install(route: str, compiler: bool, venv: Path, dists: dict, bare_wheel: Path,
             tmp_path: Path) -> tuple[Path | None, str]:
    """traceviz alone reinstalled into ``venv`` by ``route``; the editable checkout (or
    None) and pip's output."""
    python = venv / "bin" / "python"
    env = None if compiler else no_compiler()
    src = None
    if route == "wheel":
        target = str(dists["wheel"] if compiler else bare_wheel)
    elif route == "sdist":
        target = str(dists["sdist"])
    else:
        src = source_tree(tmp_path / "src")
        target = str(src)
    args = ["-e", target] if route == "editable" else [target]
    r = _pip(python, "install", "-v", "--no-deps", "--force-reinstall", *args, cwd=tmp_path,
             env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return src, r.stdout + r.stderr


def _in_venv(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    r = run([str(venv / "bin" / "traceviz"), *args], cwd=cwd)
    assert r.returncode == 0, f"traceviz {' '.join(args)}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    return r


WHERE = ("import importlib.util, json\n"
         "from traceviz.parsers.kineto import native\n"
         "from traceviz.algos import intervals\n"
         "spec = importlib.util.find_spec('traceviz.parsers._kineto_native')\n"
         "walk = importlib.util.find_spec('traceviz.algos._intervals_native')\n"
         "print(json.dumps([native.reader(), spec.origin if spec else None,\n"
         "                  walk.origin if walk else None, intervals._walk is not None]))\n")


@pytest.mark.parametrize("compiler", [True, False], ids=["compiler", "no-compiler"])
@pytest.mark.parametrize("route", ["editable", "sdist", "wheel"])
def test_install(route, compiler, venv, dists, bare_wheel, oracle, tmp_path):
    """Install by ``route`` with or without a compiler: which reader is used, what ``traceviz
    env`` says of it, and the Parquet of a real trace (the oracle's, value for value)."""
    src, log = _install(route, compiler, venv, dists, bare_wheel, tmp_path)
    built_here = route != "wheel"
    if built_here and not compiler:  # the build tried the missing compiler, and went on
        assert NO_CC in log and "Python reader will be used" in log, log[-3000:]
    r = run([str(venv / "bin" / "python"), "-c", WHERE], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    reader, origin, walk, walk_used = json.loads(r.stdout)
    home = src if route == "editable" else venv
    if compiler:  # both extensions built and used
        assert reader == "native" and origin is not None and walk_used
        assert Path(origin).is_relative_to(home) and Path(walk).is_relative_to(home), origin
    else:  # neither: the Python reader and the numpy interval search
        assert reader == "python" and origin is None and walk is None and not walk_used
        so = list((src or venv).rglob("_kineto_native*.so")) \
            + list((src or venv).rglob("_intervals_native*.so"))
        assert not so, so
    r = _in_venv(venv, tmp_path, "env")
    env = r.stdout + r.stderr  # a note: on stderr
    notes = [line for line in env.splitlines() if "Kineto reader" in line]
    assert len(notes) == 1, env
    if compiler:
        assert "compiled" in notes[0], notes
    else:
        assert "Python" in notes[0] and "not built" in notes[0] and "compiler" in notes[0], notes
    out = tmp_path / "t.parquet"
    _in_venv(venv, tmp_path, "import", str(shared(TRACE)), "-o", str(out))
    got, want = pq.read_table(out), pq.read_table(oracle)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want), "the table differs from the Python reader's"
    meta = b"traceviz"
    assert got.schema.metadata.get(meta) == want.schema.metadata.get(meta)
