"""The TensorFlow / Keras 3 LSTM variants (names in DESIGN.md), imported only by runners.

Every variant is a stack of layers with Keras' parameter layout (kernel ``(in, 4h)``,
recurrent kernel ``(h, 4h)``, bias ``(4h)``, gates in the order i, f, c, o), so one set
of weights (``reference.reference_weights``) loads into all of them and they compute the same
function. How each one executes (eager, ``tf.function``, XLA) is part of the variant:
``step_wrapper`` says which.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Keras LSTM arguments per variant. On a GPU, cudnn_tf takes the cuDNN kernel (Keras'
# "auto"); the others keep the generic Keras loop. generic_tf and mode2_tf build the
# same graph in Keras 3 (implementation 2 is its default); the TensorFlow studies named both.
KERAS_VARIANTS: dict[str, dict] = {
    "cudnn_tf": {},
    "generic_tf": {"use_cudnn": False},
    "mode1_tf": {"use_cudnn": False, "implementation": 1},   # 4 matmuls per input
    "mode2_tf": {"use_cudnn": False, "implementation": 2},   # 1 batched matmul
    "unroll_tf": {"use_cudnn": False, "unroll": True},
    # XLA cannot compile cuDNN's RNN op, so the XLA variant is the generic loop
    "xla_tf": {"use_cudnn": False},
}
# fine-grained gate ops: a Python loop over time steps, or tf.while_loop
FINE_VARIANTS: dict[str, str] = {"eager_tf": "python", "graph_tf": "python",
                                 "whileop_tf": "while"}
VARIANTS = (*KERAS_VARIANTS, *FINE_VARIANTS)
# how the training/inference step runs: "eager", "function" (tf.function), "xla"
DEFAULT_EXEC = {**dict.fromkeys(KERAS_VARIANTS, "function"), "xla_tf": "xla",
                "eager_tf": "eager", "graph_tf": "function", "whileop_tf": "function"}
# the Keras variants that --exec eager|function may switch (the studies' "TF-Eager" rows)
EXEC_CHOICE = tuple(v for v in KERAS_VARIANTS if v != "xla_tf")


def _fine_layer_class():
    import keras
    import tensorflow as tf

    class FineLSTM(keras.layers.Layer):
        """One LSTM layer from gate ops: per step ``x_t W + h U + b``, split, activate."""

        def __init__(self, units: int, loop: str, **kwargs) -> None:
            super().__init__(**kwargs)
            self.units, self.loop = units, loop

        def build(self, input_shape) -> None:
            width = int(input_shape[-1])
            self.kernel = self.add_weight(shape=(width, 4 * self.units), name="kernel")
            self.recurrent_kernel = self.add_weight(shape=(self.units, 4 * self.units),
                                                    name="recurrent_kernel")
            self.bias = self.add_weight(shape=(4 * self.units,), name="bias",
                                        initializer="zeros")

        def _cell(self, x_t, h, c):
            z = tf.matmul(x_t, self.kernel) + tf.matmul(h, self.recurrent_kernel) + self.bias
            i, f, g, o = tf.split(z, 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            return tf.sigmoid(o) * tf.tanh(c), c

        def call(self, x):
            batch, steps = tf.shape(x)[0], x.shape[1]
            h = c = tf.zeros((batch, self.units), dtype=x.dtype)
            if self.loop == "python":
                outs = []
                for t in range(steps):
                    h, c = self._cell(x[:, t], h, c)
                    outs.append(h)
                return tf.stack(outs, axis=1)
            xs = tf.transpose(x, (1, 0, 2))
            acc = tf.TensorArray(x.dtype, size=steps)

            def body(t, h, c, acc):
                h, c = self._cell(xs[t], h, c)
                return t + 1, h, c, acc.write(t, h)

            _, h, c, acc = tf.while_loop(lambda t, *_: t < steps, body, (0, h, c, acc))
            return tf.transpose(acc.stack(), (1, 0, 2))

    return FineLSTM


def lstm_layers(variant: str, hidden: int, layers: int) -> list:
    """The variant's stack of (unbuilt) layers, each returning the full sequence."""
    import keras

    if variant in KERAS_VARIANTS:
        return [keras.layers.LSTM(hidden, return_sequences=True, **KERAS_VARIANTS[variant])
                for _ in range(layers)]
    if variant in FINE_VARIANTS:
        fine = _fine_layer_class()
        return [fine(hidden, FINE_VARIANTS[variant]) for _ in range(layers)]
    raise ValueError(f"unknown TensorFlow variant {variant!r}")


def load_weights(stack: list, weights: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """Copy reference weights into built layers (Keras LSTM or FineLSTM)."""
    for layer, (kernel, recurrent, bias) in zip(stack, weights, strict=True):
        owner = getattr(layer, "cell", layer)
        owner.kernel.assign(kernel)
        owner.recurrent_kernel.assign(recurrent)
        owner.bias.assign(bias)


def step_wrapper(exec_mode: str) -> Callable[[Callable], Callable]:
    """Eager, ``tf.function`` or ``tf.function(jit_compile=True)``."""
    import tensorflow as tf

    if exec_mode == "eager":
        return lambda fn: fn
    if exec_mode == "xla":
        return lambda fn: tf.function(fn, jit_compile=True)
    return tf.function


def run_stack(stack: list, x):
    for layer in stack:
        x = layer(x)
    return x
