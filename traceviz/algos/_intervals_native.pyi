"""Types of the compiled interval walk (``intervals_native.c``; its header comment is the
API: ranks written into ``out``)."""

import numpy as np

def innermost(group: np.ndarray, start: np.ndarray, end: np.ndarray, q_group: np.ndarray,
              q_time: np.ndarray, q_id: np.ndarray, ex_off: np.ndarray, ex_id: np.ndarray,
              out: np.ndarray, /) -> None: ...
