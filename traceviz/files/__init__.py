"""Paths in and out: user files, atomic writes, what a folder is, a run folder."""
