"""A small Keras LSTM classifier trained with Model.fit (no traceviz in it).

python keras_fit.py [--batches N]
"""

import sys

import keras
import numpy as np

batches = int(sys.argv[sys.argv.index("--batches") + 1]) if "--batches" in sys.argv else 10
keras.utils.set_random_seed(0)
x = np.random.rand(batches * 8, 6, 5).astype("float32")
y = np.random.randint(0, 3, size=batches * 8)
model = keras.Sequential([keras.Input((6, 5)), keras.layers.LSTM(8),
                          keras.layers.Dense(3)])
model.compile(optimizer="sgd",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=8, epochs=1, verbose=0)
print("fitted")
