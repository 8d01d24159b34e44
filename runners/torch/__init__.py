"""The PyTorch runner, ``python -m traceviz.runners.torch``: the capture process
(``torch_runner.py``), its models, variants, CUDA graphs, sessions and ladder rungs.

Importing this package imports no framework (the capture imports torch when it runs).
"""
