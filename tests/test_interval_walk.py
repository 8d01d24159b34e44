"""The compiled interval walk (``traceviz/algos/intervals_native.c``) against its oracle,
``innermost_enclosing_numpy``: random intervals (nested or not, ties, empty and negative
lengths, several groups) with plain and excluding queries, the op trees of real traces,
bad arguments refused in one line, and a run under AddressSanitizer and
UndefinedBehaviorSanitizer."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import KINETO, ROOT, missing, shared
from tests.fuzz_native import SANITIZER_EXIT, _runtime, build, compiler, sanitizer_env
from traceviz.algos import intervals
from traceviz.algos.intervals import innermost_enclosing, innermost_enclosing_numpy


def _built():
    if intervals._walk is None:
        missing("the compiled interval walk is not built here (pip install -e . with a C "
                "compiler)")
    return intervals._walk


@st.composite
def cases(draw):
    n = draw(st.integers(0, 30))
    q = draw(st.integers(0, 30))
    groups = draw(st.integers(1, 4))
    span = draw(st.integers(1, 40))
    ints = st.integers
    g = np.array(draw(st.lists(ints(0, groups - 1), min_size=n, max_size=n)), np.int64)
    s = np.array(draw(st.lists(ints(0, span), min_size=n, max_size=n)), np.int64)
    d = np.array(draw(st.lists(ints(-2, span), min_size=n, max_size=n)), np.int64)
    qg = np.array(draw(st.lists(ints(0, groups), min_size=q, max_size=q)), np.int64)
    qt = np.array(draw(st.lists(ints(-1, span + 2), min_size=q, max_size=q)), np.int64)
    return g, s, s + d, qg, qt


@settings(max_examples=400, deadline=None)
@given(cases())
def test_the_walk_answers_as_numpy(case):
    _built()
    g, s, e, qg, qt = case
    assert np.array_equal(innermost_enclosing(g, s, e, qg, qt),
                          innermost_enclosing_numpy(g, s, e, qg, qt))
    # each interval asking for its parent (excluding itself), beside plain queries
    n = len(s)
    ex = np.concatenate([np.arange(n), np.full(len(qt), -1)])
    both = (g, s, e, np.concatenate([g, qg]), np.concatenate([s, qt]), ex)
    assert np.array_equal(innermost_enclosing(*both), innermost_enclosing_numpy(*both))


def test_a_hand_made_tree():
    """Two threads: an outer op [0, 100) holding [10, 40) and [10, 20) (equal starts: the
    shorter is the inner), a partly overlapping [30, 120), and the other thread's [5, 50)."""
    _built()
    g = np.array([0, 0, 0, 0, 1])
    s = np.array([0, 10, 10, 30, 5])
    e = np.array([100, 40, 20, 120, 50])
    qg = np.array([0, 0, 0, 0, 0, 1, 1, 2])
    qt = np.array([15, 35, 100, 110, 120, 5, 50, 7])
    # 15: inside [10, 20); 35: [30, 120) started last; 100: the outer ended, [30, 120)
    # holds it; 120: nothing (ends are open); thread 1: 5 yes, 50 no; group 2: none
    want = [2, 3, 3, 3, -1, 4, -1, -1]
    assert innermost_enclosing(g, s, e, qg, qt).tolist() == want
    assert innermost_enclosing_numpy(g, s, e, qg, qt).tolist() == want
    # [30, 120)'s parent: the latest-starting one open at 30, [10, 40)
    for f in (innermost_enclosing, innermost_enclosing_numpy):
        assert f(g, s, e, g, s, q_exclude=np.arange(5)).tolist() == [-1, 0, 1, 1, -1]


def test_an_exclusion_away_from_its_start_is_numpys(monkeypatch):
    """An excluding query at another time than its interval's start is not the walk's
    question: numpy answers it."""
    walk = _built()
    calls = []
    monkeypatch.setattr(intervals, "_walk", type("W", (), {
        "innermost": staticmethod(lambda *a: calls.append(1) or walk.innermost(*a))}))
    g, s, e = np.zeros(3, np.int64), np.array([0, 5, 8]), np.array([20, 15, 9])
    got = innermost_enclosing(g, s, e, np.zeros(2, np.int64), np.array([8, 12]),
                              q_exclude=np.array([2, 1]))
    assert got.tolist() == [1, 0] and not calls
    innermost_enclosing(g, s, e, np.zeros(1, np.int64), np.array([8]))
    assert calls == [1]


