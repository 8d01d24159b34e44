"""TensorFlow capture process: ``python -m traceviz.runners.tensorflow --config CFG --out DIR``.

Runs one TF/Keras 3 LSTM variant (``runners/tensorflow/keras_lstms.py``) on one workload: a
benchmark phase without the profiler (warm-up, then timed batches, each ending with the loss
copied to the host so the device work is done), then a profiled phase under the
TensorFlow profiler: one unmarked step, one warm-up step, then the active steps, each
inside ``tf.profiler.experimental.Trace("step", step_num=N, _r=1)`` and numbered as
torch.profiler numbers them (2, 3...). ``--amp`` sets a Keras mixed-precision policy
(``mixed_float16`` with loss scaling, ``mixed_bfloat16``). Writes the profile log
directory ``tfprofile/`` (TensorBoard reads it; the ``.xplane.pb`` inside is the raw
trace), ``bench.json`` and ``meta.json`` into DIR.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from traceviz.runners.benchdefs import Workload
from traceviz.runners.capture_protocol import (
    Capture,
    RunConfig,
    RunnerError,
    cpu_name,
    profile_dir,
    rss_probe,
    serve_capture,
    xplane_file,
)
from traceviz.runners.synthetic import samples_needed, synthetic_data
from traceviz.runners.usage import usage_probe

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # C++ INFO/WARNING lines: to the log


def _data(w: Workload, cfg: dict, tf) -> Iterator[tuple]:
    """Endless (input, target) batches, batch-major as Keras wants them: one fixed
    synthetic batch, or with ``workers >= 0`` a shuffled tf.data pipeline over enough
    samples for every batch of the run (``workers`` > 0: that many prefetched)."""
    xs, ys = (tf.constant(a) for a in synthetic_data(w, samples_needed(w, cfg),
                                                       cfg["seed"]))
    if not w.loader:
        while True:
            yield xs, ys
    data = (tf.data.Dataset.from_tensor_slices((xs, ys))
            .shuffle(len(xs), seed=cfg["seed"]).batch(w.batch, drop_remainder=True).repeat())
    if w.workers > 0:
        data = data.prefetch(w.workers)
    yield from data


def _exec_mode(run: RunConfig, tf) -> tuple[str, list]:
    """The variant's execution (``--exec``, where it may choose) and the GPUs TensorFlow
    sees (none visible for ``--device cpu``)."""
    from traceviz.runners.tensorflow import keras_lstms as tf_models

    variant = run.model
    exec_mode = run.cfg.get("exec") or tf_models.DEFAULT_EXEC[variant]
    if exec_mode != tf_models.DEFAULT_EXEC[variant] and variant not in tf_models.EXEC_CHOICE:
        raise RunnerError(f"--exec {exec_mode}: {variant} is defined by how it runs "
                          f"({tf_models.DEFAULT_EXEC[variant]}); --exec applies to "
                          + ", ".join(tf_models.EXEC_CHOICE))
    gpus = tf.config.list_physical_devices("GPU")
    if run.device == "cuda" and not gpus:
        raise RunnerError(f"--device cuda: TensorFlow {tf.__version__} sees no GPU "
                          "(use --device cpu)")
    if run.device == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")
    return exec_mode, gpus


def _loss(w: Workload, layers: tuple, tf):
    """The loss of a batch through ``layers`` (embedding or None, the LSTM stack, head or
    None), in float32."""
    from traceviz.runners.tensorflow import keras_lstms as tf_models

    embed, stack, head = layers

    def forward(inp, training: bool):
        h = embed(inp) if embed is not None else inp
        h = tf_models.run_stack(stack, h)
        if head is not None:  # lm: logits per step; classify: from the last step
            return head(h) if w.head == "lm" else head(h[:, -1])
        return h[:, -1] if w.head == "last_mse" else h

    def loss_of(inp, tgt, training: bool):
        pred = tf.cast(forward(inp, training), tf.float32)
        if w.head in ("lm", "classify"):
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tgt, pred))
        return tf.reduce_mean(tf.square(pred - tgt))
    return loss_of


def _optimizer(run: RunConfig, params: list):
    """Adam or SGD (with loss scaling under fp16), built over ``params``."""
    import keras

    w = run.workload
    opt = keras.optimizers.Adam(w.lr) if w.optimizer == "adam" else keras.optimizers.SGD(w.lr)
    if run.amp == "fp16":
        opt = keras.optimizers.LossScaleOptimizer(opt)
    opt.build(params)
    return opt


def _step_fn(loss_of, opt, params: list, eager: bool, tf):
    """The step's computation, its phases (forward, backward, optimizer) named."""
    def phase(name: str) -> contextlib.AbstractContextManager:
        # a runtime range exists only in eager execution; under tf.function the ops of a
        # phase are those of its name scope
        return tf.profiler.experimental.Trace(name) if eager else tf.name_scope(name)

    def step_fn(inp, tgt):
        if opt is None:
            with phase("forward"):
                return loss_of(inp, tgt, False)
        with tf.GradientTape() as tape:
            with phase("forward"):
                loss = loss_of(inp, tgt, True)
            scaled = opt.scale_loss(loss)
        with phase("backward"):
            grads = tape.gradient(scaled, params)
        with phase("optimizer"):
            opt.apply(grads, params)
        return loss
    return step_fn


