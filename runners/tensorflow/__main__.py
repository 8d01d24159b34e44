"""``python -m traceviz.runners.tensorflow``: the TensorFlow capture process (``tf_runner.py``)."""

import sys

from traceviz.runners.tensorflow.tf_runner import main

sys.exit(main())
