"""Interval union, launch delay, launch-bound fraction and op links on hand-built traces."""

from __future__ import annotations

import numpy as np
import pytest

from tests.handmade import row, trace
from traceviz.algos.intervals import (
    innermost_enclosing,
    max_overlap_in_windows,
    overlaps_windows,
    union_blocks,
    union_blocks_by_group,
    union_length,
)
from traceviz.analyses import summarize


def test_union_overlapping_nested_and_disjoint():
    s = np.array([0, 5, 6, 20, 30])
    e = np.array([10, 8, 12, 25, 30])  # [0,10)+[5,8)+[6,12) -> [0,12); [20,25); empty
    assert union_length(s, e) == 12 + 5
    assert union_length(np.array([], np.int64), np.array([], np.int64)) == 0


def test_union_blocks_by_group_is_each_groups_union():
    # group 0: [0,10)+[5,8)+[10,12) -> [0,12) (touching joins); group 1: [3,4), [6,9)
    # (a group's blocks never merge with another's); group 2: only an empty interval
    g = np.array([1, 0, 0, 1, 2, 0, 1])
    s = np.array([6, 5, 0, 3, 7, 10, 7])
    e = np.array([8, 8, 10, 4, 7, 12, 9])
    bg, bs, be = union_blocks_by_group(g, s, e)
    assert bg.tolist() == [0, 1, 1]
    assert bs.tolist() == [0, 3, 6]
    assert be.tolist() == [12, 4, 9]
    rng = np.random.default_rng(7)
    g = rng.integers(0, 5, 400)
    s = rng.integers(0, 1000, 400)
    e = s + rng.integers(-5, 60, 400)
    bg, bs, be = union_blocks_by_group(g, s, e)
    for k in range(5):
        ws, we = union_blocks(s[g == k], e[g == k])
        assert bs[bg == k].tolist() == ws.tolist()
        assert be[bg == k].tolist() == we.tolist()


def test_union_is_order_independent():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 1000, 200)
    e = s + rng.integers(0, 50, 200)
    covered = np.zeros(1100, bool)
    for a, b in zip(s, e, strict=True):
        covered[a:b] = True
    assert union_length(s, e) == covered.sum()
    perm = rng.permutation(200)
    assert union_length(s[perm], e[perm]) == covered.sum()


def test_window_overlap_and_depth_against_a_time_grid():
    # every nanosecond of a small timeline counted by hand: which intervals overlap the
    # windows, and the most intervals open at once inside them
    rng = np.random.default_rng(1)
    for _ in range(400):
        bounds = np.sort(rng.choice(np.arange(0, 100), 2 * rng.integers(0, 5), replace=False))
        ws, we = bounds[0::2], bounds[1::2]
        in_window = np.zeros(120, bool)
        for a, b in zip(ws, we, strict=True):
            in_window[a:b] = True
        n = int(rng.integers(0, 25))
        s = rng.integers(0, 110, n)
        e = s + rng.integers(-3, 20, n)
        expect = np.array([in_window[a:max(a, b)].any() for a, b in zip(s, e, strict=True)],
                          bool)
        assert np.array_equal(overlaps_windows(s, e, ws, we), expect)
        depth = np.zeros(120, np.int64)
        for a, b in zip(s, e, strict=True):
            depth[max(a, 0):max(b, 0)] += 1
        assert max_overlap_in_windows(s, e, ws, we) == int(depth[in_window].max(initial=0))


def test_innermost_enclosing_per_thread():
    # thread 1: A [0,100) > B [10,50) > C [20,30); D [60,70). thread 2: E [0,1000)
    group = np.array([1, 1, 1, 1, 2])
    start = np.array([0, 10, 20, 60, 0])
    end = np.array([100, 50, 30, 70, 1000])
    q_group = np.array([1, 1, 1, 1, 1, 2, 3])
    q_time = np.array([25, 40, 55, 65, 150, 500, 5])
    got = innermost_enclosing(group, start, end, q_group, q_time)
    assert list(got) == [2, 1, 0, 3, -1, 4, -1]
    # parents: exclude the interval itself
    parents = innermost_enclosing(group, start, end, group, start, q_exclude=np.arange(5))
    assert list(parents) == [-1, 0, 1, 0, -1]


