"""``python -m traceviz.runners.tensorflow``: the TensorFlow capture process (``run.py``)."""

import sys

from traceviz.runners.tensorflow.run import main

sys.exit(main())
