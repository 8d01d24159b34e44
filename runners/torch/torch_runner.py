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
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from traceviz.runners.benchdefs import Workload
from traceviz.runners.capture_protocol import (
    Capture,
    RunConfig,
    RunnerError,
    cpu_name,
    emit,
    rss_probe,
    serve_capture,
)
from traceviz.runners.synthetic import samples_needed, synthetic_data
from traceviz.runners.torch.compile_time import announce_compile, compile_mode, compile_time
from traceviz.runners.torch.trace_file import export_trace
from traceviz.runners.usage import usage_probe


def _batches(w: Workload, cfg: dict, gen) -> Iterator[tuple]:
    """Endless time-major (input, target) batches on the CPU: one fixed synthetic batch,
    or with ``workers >= 0`` a real DataLoader (shuffled by ``gen``, that many workers)
    over enough synthetic samples for every batch of the run."""
    import torch

    xs, ys = (torch.from_numpy(a) for a in synthetic_data(w, samples_needed(w, cfg),
                                                          cfg["seed"]))

    def time_major(x: torch.Tensor, y: torch.Tensor) -> tuple:
        if y.dim() > 1 and w.head != "last_mse":
            y = y.transpose(0, 1).contiguous()
        return x.transpose(0, 1).contiguous(), y

    if not w.loader:
        fixed = time_major(xs, ys)
        while True:
            yield fixed
    from torch.utils.data import DataLoader, TensorDataset

    data = DataLoader(TensorDataset(xs, ys), batch_size=w.batch, shuffle=True,
                      drop_last=True, num_workers=w.workers, generator=gen,
                      persistent_workers=w.workers > 0)
    while True:
        for xb, yb in data:
            yield time_major(xb, yb)


def _onednn_lstm_works(dtype) -> bool:
    import torch

    try:
        with torch.autocast("cpu", dtype=dtype):
            torch.nn.LSTM(4, 4)(torch.randn(2, 1, 4))
        return True
    except RuntimeError:
        return False


def _modules(variant: str, w: Workload, device, options: dict | None = None):
    """Embedding (if the workload has a vocabulary) -> LSTM variant -> head, on device;
    every variant starts from nn.LSTM's initial weights for the same seed, and so do the
    embedding and head (equivalent variants then train alike: the same loss curve). A
    variant's note about the CPU is said here."""
    import torch
    from torch import nn

    from traceviz.runners.torch import variants as torch_variants

    ref = nn.LSTM(w.input, w.hidden, w.layers)
    with torch.random.fork_rng(devices=[]):  # the variant's own init draws nothing after
        lstm: Any = torch_variants.build(variant, w.input, w.hidden, w.layers, options)
    lstm.load_lstm(ref)
    parts = {"lstm": lstm}
    if w.vocab:
        parts["embed"] = nn.Embedding(w.vocab, w.embed, sparse=w.sparse_embedding)
    if w.outputs is not None:  # lm: to the vocabulary; classify: to the classes
        parts["head"] = nn.Linear(w.hidden, w.outputs)
    modules = nn.ModuleDict(parts).to(device)
    note = getattr(lstm, "cpu_note", None)
    if note and torch.device(device).type == "cpu":
        emit("note", message=f"{variant} {note}")
    return modules


def _loss(modules, w: Workload) -> Callable:
    from torch import nn

    def loss_of(inp, target):
        h = modules["embed"](inp) if "embed" in modules else inp
        out, _ = modules["lstm"](h)
        if w.head == "lm":
            logits = modules["head"](out)
            return nn.functional.cross_entropy(logits.float().view(-1, w.vocab),
                                               target.view(-1))
        if w.head == "classify":
            return nn.functional.cross_entropy(modules["head"](out[-1]).float(), target)
        if w.head == "last_mse":
            return nn.functional.mse_loss(out[-1].float(), target)
        return nn.functional.mse_loss(out.float(), target)

    return loss_of


def _optimizers(modules, w: Workload) -> list:
    """SGD over everything, or Adam (SparseAdam for a sparse embedding's gradients)."""
    import torch

    params = [p for n, p in modules.named_parameters() if not n.startswith("embed.")]
    emb_params = list(modules["embed"].parameters()) if "embed" in modules else []
    if w.optimizer != "adam":
        return [torch.optim.SGD(params + emb_params, lr=w.lr)]
    optimizers: list[torch.optim.Optimizer] = [torch.optim.Adam(params, lr=w.lr)]
    if emb_params:
        cls = torch.optim.SparseAdam if w.sparse_embedding else torch.optim.Adam
        optimizers.append(cls(emb_params, lr=w.lr))
    return optimizers


