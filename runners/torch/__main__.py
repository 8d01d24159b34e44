"""``python -m traceviz.runners.torch``: the PyTorch capture process (``torch_runner.py``)."""

import sys

from traceviz.runners.torch.torch_runner import main

sys.exit(main())
