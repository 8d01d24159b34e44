"""MXNet Gluon capture process: ``PYTHON runners/mxnet_gluon.py --config CFG.json --out DIR``.

Runs in its own interpreter, the one that has ``mxnet==1.9.1`` (which needs numpy<1.24
and so cannot share traceviz's environment): it imports nothing from traceviz, reads the
workload from the config and speaks the same JSON-lines protocol as the PyTorch runner.
Model: embedding (when the preset has a vocabulary) -> ``gluon.rnn.LSTM`` (MXNet's fused
RNN operator) -> head, run imperatively. A benchmark phase without the profiler, then a
profiled phase under ``mx.profiler`` with one profiler task ``step N`` per active step.
Writes ``trace.mxnet.json``, ``bench.json`` and ``meta.json`` into DIR.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

# capture_protocol.py, benchdefs.py, usage.py (stdlib) and synthetic.py (numpy):
# nothing else from traceviz
sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_protocol import (  # noqa: E402
    Capture,
    RunConfig,
    RunnerError,
    cpu_name,
    rss_probe,
    serve_capture,
)
from synthetic import samples_needed, synthetic_data  # noqa: E402
from usage import usage_probe  # noqa: E402

# operators one by one in the profile, not fused into "ImperativeBulk" segments
for _var in ("MXNET_EXEC_BULK_EXEC_TRAIN", "MXNET_EXEC_BULK_EXEC_INFERENCE"):
    os.environ.setdefault(_var, "0")


# the variants this runner builds (the registry in runners/__init__.py names the same)
MODELS = ("gluon_mxnet",)


def _context(run: RunConfig):
    """The MXNet context ``--device`` names."""
    import mxnet as mx

    if run.device != "cuda":
        return mx.cpu()
    if mx.context.num_gpus() == 0:
        raise RunnerError("--device cuda: this MXNet build sees no GPU (the PyPI "
                          "mxnet wheel is CPU-only)")
    return mx.gpu(0)


def _net(w):
    """Embedding (with a vocabulary) -> LSTM (time-major) -> the workload's head."""
    from mxnet import gluon

    class Net(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__()
            with self.name_scope():
                self.embed = gluon.nn.Embedding(w.vocab, w.embed,
                                                sparse_grad=w.sparse_embedding) \
                    if w.vocab else None
                self.lstm = gluon.rnn.LSTM(w.hidden, num_layers=w.layers, layout="TNC",
                                           input_size=w.input)
                self.head = gluon.nn.Dense(w.outputs, flatten=False) if w.outputs else None

        def hybrid_forward(self, F, x):  # noqa: N803 (Gluon's signature)
            h = self.embed(x) if self.embed is not None else x
            out = self.lstm(h)
            if w.head == "lm":
                return self.head(out)
            if w.head == "classify":
                return self.head(F.squeeze(F.slice_axis(out, axis=0, begin=-1, end=None),
                                           axis=0))
            if w.head == "last_mse":
                return F.squeeze(F.slice_axis(out, axis=0, begin=-1, end=None), axis=0)
            return out
    return Net()


def _batches(run: RunConfig, ctx) -> Iterator:
    """The batches, time-major on ``ctx``: one fixed batch, or a DataLoader with
    ``workers`` processes over a dataset."""
    from mxnet import gluon, nd

    w = run.workload
    xs, ys = synthetic_data(w, samples_needed(w, run.cfg), run.seed)
    xs, ys = xs.astype("float32"), ys.astype("float32")  # Gluon's embedding takes floats

    def time_major(x, y):
        x = nd.swapaxes(x, 0, 1)
        if y.ndim > 1 and w.head != "last_mse":
            y = nd.swapaxes(y, 0, 1)
        return x.as_in_context(ctx), y.as_in_context(ctx)

    def batches():
        if not w.loader:
            fixed = time_major(nd.array(xs), nd.array(ys))
            while True:
                yield fixed
        data = gluon.data.DataLoader(gluon.data.ArrayDataset(xs, ys), batch_size=w.batch,
                                     shuffle=True, last_batch="discard",
                                     num_workers=w.workers)
        while True:
            for xb, yb in data:
                yield time_major(xb, yb)
    return batches()


def _profiler(trace_path: Path) -> tuple[Callable, Callable]:
    """mx.profiler writing ``trace_path``: each active step a task "step N" of its
    own domain, and the stop that dumps the trace."""
    import mxnet as mx

    mx.profiler.set_config(profile_all=True, aggregate_stats=False, filename=str(trace_path))
    domain = mx.profiler.Domain("traceviz")

    @contextlib.contextmanager
    def task(i: int):
        t = domain.new_task(f"step {i}")
        t.start()
        yield
        t.stop()

    def stop() -> None:
        mx.profiler.set_state("stop")
        mx.profiler.dump()
    return task, stop


def setup(run: RunConfig) -> Capture:
    """The MXNet run of ``run``: the Gluon model, its imperative step and mx.profiler."""
    if run.model not in MODELS:
        raise RunnerError(f"{run.model}: not an MXNet variant ({', '.join(MODELS)})")
    try:
        import mxnet as mx
    except ImportError as e:
        raise RunnerError(f"this interpreter ({sys.executable}) cannot import mxnet ({e}); "
                          "create one with `traceviz env mxnet`") from None
    from mxnet import autograd, gluon, nd

    w = run.workload
    if run.amp:
        raise RunnerError("gluon_mxnet runs in fp32 only (MXNet's AMP is not wired in)")
    ctx = _context(run)
    mx.random.seed(run.seed)
    train = run.train
    batch = w.batch
    net = _net(w)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    # imperative, not hybridized: a hybridized block's profile shows only anonymous
    # "ImperativeBulk" segments (seen with and without static_alloc), no operator names
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss() if w.head in ("lm", "classify") \
        else gluon.loss.L2Loss()
    trainer = gluon.Trainer(net.collect_params(), w.optimizer,
                            {"learning_rate": w.lr}) if train else None
    feed = _batches(run, ctx)

    def step() -> object:
        x, y = next(feed)
        if train:
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(batch)  # type: ignore[union-attr]  # set whenever train
        else:
            loss = loss_fn(net(x), y)
        nd.waitall()  # MXNet is asynchronous: time the work, not the enqueueing
        return loss  # per sequence: averaged after the timed phase

    # profiled phase: 2 unmarked steps, then the active steps as profiler tasks "step N"
    trace_path = run.out / "trace.mxnet.json"
    task, stop = _profiler(trace_path)
    return Capture(
        framework="mxnet", version=mx.__version__, profiler="mx.profiler",
        device_name=cpu_name() if ctx.device_type == "cpu" else f"gpu {ctx.device_id}",
        step=step, start=lambda: mx.profiler.set_state("run"),
        stop=stop,
        around_step=task, trace=lambda: trace_path,
        memory=rss_probe(),
        usage=usage_probe((None, ctx.device_id) if run.device == "cuda" else None),
        loss=lambda v: float(v.mean().asscalar()),  # per sequence: averaged here
        bench=lambda: {"framework_compile_s": None,
                       "framework_compile_note": "imperative Gluon compiles nothing"},
        meta={"numpy_version": __import__("numpy").__version__,
              "interpreter": sys.executable, "hybridized": False})


def main(argv: list[str] | None = None) -> int:
    return serve_capture(setup, "mxnet_gluon.py",
                         "capture the Gluon LSTM (used by `traceviz capture`)", argv)


if __name__ == "__main__":
    sys.exit(main())