def _profiler_hooks(cfg: dict, device, out: Path):
    """(start, stop, after_step, trace path) for torch.profiler, whose own schedule
    (1 wait, 1 warm-up step) covers the unmarked steps; for nsys, which records the whole
    process from outside, nothing to start."""
    import torch

    if cfg.get("profiler", "torch") == "nsys":
        return (lambda: None), (lambda: None), (lambda: None), None
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sched = torch.profiler.schedule(wait=1, warmup=1, active=cfg["profile_steps"], repeat=1)
    # record_shapes writes each op's input dtypes: a copy that changes the
    # floating-point format (an AMP cast) is then told from a device or layout copy
    # profile_memory: the allocator's events (analyze's memory figures and chart)
    prof = torch.profiler.profile(activities=activities, schedule=sched,
                                  record_shapes=cfg.get("record_shapes", True),
                                  profile_memory=cfg.get("profile_memory", True))
    trace_path = out / "trace.pt.trace.json.gz"

    def stop() -> None:
        prof.__exit__(None, None, None)
        export_trace(prof, trace_path)  # whole or an OSError: a full disk is one line

    return prof.__enter__, stop, prof.step, trace_path


def _memory_probe(device) -> tuple[Callable[[], None], Callable[[], dict]]:
    """(reset, read) of the timed phase's peak memory: the CUDA caching allocator's
    peak allocated and reserved bytes; on a CPU the growth of the peak resident set."""
    import torch

    if device.type != "cuda":
        return rss_probe()

    def read() -> dict:
        return {"device": "cuda",
                "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
                "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
                "total_bytes": int(torch.cuda.get_device_properties(device).total_memory)}

    return (lambda: torch.cuda.reset_peak_memory_stats(device)), read


