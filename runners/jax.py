"""JAX capture process: ``python -m traceviz.runners.jax --config CFG.json --out DIR``.

``scan_jax``: the fine-grained LSTM cell (``x_t W + h U + b``, gates i, f, c, o as in
Keras) stepped by ``jax.lax.scan``, the whole training or inference step under
``jax.jit``. Same workload, phases and outputs as the other runners: a benchmark phase
without the profiler, then 1 unmarked + 1 warm-up step and the active steps under
``jax.profiler`` (XSpace, the TF profiler's format), each inside
``StepTraceAnnotation("step", step_num=N)``. ``--amp fp16|bf16`` computes in that dtype
(parameters and inputs converted inside the step, the loss in float32; no loss scaling).
Writes ``jaxprofile/`` (a TensorBoard log directory), ``bench.json``, ``meta.json``.
"""

from __future__ import annotations

import sys

from traceviz.runners.benchdefs import Workload
from traceviz.runners.capture_protocol import (
    Capture,
    RunConfig,
    RunnerError,
    profile_dir,
    rss_probe,
    serve_capture,
    xplane_file,
)
from traceviz.runners.synthetic import samples_needed, synthetic_data
from traceviz.runners.usage import usage_probe


def init_params(w: Workload, seed: int) -> dict:
    """Reference LSTM weights (shared with the TF variants), embedding and head (numpy)."""
    import numpy as np

    from traceviz.runners.reference import reference_weights

    rng = np.random.default_rng(seed + 1)
    params: dict = {"lstm": reference_weights(w.input, w.hidden, w.layers, seed)}
    if w.vocab:
        params["embed"] = rng.normal(0, 0.05, (w.vocab, w.embed)).astype(np.float32)
    if w.outputs:
        bound = 1 / np.sqrt(w.hidden)
        params["head"] = (rng.uniform(-bound, bound, (w.hidden, w.outputs)).astype(np.float32),
                          np.zeros(w.outputs, np.float32))
    return params


def lstm_stack(layers: list, xs, dtype=None):
    """Time-major ``xs`` (seq, batch, in) through every layer; returns (seq, batch, h)."""
    import jax
    import jax.numpy as jnp

    for kernel, recurrent, bias in layers:
        if dtype is not None:
            kernel, recurrent, bias = (a.astype(dtype) for a in (kernel, recurrent, bias))
        hidden = recurrent.shape[0]

        def cell(carry, x_t, kernel=kernel, recurrent=recurrent, bias=bias):
            h, c = carry
            z = x_t @ kernel + h @ recurrent + bias
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((xs.shape[1], hidden), xs.dtype)
        _, xs = jax.lax.scan(cell, (zeros, zeros), xs)
    return xs


# the variants this runner builds (the registry in runners/__init__.py names the same)
MODELS = ("scan_jax",)


def _device(run: RunConfig):
    """The JAX device ``--device`` names."""
    import jax

    if run.device != "cuda":
        return jax.devices("cpu")[0]
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        raise RunnerError(f"--device cuda: this jaxlib {jax.__version__} sees no GPU "
                          "(pip install 'jax[cuda12]', or --device cpu)") from None


