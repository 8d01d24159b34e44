from __future__ import annotations

import atexit
import functools
import importlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what other projects recorded, beside the checkout (never committed): tests reach it
# through ``shared`` below, which skips a test whose file is not there
SHARED = ROOT.parent / "shared"
# the real H200 run folders (raw traces and bench.json, no Parquet)
H200 = SHARED / "gpu-h200"
SHARED_TRACES = SHARED / "traces"
KINETO = SHARED_TRACES / "kineto"

# The real traces the tests read, by folder of ../shared/traces (its README.md says where
# each comes from). Only these: anything else placed there (a README, result files, run
# folders) is not a trace the tests know the figures of.
SHARED_TRACE_FILES: dict[str, tuple[str, ...]] = {
    "kineto": (
        "a100_80gb_queue.json.gz", "a100_alexnet.json.gz", "a100_cupti_counters.json.gz",
        "a100_diff_control.json.gz", "a100_event_sync.json.gz", "a100_nccl.json.gz",
        "a100_triton_culaunchkernel.json.gz", "ampere_sampled_rank0.json.gz",
        "ampere_sampled_rank1.json.gz", "cpu_only.json.gz", "mi250_rocm_train.json.gz",
        "v100_19k_kernels.json.gz", "v100_diff_test.json.gz", "v100_ns_resolution.json.gz"),
    "nsys": ("h100_2gpu_mfu_after.sqlite", "h100_2gpu_mfu_before.sqlite",
             "h100_2gpu_window.sqlite", "rtx3080_tiny.sqlite"),
    "xplane": ("tf24_bert_amp_gpu.xplane.pb.gz",),
}


@functools.cache
def shared_parquet(folder: str, name: str) -> Path:
    """A trace of ``../shared/traces`` imported into a Parquet events table by traceviz
    itself, once per test process (traces from other projects are read from ../shared,
    never committed; tests that need their table make it)."""
    from traceviz.parsers import load

    src = shared(SHARED_TRACES / folder / name)
    out = Path(tempfile.mkdtemp(prefix="traceviz-shared-")) / (name.split(".")[0] + ".parquet")
    atexit.register(shutil.rmtree, out.parent, True)
    return load(src).save(out)


def shared_traces(folder: str | None = None) -> list[Path]:
    """The known real traces (of one folder of ``../shared/traces``, or all), sorted."""
    folders = [folder] if folder else list(SHARED_TRACE_FILES)
    return sorted(SHARED_TRACES / f / name for f in folders for name in SHARED_TRACE_FILES[f])


# .ci/run sets this: there a missing framework or tool is a broken install, and a test
# that needs it fails instead of being skipped
REQUIRE = os.environ.get("TRACEVIZ_REQUIRE_FRAMEWORKS") == "1"


def missing(reason: str) -> None:
    """Skip the test (or module) for a framework or tool this machine lacks; fail in CI."""
    if REQUIRE:
        pytest.fail(f"{reason} (TRACEVIZ_REQUIRE_FRAMEWORKS=1: CI installs it)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def shared(path: Path | str) -> Path:
    """``path``, a file or folder under ``../shared``, when it is there; else the test (or
    module) is skipped with one reason naming it, as ``missing`` (a failure in CI, which runs
    beside ../shared: there nothing may skip for want of it)."""
    p = Path(path)
    if not _under_shared(p):
        raise ValueError(f"{p} is not under {SHARED}")
    if not p.exists():
        rel = p.relative_to(SHARED).as_posix()
        missing(f"needs ../shared/{rel} (traces from other projects, see README)")
    return p


def shared_argv(argv: list[str]) -> list[str]:
    """A command line, each argument that names a path under ../shared checked by
    ``shared`` (a test running a command on a trace of other projects)."""
    for arg in argv:
        if _under_shared(arg):
            shared(arg)
    return argv


def _under_shared(value: object) -> bool:
    return isinstance(value, (str, Path)) and Path(value).is_absolute() \
        and Path(value).is_relative_to(SHARED)


def _shared_params(value: object) -> list[Path | str]:
    """The paths under ../shared a test parameter names (itself, or in a list or tuple)."""
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _shared_params(v)]
    return [value] if _under_shared(value) else []


def needs(module: str):
    """``module`` imported, or ``missing`` (the test extras install every framework)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing(f"{module} is not importable ({e}); pip install -e '.[test]'")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA device (a GPU test: CONTRIBUTING.md lists them)")
    for mark in item.iter_markers("requires"):
        absent, reason = mark.args
        if absent:
            missing(reason)
    # files of ../shared the test reads: named by its marks, or by a parameter (a trace
    # parametrized over)
    for mark in item.iter_markers("shared"):
        for path in mark.args:
            shared(path)
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        for path in _shared_params(value):
            shared(path)


@pytest.fixture(scope="session")
def kineto_dir() -> Path:
    return shared(KINETO)


@pytest.fixture(scope="session")
def dists(tmp_path_factory) -> dict[str, Path]:
    """``python -m build`` on a clean copy of the source: the sdist, then the wheel from
    the sdist (a stale ``build/lib`` or egg-info in the checkout cannot reach either)."""
    from tests.installs import build, source_tree

    src = source_tree(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    r = build(src, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sdist, = out.glob("traceviz-*.tar.gz")
    wheel, = out.glob("traceviz-*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="session")
def floor_venv(dists, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel alone (no extra: no torch, DuckDB, Ray),
    every dependency at its floor (``.ci/constraints-floor.txt``)."""
    from tests.installs import FLOOR_CONSTRAINTS, make_venv

    env = tmp_path_factory.mktemp("floors") / "venv"
    r = make_venv(env, "-c", str(FLOOR_CONSTRAINTS), str(dists["wheel"]))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return env


@pytest.fixture(scope="session")
def h200() -> Path:
    """The H200 run folders (skipped without them, as ``shared``)."""
    shared(H200 / "fused_torch" / "bench.json")
    return H200
