"""One set of LSTM weights for the TF and JAX variants (numpy only, no framework).

Keras' layout: per layer a kernel ``(in, 4h)``, a recurrent kernel ``(h, 4h)`` and a bias
``(4h)``, gates in the order i, f, c, o. The TF and JAX runners both load these, so every
variant of both frameworks computes the same function for the same seed.
"""

from __future__ import annotations

import numpy as np


def reference_weights(input_size: int, hidden: int, layers: int,
                      seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per layer (kernel, recurrent_kernel, bias), float32, drawn like nn.LSTM's default
    (uniform in ±1/sqrt(hidden)); the forget-gate bias starts at 1 as in Keras."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(hidden)
    out = []
    for layer in range(layers):
        width = input_size if layer == 0 else hidden
        kernel = rng.uniform(-bound, bound, (width, 4 * hidden)).astype(np.float32)
        recurrent = rng.uniform(-bound, bound, (hidden, 4 * hidden)).astype(np.float32)
        bias = np.zeros(4 * hidden, np.float32)
        bias[hidden:2 * hidden] = 1.0
        out.append((kernel, recurrent, bias))
    return out
