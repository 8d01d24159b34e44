"""The classification table against >= 80 real kernel and op names (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED_TRACES, shared
from traceviz import load
from traceviz.table.classify import cast_kernel_flags, category_codes, precision_change
from traceviz.table.schema import CATEGORIES

TABLE = Path(__file__).parent / "data" / "kernel_names.tsv"


def _table() -> pd.DataFrame:
    rows = [line.rstrip("\n").split("\t") for line in TABLE.read_text().splitlines()
            if line and not line.startswith("#")]  # names hold "#" ({lambda()#1})
    return pd.DataFrame(rows, columns=["category", "source", "name"])


def _final(names: pd.Index) -> list[str]:
    """What a kernel row gets: cast when the name shows a conversion, else its category."""
    cats = [CATEGORIES[c] for c in category_codes(names)]
    return ["cast" if c else cat for c, cat in zip(cast_kernel_flags(names), cats, strict=True)]


def test_every_real_name_gets_its_category():
    t = _table()
    assert len(t) >= 80
    # memcpy: a CUDA graph's copy node run as a kernel (memset rows are never kernels)
    assert set(t["category"]) == set(CATEGORIES) - {"memset"}
    got = _final(pd.Index(t["name"]))
    wrong = [(n[:80], want, g) for n, want, g in zip(t["name"], t["category"], got, strict=True)
             if want != g]
    assert not wrong


def test_names_said_to_come_from_shared_traces_are_in_them_with_that_category():
    t = _table()
    from_shared = t[t["source"].str.startswith("shared ")]
    assert len(from_shared) >= 25
    for source, rows in from_shared.groupby("source"):
        trace = load(shared(SHARED_TRACES / source.removeprefix("shared ")))
        k = trace.kernels()
        by_name = k.groupby(k["name"].astype(str), observed=True)["category"].agg(
            lambda c: set(c.astype(str)))
        for r in rows.itertuples():
            assert r.name in by_name.index, (source, r.name[:80])
            # an op that casts can make a copy kernel a cast; the name's own category
            # is among the categories its rows got
            assert r.category in by_name[r.name] or r.category == "cast", (source, r.name[:80])


@pytest.mark.parametrize("name, category", [
    # gemm must not swallow these (issue: fbgemm embedding kernels, permute_*, BiasAddGrad)
    ("void fbgemm_gpu::bounds_check_indices_kernel<long, false>(int)", "other"),
    ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int)", "elementwise"),
    ("BiasAddGrad", "reduction"),
    ("Conv2DBackpropInput", "gemm"),
    ("convert", "other"),                  # an XLA convert is a cast, not a Conv op
    ("_finalize_matmul_scatter_bf16", "elementwise"),
])
def test_gemm_is_not_a_substring_match(name, category):
    assert CATEGORIES[category_codes(pd.Index([name]))[0]] == category


@pytest.mark.parametrize("src, dst, change", [
    ("float", "c10::BFloat16", 1), ("c10::Half", "float", 1), ("float", "double", 1),
    ("float", "c10::Float8_e4m3fn", 1), ("float", "float", 0), ("long int", "float", 0),
    ("bool", "float", 0), ("int", "long int", 0), ("", "float", -1),
])
def test_precision_change(src, dst, change):
    assert precision_change(src, dst) == change


def test_groups_and_per_distinct_categorical_follow_the_rows():
    """The column helpers the analyses use in place of per-group frame copies."""
    import numpy as np
    import pandas as pd

    from traceviz.algos.categorical import groups, per_distinct_categorical

    values = np.array([3, 1, 3, -1, 1, 3])
    assert [(v, idx.tolist()) for v, idx in groups(values)] == [
        (-1, [3]), (1, [1, 4]), (3, [0, 2, 5])]
    assert groups(np.zeros(0, np.int64)) == []
    names = pd.Series(["cudaLaunchKernel", None, "cudaMemcpyAsync", "cudaLaunchKernel"],
                      dtype="category")
    out = per_distinct_categorical(names, lambda u: [n[4:] if "Launch" in n else None
                                                    for n in u.tolist()])
    assert out.tolist()[0] == "LaunchKernel" and out.tolist()[3] == "LaunchKernel"
    assert pd.isna(out.tolist()[1]) and pd.isna(out.tolist()[2])
    assert list(out.categories) == ["LaunchKernel"]


def test_codes_helpers_agree_with_text_on_real_tables():
    """``schema.is_in`` reads the kind/category codes; ``from_used_codes`` builds a
    categorical of the categories in use: both equal their pandas spellings."""
    import numpy as np

    from traceviz.algos.categorical import from_used_codes
    from traceviz.table.schema import DEVICE_KINDS, is_in

    ev = load(shared(SHARED_TRACES / "kineto" / "a100_nccl.json.gz")).events
    for kinds in (("kernel",), DEVICE_KINDS, ("step", "op"), ("nope",)):
        want = ev["kind"].astype(str).isin(kinds).to_numpy()
        assert (is_in(ev["kind"], *kinds) == want).all(), kinds
        assert (is_in(ev["kind"].astype(str), *kinds) == want).all()  # a text column
    comm = ev["category"].astype(object).eq("communication").to_numpy()
    assert comm.sum() > 0 and (is_in(ev["category"], "communication") == comm).all()
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 50):
        categories = np.array([f"c{i}" for i in range(n)] + ["z"], dtype=object)
        codes = rng.integers(-1, len(categories), 300).astype(np.int32)
        codes[rng.random(300) < 0.5] = -1
        for c in (codes, np.full(300, -1, np.int32)):  # some categories used, or none
            want = pd.Categorical.from_codes(c, categories=categories).remove_unused_categories()
            got = from_used_codes(c, categories)
            assert got.equals(want) and list(got.categories) == list(want.categories)
            assert got.dtype == want.dtype


@pytest.mark.parametrize("name, kind", [
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "send_recv"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "all_reduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "reduce_scatter"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "broadcast"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
     "all_reduce"),
    ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(float*)",
     "all_reduce"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)", "dispatch"),
    ("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)",
     "combine"),
    ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*)", "notify"),
    ("void dpsk::ep::internode::cached_notify<false>(int, int)", "notify"),
    ("gloo:all_reduce", "all_reduce"), ("gloo:broadcast", "broadcast"),
    ("c10d::allreduce_", "all_reduce"), ("c10d::alltoall_base_", "all_to_all"),
    ("c10d::_allgather_base_", "all_gather"), ("c10d::_reduce_scatter_base_", "reduce_scatter"),
    ("nccl:all_to_all", "all_to_all"), ("record_param_comms", "other"),
    ("all-reduce-start.3", "all_reduce"), ("collective-permute-done", "permute"),
    ("all-to-all.1", "all_to_all"), ("reduce-scatter.2", "reduce_scatter"),
    ("nvshmemi_barrier_all_kernel", "barrier"),
    ("volta_sgemm_128x64_nn", None), ("recv_kernel_fusion", None),
])
def test_collective_kind(name, kind):
    from traceviz.table.classify import collective_kind

    assert collective_kind(name) == kind


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab.kd fgem[]clone0123456789_\u0663\u00b2", max_size=24))
def test_names_without_noise_skip_the_noise_pattern(name):
    """``_text`` tries the noise pattern only on names holding "fbgemm" or ".kd" or
    ending in a digit: the same text as running it on every name."""
    from traceviz.table import classify
    from traceviz.table.names import bounded

    assert classify._text(name) == classify._NOISE.sub("", bounded(name))
    for noisy in ("fbgemm_gpu::" + name, name + " [clone .kd]", name + ".kd", name + ".12"):
        assert classify._text(noisy) == classify._NOISE.sub("", bounded(noisy))
