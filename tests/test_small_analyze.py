"""What keeps a small trace's ``analyze`` fast, each kept exact: the literal gate in front of
the classification patterns, ``np.unique`` by sorting, and the modules an analyze of one
trace does not import (the time itself: ``benchmarks/fast.py``, never timed here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED_TRACES, shared
from traceviz.algos.patterns import Gated, required_literals
from traceviz.algos.unique import unique, unique_first, unique_inverse, unique_text_inverse
from traceviz.parsers import load
from traceviz.table.classify import _CATEGORY_PATTERNS, _NOISE, CAST_KERNEL, COLLECTIVE_KINDS

KINETO = SHARED_TRACES / "kineto" / "a100_diff_control.json.gz"
NSYS = SHARED_TRACES / "nsys" / "h100_2gpu_window.sqlite"
PATTERNS = [*_CATEGORY_PATTERNS, ("cast", CAST_KERNEL), *COLLECTIVE_KINDS]


def test_required_literals_are_what_every_match_holds():
    rx = re.compile(r"flash_?(fwd|bwd)|(?-i:[dw]grad)|^aten::(mm|addmm)$|[xy]\d+", re.I)
    assert required_literals(rx) is None  # [xy]\d+: a branch without a literal
    rx = re.compile(r"flash_?(fwd|bwd)|(?-i:[dw]grad)|^aten::(mm|addmm)$", re.I)
    assert required_literals(rx) == ("aten::", "flash", "grad")
    # a repeat at least once, a lookahead: their text is in any match
    assert required_literals(re.compile(r"(ab){2}|c(?=def)")) == ("ab", "def")
    assert required_literals(re.compile(r"(ab)?c")) == ("c",)  # an optional part is not


def test_the_gate_finds_what_the_pattern_finds_on_real_names():
    """Every distinct name of two real traces (kernels, ops, runtime calls), as recorded,
    in upper case and with a non-ASCII letter that case-folds to an ASCII one (the Kelvin
    sign, which ``re`` matches to ``k``): gated and plain searches agree."""
    names = [_NOISE.sub("", str(n)) for n in pd.unique(pd.concat(
        [load(shared(t)).events["name"].astype(object) for t in (KINETO, NSYS)]).dropna())]
    assert len(names) >= 400
    texts = names + [n.upper() for n in names] + [n + "\u212a" for n in names[:50]] + [
        "ncclKernel_AllReduce", "FMHA_FWD", "\u212aernel", "void cutlass::Kernel<x>"]
    for cat, rx in PATTERNS:
        gate = Gated(rx)
        assert gate.literals, cat  # every classification pattern gets a gate
        wrong = [t[:80] for t in texts if bool(gate.search(t)) != bool(rx.search(t))]
        assert not wrong, (cat, wrong)
    # the gate lets a matching name through, and stops most names before the pattern
    gemm = Gated(dict(_CATEGORY_PATTERNS)["gemm"])
    assert gemm.search("ampere_sgemm_128x64_nn") is not None
    attention = Gated(dict(_CATEGORY_PATTERNS)["attention"])
    assert sum(any(lit in t.lower() for lit in attention.literals or ()) for t in names) \
        < len(names) / 10


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 62), 1 << 62) | st.integers(-3, 3), max_size=60))
def test_unique_is_numpys(values):
    x = np.array(values, dtype=np.int64)
    assert np.array_equal(unique(x), np.unique(x))
    for mine, theirs in ((unique_first(x), np.unique(x, return_index=True)),
                         (unique_inverse(x), np.unique(x, return_inverse=True))):
        for a, b in zip(mine, theirs, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["fp16", "fp32", "bf16", "", "FP16", "é", "a b"]),
                min_size=1, max_size=40))
def test_unique_text_is_numpys(values):
    x = np.array(values, dtype=object)
    (a, i), (b, j) = unique_text_inverse(x), np.unique(x, return_inverse=True)
    assert list(a) == list(b) and np.array_equal(i, j) and i.dtype == j.dtype


# what an analyze of one trace never uses: the capture machinery and the runners (other
# commands' arguments), the ranks' analyses, Parquet (no table read or written), the
# plotting and report libraries, the frameworks
NOT_IMPORTED = ("traceviz.capture", "traceviz.runners.presets", "traceviz.analyses.compare.ranks",
                "traceviz.cli.capture", "traceviz.cli.whatif", "traceviz.cli.report",
                "pyarrow.parquet", "pyarrow.dataset", "matplotlib", "bokeh", "scipy",
                "duckdb", "polars", "torch", "tensorflow", "jax", "ray")
# and, for a Kineto trace, the other formats' readers (reading the format's name, or
# setting how NVTX ranges are read, imports none of them)
NOT_IMPORTED_KINETO = ("traceviz.parsers.nsys.nsys_reader", "traceviz.parsers.nsys.ranges_sql",
                       "traceviz.parsers.mxnet", "traceviz.parsers.xspace", "sqlite3")


@pytest.mark.parametrize("trace", [KINETO, NSYS])
def test_a_small_analyze_imports_nothing_it_does_not_use(trace):
    """The start-up a small trace's analyze pays: none of ``NOT_IMPORTED`` (and for a
    Kineto trace none of ``NOT_IMPORTED_KINETO``) is imported, for the terminal tables
    and for --json."""
    unused = NOT_IMPORTED + (NOT_IMPORTED_KINETO if trace == KINETO else ())
    code = ("import sys, io, contextlib\nfrom traceviz.cli import main\n"
            "for extra in ([], ['--json']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        assert main(['analyze', sys.argv[1], *extra]) == 0\n"
            f"print(sorted(m for m in sys.modules if m.startswith({unused!r})))")
    out = subprocess.run([sys.executable, "-c", code, str(shared(trace))], capture_output=True,
                         text=True, check=True, cwd=Path(__file__).parent.parent).stdout
    assert out.strip().splitlines()[-1] == "[]"



def test_every_command_is_listed_under_its_own_name():
    """The CLI imports a command's module when it runs (``COMMAND_MODULES``): each entry
    names the class whose ``name`` it is listed under."""
    from traceviz.cli import COMMAND_MODULES, command_class

    assert len({name for name, _, _ in COMMAND_MODULES}) == len(COMMAND_MODULES) == 13
    for name, _, _ in COMMAND_MODULES:
        assert command_class(name).name == name
