"""A real torch.profiler CPU capture made during the test run, read back by traceviz."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.conftest import needs
from tests.rawref import ns
from traceviz.analyses import summarize
from traceviz.cli import main
from traceviz.parsers import load
from traceviz.table.classify import TRIVIAL_OP

torch = needs("torch")
pytestmark = pytest.mark.capture  # every test here runs real captures


def _capture(path, amp: bool) -> None:
    torch.manual_seed(0)
    # an LSTMCell loop: oneDNN's fused bf16 LSTM needs AVX512-BF16, which CI may lack
    cell = torch.nn.LSTMCell(8, 16)
    x = torch.randn(5, 4, 8)

    def lstm(seq):
        h = c = torch.zeros(4, 16)
        for t in range(seq.shape[0]):
            h, c = cell(seq[t], (h, c))
        return (h,)

    sched = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched) as prof:
        for _ in range(3):
            with torch.profiler.record_function("forward"), \
                    torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                lstm(x)[0].float().sum()
            prof.step()
    prof.export_chrome_trace(str(path))


def _raw_work_ops(path):
    """cpu_ops (views/metadata aside) spending most of their time in themselves, over all
    their calls in the same place, not nested in another such op."""
    with open(path) as f:
        ev = [e for e in json.load(f, parse_float=Decimal)["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and not TRIVIAL_OP.match(e["name"])]
    spans = [(e["tid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in ev]

    def parent(j):
        tid, s, end = spans[j]
        around = [i for i, (t2, s2, e2) in enumerate(spans)
                  if i != j and t2 == tid and s2 <= s and end <= e2 and (s2, e2) != (s, end)]
        return max(around, key=lambda i: (spans[i][1], -spans[i][2])) if around else None

    parents = [parent(j) for j in range(len(ev))]
    dur = [e - s for _, s, e in spans]
    nested = [0] * len(ev)
    for j, p in enumerate(parents):
        if p is not None:
            nested[p] += dur[j]
    # judged over every call in the same place: the names from the root down to the op
    def place(j):
        path = []
        while j is not None:
            path.append(ev[j]["name"])
            j = parents[j]
        return tuple(path)

    places = [place(j) for j in range(len(ev))]
    own: dict = {}
    total: dict = {}
    for j, key in enumerate(places):
        own[key] = own.get(key, 0) + dur[j] - nested[j]
        total[key] = total.get(key, 0) + dur[j]
    unit = [2 * own[places[i]] >= total[places[i]] for i in range(len(ev))]

    def inside_unit(j):
        p = parents[j]
        while p is not None:
            if unit[p]:
                return True
            p = parents[p]
        return False

    return [e for j, e in enumerate(ev) if unit[j] and not inside_unit(j)]


@pytest.mark.parametrize("amp", [False, True])
def test_cpu_capture_round_trip(tmp_path, amp):
    path = tmp_path / "capture.json"
    _capture(path, amp)
    trace = load(path)
    s = summarize(trace)
    assert s.cpu_trace
    assert s.steps == 2
    leaves = _raw_work_ops(path)
    assert s.kernel_count == len(leaves)
    assert s.kernel_total_ns == sum(ns(e["dur"]) for e in leaves)
    names = set(trace.events["name"].astype(str))
    assert "forward" in names
    if amp:
        # autocast inserts aten::_to_copy casts: they must show up as cast work
        to_copy = [e for e in json.loads(path.read_text())["traceEvents"]
                   if e.get("name") == "aten::_to_copy"]
        assert s.casts.cast_ops == len(to_copy) > 0
        assert s.casts.count > 0 and s.casts.total_ns > 0
    else:
        assert s.casts.cast_ops == 0


def test_recorded_dtypes_tell_casts_from_copies(tmp_path):
    """With record_shapes (the runners turn it on), a conversion between floating-point
    formats is a cast; a same-dtype copy, an index or mask conversion is not."""
    x = torch.randn(4, 4)
    idx = torch.arange(4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        x.to(torch.bfloat16)              # cast: float -> bf16
        x.double()                        # cast: float -> double
        idx.to(torch.float32)             # int64 -> float: not a precision change
        (x > 0).to(torch.float32)         # bool -> float: a mask
        x.clone()                         # a plain copy
        torch.empty(4, 4, dtype=torch.float16).copy_(x)  # copy_ converting in place
    path = tmp_path / "dtypes.json"
    prof.export_chrome_trace(str(path))
    raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    floats = {"float", "double", "c10::Half", "c10::BFloat16"}
    codes = {5: "c10::Half", 6: "float", 7: "double", 15: "c10::BFloat16"}
    expected = 0
    for e in raw:
        types = e["args"].get("Input type", [])
        if e["name"] == "aten::_to_copy":
            dst = codes.get(int(e["args"]["Concrete Inputs"][1] or -1))
            expected += types[0] in floats and dst in floats and types[0] != dst
    copies = [e for e in raw if e["name"] == "aten::copy_"]
    standalone = [e for e in copies if e["args"]["Input type"][:2] == ["c10::Half", "float"]]
    assert expected == 2 and len(standalone) == 1
    trace = load(path)
    assert trace.meta["dtypes_recorded"] is True
    s = summarize(trace)
    assert s.casts.cast_ops == expected + len(standalone) == 3
    ops = trace.events[trace.events["kind"] == "op"]
    to_copy = ops[ops["name"] == "aten::_to_copy"]
    assert len(to_copy) == sum(e["name"] == "aten::_to_copy" for e in raw)
    assert int(to_copy["is_cast"].sum()) == expected


def test_steady_capture_has_the_same_work_in_every_step(tmp_path):
    """Whether an op is work does not depend on jitter: in a steady TorchScript forward
    capture every profiled step has the same work ops (by name and count), and the ops
    whose own share crosses 50% from one step to the next are the same in every step."""
    from collections import Counter

    from traceviz.analyses.work import work_rows
    from traceviz.trace import Trace

    out = tmp_path / "jit"
    assert main(["capture", "--model", "jit_torch", "--mode", "forward", "--batch", "16",
                 "--seq", "20", "--steps", "3", "--profile-steps", "3", "--warmup", "1",
                 "--out", str(out)]) == 0
    work = work_rows(Trace.load(out / "trace.parquet"))
    per_step = {s: Counter(g["name"].astype(str)) for s, g in work.groupby("step")
                if s >= 0}
    assert len(per_step) == 3
    first = next(iter(per_step.values()))
    assert all(c == first for c in per_step.values())
