"""TensorFlow / JAX profiler output, the XSpace protobuf (``<host>.xplane.pb``):
``planes.py`` reads a file's (or a log directory's) planes, ``event_rows.py`` turns their
events into the base table's rows, ``messages.py`` declares the protobuf messages."""

from traceviz.parsers.xspace.planes import parse, resolve

__all__ = ["parse", "resolve"]