def setup(run: RunConfig) -> Capture:
    """The TensorFlow run of ``run``: Keras model, step under tf.function (or eager) and
    the TensorFlow profiler."""
    try:
        import keras
        import tensorflow as tf
    except ImportError as e:
        from traceviz.system.install_hint import pip_install

        raise RunnerError(f"TensorFlow is not importable here ({e}); "
                          f"{pip_install('tf')}") from None
    from traceviz.runners.reference import reference_weights
    from traceviz.runners.tensorflow import keras_lstms as tf_models

    w, cfg, variant = run.workload, run.cfg, run.model
    exec_mode, gpus = _exec_mode(run, tf)
    policy = {"fp16": "mixed_float16", "bf16": "mixed_bfloat16", None: "float32"}[run.amp]
    keras.mixed_precision.set_dtype_policy(policy)
    keras.utils.set_random_seed(run.seed)

    # --- model: embedding? -> LSTM variant -> head ---------------------------------
    stack = tf_models.lstm_layers(variant, w.hidden, w.layers)
    embed = keras.layers.Embedding(w.vocab, w.embed) if w.vocab else None
    head = keras.layers.Dense(w.outputs) if w.outputs else None
    batches = _data(w, cfg, tf)
    x, target = next(batches)
    loss_of = _loss(w, (embed, stack, head), tf)
    loss_of(x, target, False)  # builds every layer
    tf_models.load_weights(stack, reference_weights(w.input, w.hidden, w.layers, run.seed))
    params = [v for layer in ([embed] if embed else []) + stack + ([head] if head else [])
              for v in layer.trainable_variables]
    opt = _optimizer(run, params) if run.train else None
    step_fn = _step_fn(loss_of, opt, params, exec_mode == "eager", tf)
    compiled = tf_models.step_wrapper(exec_mode)(step_fn)
    loader = w.loader
    device = "/GPU:0" if run.device == "cuda" else "/CPU:0"

    def step() -> object:
        nonlocal x, target
        if loader:
            with tf.profiler.experimental.Trace("data"):
                x, target = next(batches)
        try:
            with tf.device(device):
                loss = compiled(x, target)
            return loss.numpy()  # waits for the step's device work
        except tf.errors.InvalidArgumentError as e:
            if exec_mode != "xla":
                raise
            raise RunnerError(f"{variant}: XLA could not compile the step: "
                              f"{str(e).strip().splitlines()[0][:300]}") from None

    logdir = profile_dir(run.out / "tfprofile")
    return Capture(
        framework="tensorflow", version=tf.__version__, profiler="TensorFlow profiler",
        device_name=tf.config.experimental.get_device_details(gpus[0]).get("device_name",
                                                                           "GPU")
        if run.device == "cuda" else cpu_name(),
        step=step, start=lambda: tf.profiler.experimental.start(str(logdir)),
        stop=tf.profiler.experimental.stop,
        around_step=lambda i: tf.profiler.experimental.Trace("step", step_num=i, _r=1),
        trace=lambda: xplane_file(logdir, "the TensorFlow profiler"),
        min_warmup=1,  # the first call traces (and compiles)
        memory=_memory_probe(tf, run.device),
        usage=usage_probe((None, 0) if run.device == "cuda" else None),
        bench=lambda: {"framework_compile_s": None, "framework_compile_note":
                       "tf.function and XLA report no compile time of their own; the first "
                       "call's tracing and compiling are in first_call_s"},
        meta={"keras_version": keras.__version__, "exec": exec_mode, "dtype_policy": policy,
              "logdir": str(logdir)})


def _memory_probe(tf, device: str) -> tuple:
    """(reset, read) of the timed phase's peak memory: TensorFlow's GPU allocator peak
    (``get_memory_info``); on a CPU the growth of the peak resident set."""
    if device != "cuda":
        return rss_probe()

    def read() -> dict:
        info = tf.config.experimental.get_memory_info("GPU:0")
        return {"device": "cuda", "peak_allocated_bytes": int(info["peak"])}

    return (lambda: tf.config.experimental.reset_memory_stats("GPU:0")), read


def main(argv: list[str] | None = None) -> int:
    return serve_capture(setup, "python -m traceviz.runners.tensorflow",
                         "capture one TensorFlow LSTM variant (used by `traceviz capture`)",
                         argv)


if __name__ == "__main__":
    sys.exit(main())
