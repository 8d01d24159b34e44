"""The TensorFlow runner, ``python -m traceviz.runners.tensorflow``: the capture process
(``tf_runner.py``), its models and sessions.

Importing this package imports no framework (the capture imports TensorFlow when it runs).
"""
