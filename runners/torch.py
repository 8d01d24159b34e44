"""PyTorch capture process: ``python -m traceviz.runners.torch --config CFG.json --out DIR``.

Runs one LSTM variant on one workload: a benchmark phase without the profiler (warm-up,
then timed batches with the device synchronised), then a profiled phase under
torch.profiler with ``ProfilerStep`` markers, ``record_function`` ranges for
forward/backward/optimizer and the same ranges as NVTX (so Nsight Systems sees them).
With ``"profiler": "nsys"`` the profiled phase runs without torch.profiler, under
``nsys profile`` started by the parent, with NVTX step, phase and op ranges.
Writes ``trace.pt.trace.json.gz``, ``bench.json`` and ``meta.json`` into DIR and
reports progress to the parent as JSON lines on stdout.
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from traceviz.runners.protocol import RunnerError, bench_figures, emit, serve, timed_steps


def _batches(w: dict, cfg: dict, gen) -> Iterator[tuple]:
    """Endless (input, target) batches on the CPU: one fixed synthetic batch, or with
    ``workers >= 0`` a real DataLoader (shuffled, that many workers) over a synthetic
    dataset of enough samples for every batch of the run."""
    import torch

    seq, batch = w["seq"], w["batch"]
    batches = cfg["warmup"] + cfg["steps"] + cfg["profile_steps"] + 3
    n = batch if w.get("workers", -1) < 0 else batch * batches
    if w["vocab"]:
        xs = torch.randint(0, w["vocab"], (n, seq), generator=gen)
    else:
        xs = torch.randn(n, seq, w["input"], generator=gen)
    if w["head"] == "lm":
        ys = torch.randint(0, w["vocab"], (n, seq), generator=gen)
    elif w["head"] == "classify":
        ys = torch.randint(0, w["classes"], (n,), generator=gen)
    elif w["head"] == "last_mse":
        ys = torch.randn(n, w["hidden"], generator=gen)
    else:
        ys = torch.randn(n, seq, w["hidden"], generator=gen)

    def time_major(x: torch.Tensor, y: torch.Tensor) -> tuple:
        if y.dim() > 1 and w["head"] != "last_mse":
            y = y.transpose(0, 1).contiguous()
        return x.transpose(0, 1).contiguous(), y

    if w.get("workers", -1) < 0:
        fixed = time_major(xs, ys)
        while True:
            yield fixed
    from torch.utils.data import DataLoader, TensorDataset

    data = DataLoader(TensorDataset(xs, ys), batch_size=batch, shuffle=True, drop_last=True,
                      num_workers=w["workers"], generator=gen,
                      persistent_workers=w["workers"] > 0)
    while True:
        for xb, yb in data:
            yield time_major(xb, yb)


def _op_ranges(device, push_pop) -> contextlib.AbstractContextManager:
    """NVTX ranges named after each ATen op, for Nsight Systems captures.

    On CUDA this is torch's own ``emit_nvtx``; a CPU build of torch has no NVTX, so a
    dispatch mode pushes one range per op (``aten::mm``), the same names nsys gets from
    emit_nvtx, so the op and cast columns work on a CPU nsys capture too.
    """
    import torch

    if device.type == "cuda":
        return torch.autograd.profiler.emit_nvtx()
    from torch.utils._python_dispatch import TorchDispatchMode

    push, pop = push_pop

    class OpRanges(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if name.startswith("profiler::"):  # record_function's own bookkeeping ops
                return func(*args, **(kwargs or {}))
            push(name)
            try:
                return func(*args, **(kwargs or {}))
            finally:
                pop()

    return OpRanges()


def _onednn_lstm_works(dtype) -> bool:
    import torch

    try:
        with torch.autocast("cpu", dtype=dtype):
            torch.nn.LSTM(4, 4)(torch.randn(2, 1, 4))
        return True
    except RuntimeError:
        return False


def run(cfg: dict, out: Path) -> dict:
    import torch
    from torch import nn
    from traceviz.runners import nvtx_ranges, torch_models

    w = cfg["workload"]
    variant = cfg["model"]
    device = torch.device(cfg["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RunnerError("--device cuda: no CUDA device is visible to torch "
                          f"{torch.__version__} (use --device cpu)")
    if variant == "graph_torch" and device.type != "cuda":
        raise RunnerError("graph_torch replays CUDA graphs and needs --device cuda; "
                          "this run is on the CPU")
    amp = cfg.get("amp")
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, None: None}[amp]
    torch.manual_seed(cfg["seed"])
    train = w["mode"] == "train"

    # --- model: embedding? -> LSTM variant -> head ---------------------------------
    lstm = torch_models.build(variant, w["input"], w["hidden"], w["layers"])
    reference = nn.LSTM(w["input"], w["hidden"], w["layers"])
    lstm.load_lstm(reference)  # the same initial weights for every variant
    embed = nn.Embedding(w["vocab"], w["embed"], sparse=w["sparse_embedding"]) \
        if w["vocab"] else None
    head = {"lm": lambda: nn.Linear(w["hidden"], w["vocab"]),
            "classify": lambda: nn.Linear(w["hidden"], w["classes"])}.get(w["head"])
    head = head() if head else None
    modules = nn.ModuleDict({"lstm": lstm, **({"embed": embed} if embed else {}),
                             **({"head": head} if head else {})}).to(device)

    batch = w["batch"]
    gen = torch.Generator().manual_seed(cfg["seed"])
    batches = _batches(w, cfg, gen)
    x, target = (t.to(device) for t in next(batches))

    def loss_of(inp: torch.Tensor) -> torch.Tensor:
        h = modules["embed"](inp) if embed is not None else inp
        out, _ = modules["lstm"](h)
        if w["head"] == "lm":
            logits = modules["head"](out)
            return nn.functional.cross_entropy(logits.float().view(-1, w["vocab"]),
                                               target.view(-1))
        if w["head"] == "classify":
            return nn.functional.cross_entropy(modules["head"](out[-1]).float(), target)
        if w["head"] == "last_mse":
            return nn.functional.mse_loss(out[-1].float(), target)
        return nn.functional.mse_loss(out.float(), target)

    optimizers = []
    if train:
        params = [p for n, p in modules.named_parameters() if not n.startswith("embed.")]
        emb_params = list(embed.parameters()) if embed is not None else []
        if w["optimizer"] == "adam":
            optimizers.append(torch.optim.Adam(params, lr=w["lr"]))
            if emb_params:
                cls = torch.optim.SparseAdam if w["sparse_embedding"] else torch.optim.Adam
                optimizers.append(cls(emb_params, lr=w["lr"]))
        else:
            optimizers.append(torch.optim.SGD(params + emb_params, lr=w["lr"]))
    scaler = torch.amp.GradScaler(device.type, enabled=train and amp == "fp16")
    onednn_rnn = device.type == "cpu" and torch.backends.mkldnn.is_available()
    if (variant == "cudnn_torch" and onednn_rnn and amp_dtype is not None
            and not _onednn_lstm_works(amp_dtype)):
        # oneDNN builds reduced-precision LSTMs only with AVX512-BF16/AMX (or FP16) support
        torch.backends.mkldnn.enabled = False
        onednn_rnn = False
        emit("note", message=f"oneDNN cannot build a {amp} LSTM on this CPU; nn.LSTM runs "
                             "on ATen's native kernels (oneDNN disabled for this run)")
    nvtx = nvtx_ranges.provider(device.type == "cuda") if cfg.get("nvtx", True) else None
    profiler = cfg.get("profiler", "torch")
    if profiler == "nsys" and nvtx is None:
        raise RunnerError("--profiler nsys needs NVTX ranges and none can be emitted here: "
                          "pip install nvtx")

    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        if nvtx:
            nvtx[0](name)
        try:
            with torch.profiler.record_function(name):
                yield
        finally:
            if nvtx:
                nvtx[1]()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        # graph replay needs the autocast cache off (make_graphed_callables' rule)
        return torch.autocast(device.type, dtype=amp_dtype,
                              cache_enabled=variant != "graph_torch")

    loader = w.get("workers", -1) >= 0

    def step() -> None:
        nonlocal x, target
        if loader:  # a fresh batch through the DataLoader, inside the timed step
            with phase("data"):
                x, target = (t.to(device, non_blocking=True) for t in next(batches))
        with phase("forward"), autocast(), torch.set_grad_enabled(train):
            loss = loss_of(x)
        if train:
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            with phase("backward"):
                scaler.scale(loss).backward()
            with phase("optimizer"):
                for opt in optimizers:
                    scaler.step(opt)
                scaler.update()

    def synced_step() -> None:
        step()
        sync()

    sync()  # model set-up's device work, before the first timed step
    emit("phase", phase="warmup", total=cfg["warmup"])
    timed_steps(synced_step, cfg["warmup"], "warmup")
    emit("phase", phase="timed", total=cfg["steps"])
    t0 = time.perf_counter()
    times = timed_steps(synced_step, cfg["steps"], "timed")
    elapsed = time.perf_counter() - t0

    # --- profiled phase ---------------------------------------------------------------
    # 1 unmarked wait step and 1 warm-up step, then the active steps, numbered as
    # torch.profiler numbers them (ProfilerStep#2...), with NVTX "step N" around each
    active = cfg["profile_steps"]
    prof_times = []
    emit("phase", phase="profiled", total=active + 2)

    def profiled_steps(on_step: Callable[[], None] = lambda: None,
                       around_active: Callable[[], contextlib.AbstractContextManager] =
                       contextlib.nullcontext) -> None:
        for i in range(active + 2):
            marked = i >= 2
            ctx = around_active() if marked else contextlib.nullcontext()
            if marked and nvtx is not None:
                nvtx[0](f"step {i}")
            sync()
            t = time.perf_counter()
            with ctx:
                step()
                sync()
            if marked:
                prof_times.append(time.perf_counter() - t)
                if nvtx is not None:
                    nvtx[1]()
            on_step()
            emit("progress", phase="profiled", done=i + 1, total=active + 2)

    if profiler == "nsys":
        # nsys records the whole process from outside; the parent exports its report.
        # Op ranges only in the marked steps, as torch.profiler records only active ones.
        profiled_steps(around_active=lambda: _op_ranges(device, nvtx))
        trace_path = None
    else:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        sched = torch.profiler.schedule(wait=1, warmup=1, active=active, repeat=1)
        # record_shapes writes each op's input dtypes: a copy that changes the
        # floating-point format (an AMP cast) is then told from a device or layout copy
        with torch.profiler.profile(activities=activities, schedule=sched,
                                    record_shapes=cfg.get("record_shapes", True)) as prof:
            profiled_steps(prof.step)
        trace_path = out / "trace.pt.trace.json.gz"
        prof.export_chrome_trace(str(trace_path))

    bench = bench_figures(times, prof_times, batch, elapsed, cfg["warmup"], active)
    meta = {
        "framework": "torch",
        "framework_version": torch.__version__,
        "python": platform.python_version(),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "cpu_threads": torch.get_num_threads(),
        "nvtx": nvtx is not None,
        "profiler": profiler,
        "onednn_rnn": onednn_rnn,
    }
    (out / "bench.json").write_text(json.dumps(bench, indent=2))
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return {"bench": bench, "meta": meta, "trace": str(trace_path) if trace_path else None}


def main(argv: list[str] | None = None) -> int:
    return serve(run, "python -m traceviz.runners.torch",
                 "capture one PyTorch LSTM variant (used by `traceviz capture`)", argv)


if __name__ == "__main__":
    sys.exit(main())