def _compile_events() -> dict[str, float]:
    """JAX's own compile time from now on: its tracing, lowering and backend compile
    events, seconds by event name (filled as they come)."""
    import jax

    compile_events: dict[str, float] = {}

    def on_event(event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event.startswith("/jax/core/compile/"):
            compile_events[event] = compile_events.get(event, 0.0) + duration_secs

    jax.monitoring.register_event_duration_secs_listener(on_event)
    return compile_events


def _loss_fn(w: Workload, dtype):
    """The workload's loss of ``params`` on a batch ``x``, ``y`` (computed in ``dtype``,
    the loss in float32)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params, x, y):
        h = params["embed"][x] if w.vocab else x
        h = jnp.swapaxes(h, 0, 1)  # time-major for scan
        if dtype is not None:
            h = h.astype(dtype)
        out = jnp.swapaxes(lstm_stack(params["lstm"], h, dtype), 0, 1)
        if w.head in ("lm", "classify"):
            wh, bh = params["head"]
            feats = out if w.head == "lm" else out[:, -1]
            if dtype is not None:
                wh, bh = wh.astype(dtype), bh.astype(dtype)
            logits = (feats @ wh + bh).astype(jnp.float32)
            logp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, y[..., None], axis=-1))
        pred = (out[:, -1] if w.head == "last_mse" else out).astype(jnp.float32)
        return jnp.mean((pred - y) ** 2)
    return loss_fn


def _update(w: Workload, loss_fn):
    """One training step of ``state`` (parameters, optimizer state): SGD, or Adam."""
    import jax
    import jax.numpy as jnp

    lr = w.lr
    adam = w.optimizer == "adam"

    def update(state, x, y):
        params, opt = state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        if adam:  # Adam (b1 0.9, b2 0.999, eps 1e-8), as torch.optim.Adam and Keras
            t = opt["t"] + 1
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], grads)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["v"], grads)
            scale = lr * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-8),
                                            params, m, v)
            opt = {"t": t, "m": m, "v": v}
        else:
            params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return (params, opt), loss
    return update


def _compile_bench(compile_events: dict[str, float]) -> dict:
    return {"framework_compile_s": sum(compile_events.values()) or None,
            "framework_compile_note": "jax.monitoring: " + ", ".join(sorted(compile_events))
            if compile_events else "jax.monitoring reported no compile event"}


def setup(run: RunConfig) -> Capture:
    """The JAX run of ``run``: parameters, the jit-compiled step and jax.profiler."""
    if run.model not in MODELS:
        raise RunnerError(f"{run.model}: not a JAX variant ({', '.join(MODELS)})")
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError as e:
        from traceviz.system.install_hint import pip_install

        raise RunnerError(f"JAX is not importable here ({e}); {pip_install('jax')}") \
            from None

    w, cfg = run.workload, run.cfg
    device = _device(run)
    compile_events = _compile_events()
    if w.workers > 0:
        raise RunnerError("scan_jax has no worker processes for data; --workers 0 feeds "
                          "shuffled batches from the main process")
    dtype = {"fp16": jnp.float16, "bf16": jnp.bfloat16, None: None}[run.amp]
    train = run.train
    batch = w.batch
    n = samples_needed(w, cfg)
    xs, ys = synthetic_data(w, n, run.seed)
    rng = np.random.default_rng(run.seed)
    loss_fn = _loss_fn(w, dtype)
    adam = w.optimizer == "adam"

    with jax.default_device(device):
        params = jax.tree_util.tree_map(jnp.asarray, init_params(w, run.seed))
        def zeros():  # separate buffers: the step donates its state
            return jax.tree_util.tree_map(jnp.zeros_like, params)

        state = (params, {"t": jnp.zeros((), jnp.float32), "m": zeros(), "v": zeros()}
                 if adam else {})
        step_jit = jax.jit(_update(w, loss_fn), donate_argnums=0) if train else jax.jit(loss_fn)
        order = rng.permutation(n)
        cursor = 0

        def batch_arrays():
            nonlocal cursor
            if not w.loader:
                return xs, ys
            if cursor + batch > n:
                cursor = 0
            idx = order[cursor:cursor + batch]
            cursor += batch
            return xs[idx], ys[idx]

        x, y = (jnp.asarray(a) for a in batch_arrays())

        def step() -> object:
            nonlocal state, x, y
            if w.loader:
                with jax.profiler.TraceAnnotation("data"):
                    x, y = (jnp.asarray(a) for a in batch_arrays())
            if train:
                state, loss = step_jit(state, x, y)
            else:
                loss = step_jit(state[0], x, y)
            return loss.block_until_ready()

    logdir = profile_dir(run.out / "jaxprofile")
    return Capture(
        framework="jax", version=jax.__version__, profiler="jax.profiler",
        device_name=getattr(device, "device_kind", str(device)),
        step=step, start=lambda: jax.profiler.start_trace(str(logdir)),
        stop=jax.profiler.stop_trace,
        around_step=lambda i: jax.profiler.StepTraceAnnotation("step", step_num=i),
        trace=lambda: xplane_file(logdir, "jax.profiler"),
        within=lambda: jax.default_device(device),
        min_warmup=1,  # the first call compiles
        memory=_memory_probe(device),
        usage=usage_probe((None, device.id) if device.platform == "gpu" else None),
        bench=lambda: _compile_bench(compile_events),
        meta={"compute_dtype": str(np.dtype(dtype)) if dtype is not None else "float32",
              "logdir": str(logdir)})


def _memory_probe(device) -> tuple:
    """(reset, read) of the timed phase's peak memory: the device allocator's
    ``peak_bytes_in_use`` (``memory_stats``; it cannot be reset, so it is the run's peak
    so far), else (a CPU device has no stats) the growth of the peak resident set."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if not stats or "peak_bytes_in_use" not in stats:
        return rss_probe()

    def read() -> dict:
        s = device.memory_stats() or {}
        return {"device": device.platform, "peak_allocated_bytes":
                int(s.get("peak_bytes_in_use", 0)),
                # XLA's allocator pool (by default 75% of the device), not the device's
                # memory: the trace's device plane states that
                "pool_bytes": int(s.get("bytes_limit", 0)) or None}

    return (lambda: None), read


def main(argv: list[str] | None = None) -> int:
    return serve_capture(setup, "python -m traceviz.runners.jax",
                         "capture the JAX LSTM variant (used by `traceviz capture`)", argv)


if __name__ == "__main__":
    sys.exit(main())