@pytest.mark.parametrize("bad, says", [
    ("short", "start: expected 3 int64 values"),
    ("float", "group: expected int64 values"),
    ("q_id", "q_id: an index outside out"),
    ("ex_off", "ex_off: not the offsets of ex_id"),
])
def test_bad_arguments_are_refused(bad, says):
    walk = _built()
    i64 = np.int64
    args = [np.zeros(3, i64), np.arange(3, dtype=i64), np.arange(1, 4, dtype=i64),
            np.zeros(2, i64), np.array([0, 1], i64), np.array([0, 1], i64),
            np.zeros(4, i64), np.zeros(0, i64), np.full(2, -1, i64)]
    if bad == "short":
        args[1] = args[1][:2]
    elif bad == "float":
        args[0] = args[0].astype(float)
    elif bad == "q_id":
        args[5] = np.array([0, 5], i64)
    else:
        args[6] = np.array([0, 0, 0, 1], i64)
    with pytest.raises(ValueError, match=says):
        walk.innermost(*args)


@pytest.mark.shared(KINETO)
@pytest.mark.parametrize("name", ["a100_diff_control.json.gz", "v100_19k_kernels.json.gz"])
def test_real_op_trees_alike(name, monkeypatch):
    """The import of a real trace: every column the same with the walk and without it
    (the op around each launch and each op's parent come from it)."""
    _built()
    from traceviz.parsers import load

    path = shared(KINETO / name)
    with_walk = load(path).events
    monkeypatch.setattr(intervals, "_walk", None)
    without = load(path).events
    assert len(with_walk) > 10_000
    assert with_walk.equals(without)
    assert (with_walk["op"].astype(str) != "nan").sum() > 0


CHILD = """
import importlib.machinery, importlib.util, sys
import numpy as np
loader = importlib.machinery.ExtensionFileLoader("traceviz.algos._intervals_native", sys.argv[1])
spec = importlib.util.spec_from_file_location(loader.name, sys.argv[1], loader=loader)
mod = importlib.util.module_from_spec(spec); loader.exec_module(mod)
from traceviz.algos import intervals
intervals._walk = mod
rng = np.random.default_rng(int(sys.argv[2]))
for k in range(int(sys.argv[3])):
    n, q, G, T = (int(x) for x in rng.integers(0, [300, 300, 6, 400]) + [0, 0, 1, 1])
    g, s = rng.integers(0, G, n), rng.integers(0, T, n)
    e = s + rng.integers(-3, T, n)
    qg, qt = rng.integers(0, G + 1, q), rng.integers(-2, T + 3, q)
    ex = np.concatenate([np.arange(n), np.full(q, -1)])
    for a in ((g, s, e, qg, qt), (g, s, e, np.concatenate([g, qg]), np.concatenate([s, qt]), ex)):
        if not np.array_equal(intervals.innermost_enclosing(*a),
                              intervals.innermost_enclosing_numpy(*a)):
            sys.exit(f"mismatch at case {k}")
    try:  # refused arguments: freed and reported, no access past an end
        mod.innermost(g, s[:max(n - 1, 0)], e, qg, qt, qt, np.zeros(n + 1, np.int64),
                      np.zeros(0, np.int64), np.zeros(q, np.int64))
    except ValueError:
        pass
print("cases", k + 1)
"""


@pytest.mark.slow
def test_the_walk_under_sanitizers():
    """Built with ASan and UBSan (as the reader's fuzz builds the reader), thousands of
    random cases give numpy's answers with no sanitizer report."""
    cc = compiler()
    if cc is None:
        missing("no C compiler (CC, gcc or cc): the interval walk cannot be built under "
                "the sanitizers")
    if not os.path.isabs(_runtime(cc, "libasan.so")):
        missing(f"{cc} has no AddressSanitizer runtime (libasan.so)")
    with tempfile.TemporaryDirectory(prefix="walk-asan-") as d:
        target = build(cc, Path(d), ROOT / "traceviz" / "algos" / "intervals_native.c",
                       "_intervals_native")
        r = subprocess.run([sys.executable, "-c", CHILD, str(target), "7", "3000"], cwd=ROOT,
                           env=sanitizer_env(cc), capture_output=True, text=True, timeout=600)
    assert r.returncode != SANITIZER_EXIT, r.stderr[-6000:]
    assert r.returncode == 0 and "cases 3000" in r.stdout, r.stdout + r.stderr[-6000:]
