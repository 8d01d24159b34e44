"""``python -m traceviz.runners.torch``: the PyTorch capture process (``run.py``)."""

import sys

from traceviz.runners.torch.run import main

sys.exit(main())
