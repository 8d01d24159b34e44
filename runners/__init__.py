"""LSTM variants and their capture loops, one module per framework; the one registry.

``VARIANTS`` is where a variant exists: ``traceviz models``, the ``capture`` and
``sweep`` choices, ``benchmarks/variants_table.py``, the sample scripts (through
``traceviz models --names``) and the tests read it; a test checks it against each
framework's model map. Adding a variant is one ``Variant(...)`` line plus its model.

Nothing here imports a framework: whether one can run is asked without importing it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# MXNet 1.9.1 needs numpy<1.24, so it lives in its own environment
MXNET_ENV = Path(".venv-mxnet")
MXNET_PYTHON_VAR = "TRACEVIZ_MXNET_PYTHON"
MXNET_REQUIREMENTS = ("mxnet==1.9.1", "numpy<1.24")


@dataclass(frozen=True)
class Framework:
    """How a framework's runner starts and how to tell whether it can."""

    name: str
    runner: str               # module run as ``python -m``, or a file beside this one
    extra: str | None = None  # the pip extra that installs it beside traceviz
    own_interpreter: bool = False  # runs in another Python (see ``interpreter``)
    nsys: bool = False        # its runner can be profiled by Nsight Systems

    def interpreter(self, explicit: str | None = None) -> str | None:
        """The Python that runs this framework's runner, or None if there is none."""
        if not self.own_interpreter:
            return sys.executable if importlib.util.find_spec(self.name) else None
        candidates = [explicit] if explicit else [os.environ.get(MXNET_PYTHON_VAR),
                                                  str(MXNET_ENV / "bin" / "python")]
        for candidate in candidates:
            if candidate and (Path(candidate).is_file() or shutil.which(candidate)):
                return candidate
        return None

    def installed(self, explicit: str | None = None) -> bool:
        return self.interpreter(explicit) is not None

    def command(self, explicit: str | None = None) -> list[str]:
        """The runner's command line, before its --config/--out arguments."""
        interp = str(self.interpreter(explicit))
        if self.own_interpreter:  # the runner file by path: traceviz is not installed there
            return [interp, str(Path(__file__).with_name(self.runner))]
        return [interp, "-m", self.runner]

    def missing(self, explicit: str | None = None) -> str:
        """Why it cannot run here, and what to do."""
        if self.own_interpreter:
            where = f"{explicit}: no such interpreter" if explicit else \
                "no MXNet interpreter found"
            return (f"{where}; create one with `traceviz env mxnet` (./{MXNET_ENV}) or give "
                    "the interpreter with --python PATH")
        from traceviz.system.install_hint import pip_install

        return f"needs {self.name}, which is not installed ({pip_install(str(self.extra))})"


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("torch", "traceviz.runners.torch", "torch", nsys=True),
    Framework("tensorflow", "traceviz.runners.tensorflow", "tf"),
    Framework("jax", "traceviz.runners.jax", "jax"),
    Framework("mxnet", "mxnet_gluon.py", own_interpreter=True),
)}


DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Variant:
    """One LSTM implementation: its registry name, the framework whose runner builds it
    (the runner's model map holds the same name), what it is, where it runs."""

    name: str
    framework: str
    description: str
    devices: tuple[str, ...] = DEVICES
    exec_modes: bool = False  # Keras variants: --exec function|eager

    @property
    def gpu_only(self) -> bool:
        return "cpu" not in self.devices

    def runs_on(self, device: str) -> bool:
        return device in self.devices


