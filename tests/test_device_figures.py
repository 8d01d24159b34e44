"""One figure per thing on the XSpace runs: the device's memory from the device (not XLA's
allocator pool), TF32 kernels recognized in an XLA run, and kernel launches counted one
way. Expected figures come from the raw XSpace protobuf and bench.json."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

from tests.conftest import H200, SHARED_TRACES, shared
from traceviz.cli import main

SCAN_JAX = H200 / "scan_jax"
CHESS = SHARED_TRACES / "foreign" / "xplane" / "chess_tf_20210616-112936.xplane.pb"


def _space(path: Path):
    from traceviz.parsers.xspace.messages import xspace_class

    space = xspace_class()()
    raw = path.read_bytes()
    space.ParseFromString(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return space


def _stats(plane, stats) -> dict:
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    out = {}
    for s in stats:
        which = s.WhichOneof("value")
        out[names[s.metadata_id]] = names.get(s.ref_value) if which == "ref_value" \
            else getattr(s, which)
    return out


def _events(plane):
    """(name, line id, duration ps, stats) of every event of a plane."""
    names = {k: m.name for k, m in plane.event_metadata.items()}
    for line in plane.lines:
        for e in line.events:
            yield names[e.metadata_id], line.id, e.duration_ps, _stats(plane, e.stats)


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_device_memory_is_the_devices_and_the_pool_is_named(capsys):
    space = _space(shared(SCAN_JAX / "vm.xplane.pb.gz"))
    gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
    stated = int(_stats(gpu, gpu.stats)["memory_size"])
    assert stated > 139 * 2**30  # the H200's 139.8 GiB
    bench = json.loads(shared(SCAN_JAX / "bench.json").read_text())["memory"]
    pool, peak = bench["total_bytes"], bench["peak_allocated_bytes"]  # XLA's bytes_limit
    assert pool < stated
    out = _json(capsys, "analyze", str(shared(SCAN_JAX)), "--json")
    mem = out["memory"]["bench"]
    assert mem["total_bytes"] == stated and mem["pool_bytes"] == pool
    assert main(["analyze", str(SCAN_JAX), "--width", "200"]) == 0
    text = capsys.readouterr().out
    gib = f"{stated / 2**30:.2f} GiB"
    assert f"of the device's {gib}" in text
    assert f"the allocator's pool (XLA's limit) {pool / 2**30:.2f} GiB" in text
    assert main(["advise", str(SCAN_JAX), "--width", "200"]) == 0
    text = capsys.readouterr().out
    assert f"uses 1/{stated // peak} of the device's memory" in text
    assert f"of {gib}" in text and f"of {pool / 2**30:.2f} GiB" not in text


def test_tf32_kernels_of_an_xla_run_are_recognized(capsys):
    space = _space(shared(SCAN_JAX / "vm.xplane.pb.gz"))
    gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
    gemm = Counter()
    for name, _, ps, _ in _events(gpu):
        if "gemm" in name.lower():
            gemm["tf32" if re.search(r"tf32|s1688gemm", name) else "unsaid"] += ps
    assert gemm["tf32"] > 0 and gemm["unsaid"] > 0  # cuBLAS/CUTLASS TF32, XLA's fusions
    share = gemm["tf32"] / (gemm["tf32"] + gemm["unsaid"])
    out = _json(capsys, "analyze", str(shared(SCAN_JAX)), "--json")
    notes = " ".join(out["efficiency"]["notes"])
    assert "ran FP32" not in notes
    assert f"ran TF32 by the names that say a precision ({share:.0%} of matrix" in notes
    assert out["efficiency"]["run"]["peak_key"] == "tf32"  # MFU against the TF32 peak


def test_kernel_launches_are_counted_one_way(capsys):
    # CUPTI's host events carry a correlation id, the kernel's name and the thread (the
    # line); a kernel launch is one whose device event ran on a compute stream
    space = _space(shared(CHESS))
    host = next(p for p in space.planes if p.name == "/host:CPU")
    gpu = next(p for p in space.planes if p.name == "/device:GPU:0")
    lines = {line.id: line.name for line in gpu.lines}
    device = {st["correlation_id"]: lines[line] for _, line, _, st in _events(gpu)
              if "correlation_id" in st}
    per_thread = Counter(line for _, line, _, st in _events(host)
                         if "Memcpy" not in device.get(st.get("correlation_id"), "Memcpy"))
    total, (top, top_calls) = sum(per_thread.values()), per_thread.most_common(1)[0]
    assert len(per_thread) > 1
    assert main(["analyze", str(CHESS), "--width", "200"]) == 0
    text = capsys.readouterr().out
    launches = next(line for line in text.splitlines() if line.startswith("launches"))
    assert f"{total:,} kernel launch calls ({total:,} reached a kernel) on " \
           f"{len(per_thread)} host threads ({top_calls:,} on thread {top}, whose API " \
           "calls are above)" in launches
    api = next(line for line in text.splitlines() if line.startswith("top API calls"))
    assert "cuLaunchKernel" in api and f"({top_calls})" in api and "alone" in api