def test_two_streams_overlap_launch_delay_and_bound_fraction():
    t = trace(
        row("op", "aten::mm", 0, 100),
        row("runtime", "cudaLaunchKernel", 10, 5, corr=1),
        row("op", "aten::add", 200, 100),
        row("runtime", "cudaLaunchKernel", 210, 20, corr=2),
        row("runtime", "cudaLaunchKernel", 260, 5, corr=3),      # launch with no kernel
        row("kernel", "volta_sgemm_128x64_nn", 40, 300, corr=1, stream=7),
        row("kernel", "vectorized_elementwise_kernel", 250, 150, corr=2, stream=8),
        row("kernel", "orphan_kernel", 900, 100, corr=99, stream=7),  # no launch row
    )
    k = t.kernels().set_index("name")
    assert k.loc["volta_sgemm_128x64_nn", "launch_delay_ns"] == 40 - 15
    assert k.loc["vectorized_elementwise_kernel", "launch_delay_ns"] == 250 - 230
    assert k.loc["volta_sgemm_128x64_nn", "op"] == "aten::mm"
    assert k.loc["vectorized_elementwise_kernel", "op"] == "aten::add"
    assert k["launch_delay_ns"].isna().tolist() == [False, False, True]
    s = summarize(t)
    # busy: [40,340) U [250,400) U [900,1000) = 360 + 100
    assert s.busy_ns == 460
    # span: first launch (10) to last device end (1000)
    assert s.span_ns == 990
    assert s.idle_fraction == pytest.approx(1 - 460 / 990)
    assert s.launches.kernel.count == 3
    assert s.launches.kernel.matched == 2
    assert s.launches.unlaunched_kernels == 1
    assert s.launches.short_kernels == 0
    assert s.launches.kernel.api_share == pytest.approx(30 / 990)
    assert s.categories.set_index("category").loc["gemm", "total_ns"] == 300
    # pending: k1 [15, 40), k2 [230, 250) (inside k1's run); the orphan runs after its
    # stream's first launched kernel, so its launch time is unknown: not pending
    assert s.queued_idle_ns == 25
    assert s.host_wait_ns == 990 - (460 + 25)
    assert s.launch_bound_fraction == pytest.approx((990 - 485) / 990)
    d = s.devices[0]
    assert d.queue_mean == pytest.approx((25 + 20) / 990) and d.queue_max == 1
    streams = d.streams.set_index("stream")
    assert streams.loc[7, "busy_ns"] == 300 + 100 and streams.loc[8, "busy_ns"] == 150
    # stream 8 is idle until k2 starts: [10, 230) waiting for the host, [230, 250) queued
    assert streams.loc[8, "queued_idle_ns"] == 20
    assert streams.loc[8, "host_wait_ns"] == 990 - 150 - 20


def test_steps_scope_busy_and_span_per_step():
    t = trace(
        row("step", "ProfilerStep#3", 0, 100, step=3),
        row("step", "ProfilerStep#4", 100, 100, step=4),
        row("runtime", "cudaLaunchKernel", 10, 5, corr=1),
        row("runtime", "cudaLaunchKernel", 90, 5, corr=2),
        row("runtime", "cudaLaunchKernel", 150, 5, corr=3),
        row("kernel", "k1", 20, 30, corr=1),
        row("kernel", "k2", 95, 30, corr=2),   # launched in step 3, runs into step 4
        row("kernel", "k3", 160, 10, corr=3),
    )
    k = t.kernels().set_index("name")
    assert list(k["step"]) == [3, 3, 4]
    s = summarize(t)
    assert s.scope == "steps" and s.steps == 2
    # windows never overlap: step 3 is [0, 100), where step 4 begins; step 4, the last,
    # ends at the later of its marker (200) and its last kernel (170). Busy time is
    # clipped to the windows: k2 counts 5 ns in step 3 and 25 ns in step 4.
    assert s.span_ns == 100 + 100
    assert s.busy_ns == (30 + 5) + (25 + 10) == s.trace_busy_ns
    per = s.devices[0].per_step
    assert list(per["busy_ns"]) == [35, 35]
    assert list(per["span_ns"]) == [100, 100]


def test_short_kernels_and_graph_launch():
    t = trace(
        row("runtime", "cudaGraphLaunch", 0, 50, corr=5),
        row("kernel", "a", 60, 10, corr=5),
        row("kernel", "b", 75, 100, corr=5),
    )
    s = summarize(t)
    assert s.launches.kernel.count == 0
    g = s.launches.graphs
    assert (g.count, g.kernels, g.kernel_ns) == (1, 2, 110)
    assert g.first_delay.median_ns == 10
    # a (10 ns) is shorter than the 50 ns graph launch, but graph kernels share one
    # launch: they are kept out of the short-kernel figure; b's delay runs from a's end
    assert s.launches.short_kernels == 0 and s.launches.delay.count == 2
    assert sorted(t.kernels()["launch_delay_ns"].astype(int)) == [5, 10]


