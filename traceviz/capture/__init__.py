"""Driving runner processes: one capture, a user's script, in-process profiling, a sweep,
extra environments."""