_KERAS: dict[str, Any] = {"exec_modes": True}
VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("cudnn_torch", "torch", "nn.LSTM: cuDNN on GPU, oneDNN on CPU"),
    Variant("cell_torch", "torch", "nn.LSTMCell loop, eager (one cell call per time step)"),
    Variant("fine_torch", "torch", "fine-grained gate ops, eager"),
    Variant("jit_torch", "torch", "fine-grained gate ops under TorchScript (torch.jit.script)"),
    Variant("compile_torch", "torch", "fine-grained cell under torch.compile"),
    Variant("static_torch", "torch",
            "LSTMCell loop traced into one static TorchScript graph"),
    Variant("naive8_torch", "torch", "8 GEMMs per step (one per gate and input)"),
    Variant("fused_torch", "torch",
            "input projection for all steps + one recurrent GEMM and one fused pointwise step"),
    Variant("graph_torch", "torch", "CUDA graph replay of fused_torch", devices=("cuda",)),
    Variant("streams_torch", "torch",
            "combined GEMMs; the input GEMMs on a side CUDA stream ahead of the recurrent "
            "ones, events between (in order on a CPU)"),
    Variant("wavefront_torch", "torch",
            "many-layer (wavefront) schedule: layer l at step t beside layer l+1 at step t-1, "
            "a stream per layer (in order on a CPU)"),
    Variant("transposed_torch", "torch", "fused_torch with the weights stored pre-transposed"),
    Variant("factorized_torch", "torch",
            "factorized LSTM: W ~ W2 W1 of rank --rank (default hidden/4); another model"),
    Variant("compile_full_torch", "torch",
            "torch.compile of the whole model, time loop included (--compile-mode)"),
    Variant("cudnn_tf", "tensorflow",
            "keras.layers.LSTM: cuDNN on GPU, Keras' generic loop on CPU", **_KERAS),
    Variant("generic_tf", "tensorflow", "keras.layers.LSTM(use_cudnn=False): Keras' loop",
            **_KERAS),
    Variant("mode1_tf", "tensorflow",
            "LSTM(use_cudnn=False, implementation=1): 4 matmuls per input",
            **_KERAS),
    Variant("mode2_tf", "tensorflow",
            "LSTM(use_cudnn=False, implementation=2): one batched matmul",
            **_KERAS),
    Variant("unroll_tf", "tensorflow", "LSTM(unroll=True): the time loop unrolled in the graph",
            **_KERAS),
    Variant("eager_tf", "tensorflow", "fine-grained gate ops, Python loop, eager"),
    Variant("graph_tf", "tensorflow", "eager_tf's cell and loop under tf.function"),
    Variant("whileop_tf", "tensorflow", "fine-grained cell in tf.while_loop (tf.function)"),
    Variant("xla_tf", "tensorflow",
            "Keras' LSTM loop compiled by XLA (tf.function(jit_compile=True))"),
    Variant("scan_jax", "jax", "fine-grained cell in jax.lax.scan, jit-compiled"),
    Variant("gluon_mxnet", "mxnet",
            "gluon.rnn.LSTM (MXNet 1.9.1, imperative Gluon), in its own interpreter"),
)}


def variants(framework: str | None = None, device: str | None = None) -> list[Variant]:
    """Variants of one framework and/or runnable on one device, in registry order."""
    return [v for v in VARIANTS.values()
            if (framework is None or v.framework == framework)
            and (device is None or v.runs_on(device))]


def default_device() -> str:
    """cuda when torch is installed and sees a GPU, else cpu."""
    if importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def mxnet_python(explicit: str | None = None) -> str | None:
    """The interpreter that runs gluon_mxnet: --python, $TRACEVIZ_MXNET_PYTHON, or the
    environment `traceviz env mxnet` makes (./.venv-mxnet)."""
    return FRAMEWORKS["mxnet"].interpreter(explicit)


def watch_parent(period_s: float = 1.0) -> None:
    """In a runner: once its parent is gone (``traceviz capture`` killed, SIGKILL
    included, or the Nsight Systems process between them), end the runner and the
    process group it leads (a script's own children). On Linux the parent also has the
    kernel kill the runner with it (PR_SET_PDEATHSIG); this check covers the rest."""
    import signal
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period_s)
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="traceviz-parent-watch", daemon=True).start()
