"""Launch calls without kernel records: a GPU trace whose device time is unknown, not a CPU
trace. Figures recomputed from the raw JSON with plain ``json`` (not traceviz's parser)."""

from __future__ import annotations

import json

import pytest
from conftest import KINETO, SHARED_TRACES, shared

from traceviz.analyses.advice.advising import advise
from traceviz.analyses.summary.figures import summarize
from traceviz.errors import InputError
from traceviz.parsers import load

ZOOLOGY = SHARED_TRACES / "foreign" / "kineto" / "zoology_trace.json"
DEEPSEEK = SHARED_TRACES / "foreign" / "kineto" / "deepseek_v3_train.json"
COUNTERS = KINETO / "a100_cupti_counters.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _raw(path):
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _raw_launches(events: list[dict]) -> int:
    """Host calls that launch a kernel, runtime or driver: the CUDA/HIP launch entry points
    by name (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, hipLaunchKernel,
    hipExtModuleLaunchKernel, graph launches...)."""
    host = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    return sum("LaunchKernel" in e["name"] or e["name"].endswith("GraphLaunch")
               for e in host)


@pytest.fixture(scope="module")
def zoology():
    return load(shared(ZOOLOGY))


def test_zoology_is_a_gpu_trace_without_its_kernels(zoology):
    raw = _raw(shared(ZOOLOGY))
    launches = _raw_launches(raw)
    # the raw file: 236 cudaLaunchKernel and 24 cuLaunchKernel (cuFFT), no device row
    assert sum(e["name"] == "cudaLaunchKernel" for e in raw) == 236
    assert launches == 236 + 24
    assert not any(e.get("cat") in DEVICE_CATS for e in raw)
    assert not zoology.is_cpu and zoology.kernel_activity_missing
    assert zoology.kernel_launch_calls == launches
    s = summarize(zoology, with_efficiency=True)
    d = s.to_dict()
    assert s.kernel_activity_missing and d["trace_type"] == "gpu"
    assert d["kernel_activity"] == {"launches": launches, "kernels": 0, "missing": True}
    # no FLOP rate from host time: no op group, no rate, the reason instead
    eff = d["efficiency"]
    assert eff["groups"] == [] and eff["run"]["tflops_busy"] is None
    assert eff["reason"].startswith("no kernel records")
    assert d["framework_overhead_fraction"] is None


def test_analyze_says_it_in_one_line(zoology, capsys):
    from traceviz.cli import main

    assert main(["analyze", str(shared(ZOOLOGY)), "--width", "200"]) == 0
    out = capsys.readouterr().out
    n = _raw_launches(_raw(ZOOLOGY))
    line = f"{n} kernel launches, no kernel records: the trace was taken without CUDA activity"
    assert out.count(line) == 1
    assert "TFLOP/s" not in out and "framework overhead" not in out
    assert "CPU ops" not in out and "CPU trace" not in out


def test_advise_names_the_missing_activity_first_and_alone(zoology):
    findings, _ = advise(zoology)
    assert findings[0].rule == "no_kernel_activity"
    assert findings[0].figures == {"launches": _raw_launches(_raw(shared(ZOOLOGY))), "kernels": 0}
    assert "ProfilerActivity.CUDA" in findings[0].action
    # no computation rule judges a trace without device time (the benchmark's may)
    assert {f.rule for f in findings[1:]} <= {"noisy", "profiled_unlike_timed"}


def test_nothing_to_replay(zoology):
    from traceviz.analyses.whatif.engine import whatif

    with pytest.raises(InputError, match="no kernel records"):
        whatif(zoology)


def test_a_counter_session_is_the_same():
    """A CUPTI counter session records launches and no activity either."""
    t = load(shared(COUNTERS))
    raw = _raw(COUNTERS)
    assert not any(e.get("cat") in DEVICE_CATS for e in raw)
    assert t.kernel_activity_missing and t.kernel_launch_calls == _raw_launches(raw) > 0
    assert advise(t)[0][0].rule == "no_kernel_activity"


def test_a_trace_with_its_kernels_is_not_missing_them():
    t = load(shared(DEEPSEEK))
    raw = _raw(DEEPSEEK)
    kernels = sum(e.get("cat") == "kernel" for e in raw)
    assert not t.kernel_activity_missing and not t.is_cpu
    d = summarize(t).to_dict()
    assert d["kernel_activity"] == {"launches": _raw_launches(raw), "kernels": kernels,
                                    "missing": False}
    assert all(f.rule != "no_kernel_activity" for f in advise(t)[0])


def test_a_cpu_trace_stays_one():
    t = load(shared(KINETO / "cpu_only.json.gz"))
    assert t.is_cpu and not t.kernel_activity_missing and t.kernel_launch_calls == 0