def _gpu_id(device) -> tuple[str | None, int] | None:
    """(PCI bus id, index) of the run's GPU for NVML (whose numbering ignores
    CUDA_VISIBLE_DEVICES, so the bus id is what names the same GPU); None on a CPU."""
    import torch

    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    p = torch.cuda.get_device_properties(index)
    parts = [getattr(p, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    bus = (f"{parts[0]:08X}:{parts[1]:02X}:{parts[2]:02X}.0"
           if all(isinstance(v, int) for v in parts) else None)
    return bus, index


def _refuse(run: RunConfig, device) -> bool:
    """Raise for a run this machine or variant cannot do; whether it replays a graph."""
    import torch

    if device.type == "cuda" and not torch.cuda.is_available():
        raise RunnerError("--device cuda: no CUDA device is visible to torch "
                          f"{torch.__version__} (use --device cpu)")
    if run.model == "graph_torch" and device.type != "cuda":
        raise RunnerError("graph_torch replays CUDA graphs and needs --device cuda; "
                          "this run is on the CPU")
    graph_replay = bool(run.cfg.get("graph_replay"))
    if graph_replay:
        from traceviz.runners.torch.refusals import graph_replay_refusal

        refused = graph_replay_refusal(run.model, device.type, run.workload.mode,
                                       run.cfg.get("options"))
        if refused:
            raise RunnerError(f"--graph-replay: {refused}")
    return graph_replay


def _onednn_rnn(variant: str, device, amp: str | None, amp_dtype) -> bool:
    """Whether oneDNN runs the CPU's LSTM; turned off where it cannot build ``amp``'s."""
    import torch

    onednn_rnn = device.type == "cpu" and torch.backends.mkldnn.is_available()
    if (variant == "cudnn_torch" and onednn_rnn and amp_dtype is not None
            and not _onednn_lstm_works(amp_dtype)):
        # oneDNN builds reduced-precision LSTMs only with AVX512-BF16/AMX (or FP16) support
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # a flag property
        onednn_rnn = False
        emit("note", message=f"oneDNN cannot build a {amp} LSTM on this CPU; nn.LSTM runs "
                             "on ATen's native kernels (oneDNN disabled for this run)")
    return onednn_rnn


def _nvtx(cfg: dict, device) -> tuple[Any, str]:
    """The NVTX push and pop (None without ``nvtx``, or where none can be emitted) and the
    profiler; nsys needs NVTX."""
    from traceviz.runners import nvtx_ranges

    nvtx = nvtx_ranges.provider(device.type == "cuda") if cfg.get("nvtx", True) else None
    profiler = cfg.get("profiler", "torch")
    if profiler == "nsys" and nvtx is None:
        raise RunnerError("--profiler nsys needs NVTX ranges and none can be emitted here: "
                          "pip install nvtx")
    return nvtx, profiler


def _autocast(device, amp_dtype, cache_enabled: bool) -> Callable[[], Any]:
    """A new autocast context for each step, or a null one without mixed precision."""
    import torch

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp_dtype, cache_enabled=cache_enabled)
    return autocast


def _retime(graphed) -> Callable:
    """The phases' times: the wall clock's, or a graph replay's own."""
    def retime(phases):
        if graphed is None:
            return phases, {"timing": "wall"}
        from traceviz.runners.torch.graphs import replay_phases

        return replay_phases(phases, graphed.times_s())
    return retime


def setup(run: RunConfig) -> Capture:
    """The PyTorch run of ``run``: model, data, step and torch.profiler (or nsys) hooks."""
    import torch

    from traceviz.runners.torch.step_ranges import active_step, recorded

    w, cfg, variant = run.workload, run.cfg, run.model
    device = torch.device(run.device)
    graph_replay = _refuse(run, device)
    amp = run.amp
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, None: None}[amp]
    torch.manual_seed(run.seed)
    train = run.train
    modules = _modules(variant, w, device, cfg.get("options"))
    forward, graphed = _loss(modules, w), None
    if graph_replay:  # the whole forward step (embedding, LSTM, head, loss) in one graph
        from traceviz.runners.torch.graphs import graphed_forward

        forward, graphed = graphed_forward(forward, variant)
    batches = _batches(w, cfg, torch.Generator().manual_seed(run.seed))
    x, target = (t.to(device) for t in next(batches))
    optimizers = _optimizers(modules, w) if train else []
    scaler = torch.amp.GradScaler(device.type, enabled=train and amp == "fp16")
    onednn_rnn = _onednn_rnn(variant, device, amp, amp_dtype)
    nvtx, profiler = _nvtx(cfg, device)
    ranged = recorded(nvtx)
    # graph replay needs the autocast cache off (make_graphed_callables' rule)
    autocast = _autocast(device, amp_dtype, variant != "graph_torch" and not graph_replay)
    loader = w.loader

    def step() -> Any:
        nonlocal x, target
        if loader:  # a fresh batch through the DataLoader, inside the timed step
            with ranged("data"):
                x, target = (t.to(device, non_blocking=True) for t in next(batches))
        # gradients start anew before the forward: under CUDA graph trees
        # (compile_full_torch) a .grad the last step's replay made is overwritten by this one
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        with ranged("forward"), autocast(), torch.set_grad_enabled(train):
            loss = forward(x, target)
        if train:
            with ranged("backward"):
                scaler.scale(loss).backward()
            with ranged("optimizer"):
                for opt in optimizers:
                    scaler.step(opt)
                scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize()  # a step ends when its device work has
        # read after the timed phase (.item() would sync here); a replay's loss is the
        # graph's buffer, which the next replay overwrites
        return loss.detach().clone() if graphed is not None else loss.detach()

    if device.type == "cuda":
        torch.cuda.synchronize()  # model set-up's device work, before the first timed step
    start, stop, after_step, trace_path = _profiler_hooks(cfg, device, run.out)
    mode = compile_mode(variant, modules["lstm"], device.type)
    return Capture(
        framework="torch", version=torch.__version__, profiler=profiler,
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda"
        else cpu_name(),
        step=announce_compile(step, mode) if mode else step, start=start, stop=stop,
        around_step=active_step(nvtx, device, profiler), trace=lambda: trace_path,
        after_step=after_step, profile_unmarked=True,
        memory=_memory_probe(device), usage=usage_probe(_gpu_id(device)),
        rank=getattr(modules["lstm"], "rank", None),  # factorized: its FLOPs
        bench=lambda: compile_time(variant), retime=_retime(graphed),
        meta={"cpu_threads": torch.get_num_threads(), "nvtx": nvtx is not None,
              "onednn_rnn": onednn_rnn})


def main(argv: list[str] | None = None) -> int:
    return serve_capture(setup, "python -m traceviz.runners.torch",
                         "capture one PyTorch LSTM variant (used by `traceviz capture`)", argv)


if __name__ == "__main__":
    sys.exit(main())