def test_nsys_style_suffixes_are_launches():
    t = trace(
        row("runtime", "cudaLaunchKernel_ptsz_v7000", 0, 5, corr=1),
        row("kernel", "k", 10, 10, corr=1),
    )
    assert list(t.kernels()["launch_api"]) == ["cudaLaunchKernel"]


@pytest.mark.parametrize("api", ["cudaGraphLaunch_v10000", "cuGraphLaunch",
                                 "cudaGraphLaunch_ptsz_v10000"])
def test_nsys_graph_launches_are_graph_launches(api):
    """nsys spells the graph launch with its API version (and per-thread suffix) or as
    the driver call: one call, the kernels its correlation id ran, each timed from the
    graph's kernel before it."""
    t = trace(
        row("runtime", api, 0, 40, corr=9),
        row("kernel", "a", 50, 10, corr=9),
        row("kernel", "b", 63, 10, corr=9),
        row("kernel", "c", 80, 5, corr=9),
    )
    s = summarize(t)
    g = s.launches.graphs
    assert (g.count, g.kernels, g.kernel_ns) == (1, 3, 25)
    assert s.launches.kernel.count == 0
    assert sorted(t.kernels()["launch_delay_ns"].astype(int)) == [3, 7, 10]


def test_trivial_children_do_not_hide_work():
    t = trace(
        row("op", "aten::mm", 0, 100),
        row("op", "aten::resolve_conj", 5, 1),
        row("op", "aten::t", 200, 10),
        row("op", "aten::transpose", 201, 5),
    )
    s = summarize(t)
    assert list(s.kernels["name"]) == ["aten::mm"]
    assert s.kernel_total_ns == 100


def test_small_nested_ops_belong_to_their_caller():
    t = trace(
        row("op", "aten::lstm", 0, 1000),
        row("op", "aten::mkldnn_rnn_layer", 10, 900),
        row("op", "aten::zeros", 20, 30),
        row("op", "aten::zero_", 25, 20),
        row("op", "aten::copy_", 60, 40),
    )
    s = summarize(t)
    assert list(s.kernels["name"]) == ["aten::mkldnn_rnn_layer"]
    assert s.kernel_total_ns == 900
    assert s.categories.set_index("category").loc["rnn", "total_ns"] == 900


def test_cpu_trace_leaf_ops_and_casts():
    t = trace(
        row("op", "aten::linear", 0, 100),
        row("op", "aten::addmm", 10, 80),
        row("op", "aten::to", 100, 50),
        row("op", "aten::_to_copy", 105, 40),
        row("op", "aten::empty_strided", 106, 4),
        row("op", "aten::copy_", 112, 30),
        row("op", "aten::copy_", 200, 10),  # a plain copy, not a cast
    )
    s = summarize(t)
    assert s.cpu_trace
    # addmm, the copy_ under _to_copy (a cast), the lone copy_; empty_strided allocates;
    # linear, to and _to_copy spend most of their time in nested ops
    assert sorted(zip(s.kernels["name"], s.kernels["category"], strict=True)) == [
        ("aten::addmm", "gemm"), ("aten::copy_", "cast"), ("aten::copy_", "elementwise")]
    assert s.casts.count == 1 and s.casts.total_ns == 30
    assert s.casts.cast_ops == 1
    assert s.busy_ns == 80 + 30 + 10
    assert s.span_ns == 210


def test_work_ops_do_not_flip_between_steps():
    """The jit_torch forward case: aten::addmm spends 11.4 of 17.6 ms in itself in one
    step and 8.7 of 18.7 ms in the next two (its nested copy takes the rest). Judged
    call by call it was work in the first step only; judged over its calls in the same
    place (28.8 of 55.0 ms, 52%) it is work in all three, and its copies inside it never
    are."""
    import pandas as pd

    from traceviz.algos.optree import work_op_mask

    rows = []
    for step, (total, own) in enumerate([(17.6, 11.4), (18.7, 8.7), (18.7, 8.7)]):
        t0 = step * 100_000_000
        rows += [("aten::linear", t0, 20_000_000),
                 ("aten::addmm", t0 + 1_000_000, int(total * 1e6)),
                 ("aten::copy_", t0 + 1_000_000 + int(own * 1e6), int((total - own) * 1e6))]
    ops = pd.DataFrame(rows, columns=["name", "ts_ns", "dur_ns"]).assign(pid=1, tid=1)
    work = ops[work_op_mask(ops)]
    assert list(work["name"]) == ["aten::addmm"] * 3
