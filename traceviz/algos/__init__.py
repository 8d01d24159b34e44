"""Vectorized algorithms over the table: per distinct value, intervals, op nesting."""
