"""Pieces joined straight into time order (``traceviz/parsers/joined.py``) against what
they replace: ``pd.concat`` of the pieces, ``first_seen_order`` of the text columns, then
a stable sort by ``ts_ns``; on one thread and on the threads of a large import."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pandas.api.types import union_categoricals

from traceviz.parsers.joined import first_seen_order, in_time_order, moved_by_time


def _pieces(seed: int, sizes: list[int]) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(sizes):
        out.append(pd.DataFrame({
            "ts_ns": rng.integers(0, max(n // 3, 2), n),  # many equal times: stability
            "name": pd.Categorical(rng.choice([f"op{i}" for i in range(k, k + 9)], n)),
            "kind": pd.Categorical(rng.choice(["kernel", "op"], n),
                                   categories=["kernel", "op", "step"]),
            "dur_ns": rng.integers(0, 10**6, n),
            "stream": rng.integers(-1, 8, n).astype(np.int32),
            "text": pd.array(rng.choice(["x", "y", None], n), dtype="string"),
        }))
    return out


def _oracle(frames: list[pd.DataFrame]) -> pd.DataFrame:
    names = first_seen_order(union_categoricals([f["name"].array for f in frames]))
    base = pd.concat(frames, ignore_index=True)
    base["name"] = names
    return base.sort_values("ts_ns", kind="stable", ignore_index=True)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    for c in ("name", "kind"):  # the categories, in their order, not only the values
        assert list(got[c].cat.categories) == list(want[c].cat.categories), c


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(1, 200), min_size=1, max_size=6))
def test_small_pieces_join_as_concat_then_sort(seed, sizes):
    frames = _pieces(seed, sizes)
    want = _oracle([f.copy() for f in frames])
    _same(in_time_order(frames, ("name",)), want)
    assert frames == []  # the pieces are let go


@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_import_on_threads(threads):
    """Past 65,536 rows the columns are joined on the import's threads: the same frame."""
    frames = _pieces(7, [30_000, 25_000, 20_000, 5_000])
    want = _oracle([f.copy() for f in frames])
    got = in_time_order(frames, ("name",), threads=threads)
    _same(got, want)
    assert len(got) == 80_000 and got["ts_ns"].is_monotonic_increasing


def test_moved_by_time_sorts_only_when_needed():
    ordered = pd.DataFrame({"ts_ns": [1, 2, 2, 5], "v": [4, 3, 2, 1]})
    values = ordered["v"].to_numpy()
    got = moved_by_time(ordered)
    assert got["v"].tolist() == [4, 3, 2, 1] and list(ordered.columns) == []
    assert np.shares_memory(got["v"].to_numpy(), values)  # not copied
    shuffled = pd.DataFrame({"ts_ns": [5, 1, 2, 1]}, index=[3, 9, 4, 0])
    got = moved_by_time(shuffled)
    assert got["ts_ns"].tolist() == [1, 1, 2, 5] and list(got.index) == [0, 1, 2, 3]
    assert list(shuffled.columns) == []


def test_one_piece_is_typed_as_several_are():
    """The readers hold a piece's names as object categories; several pieces joined have
    them as ``str`` (``union_categoricals`` infers it): one piece is typed the same, so a
    trace read whole is the table read in pieces, dtypes included."""
    def piece(names: list[str], start: int) -> pd.DataFrame:
        cats = pd.Index(np.array(sorted(set(names)), dtype=object), dtype=object)
        return pd.DataFrame({"ts_ns": np.arange(start, start + len(names)),
                             "name": pd.Categorical(names, categories=cats)})

    names = ["b", "a", "b", "c", "a", "d"]
    one = in_time_order([piece(names, 0)], ("name",))
    two = in_time_order([piece(names[:3], 0), piece(names[3:], 3)], ("name",))
    pd.testing.assert_frame_equal(one, two)
    assert one["name"].cat.categories.dtype != object
    assert list(one["name"].cat.categories) == ["b", "a", "c", "d"]  # first seen
    mixed = pd.DataFrame({"ts_ns": [0, 1], "name": pd.Categorical(["a", 1])})
    assert in_time_order([mixed], ("name",))["name"].cat.categories.dtype == object
