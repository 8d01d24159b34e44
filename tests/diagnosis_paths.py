"""The diagnosis test bed's traces and commands, shared by ``tests/test_diagnosis.py`` and
``tests/test_diagnosis_startup.py``: every real trace by key, its raw facts
(``tests/diagnosis_raw.py``: no traceviz import), and ``advise``/``analyze --json`` run
once per trace in this process (both test modules read the same answers)."""

from __future__ import annotations

import functools
import io
import json
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tests.conftest import H200, ROOT, SHARED_TRACES, missing, shared, shared_traces
from tests.diagnosis_raw import Facts, expected_bound, facts, run_facts

FOREIGN = SHARED_TRACES / "foreign"
TP2 = "rtx4090_llama_tp2"  # one run's two tensor-parallel ranks, a trace each
KERAS = "keras_semi_supervised_cv"  # three Keras training windows of one project
# every trace of ../shared/traces/foreign/, by name (its README lists them)
FOREIGN_FILES = {
    "kineto": ("deepseek_v3_train.json", "h1_kineto_v100_resnet50.pt.trace.json.gz",
               "h2_param_2080ti_resnet.json.gz", "h3_param_dlrm_v100_rank0.pt.trace.json.gz",
               "h4_tracelens_b200_eager.json.gz", "h5_tracelens_mi300_resnet_actckpt.json.gz",
               "h6_tracelens_mi300_vllm_hipgraph.json.gz", "h7_tracelens_h100_owlv2.json.gz",
               "zoology_trace.json", "a100_switch_moe_cold.json", "a4000_vit_cold.json",
               "t4_resnet_cifar.json", "gh200_transformer_steps.pt.trace.json",
               "rtx3060_triton_attention_nocupti.json",
               *(f"{TP2}/llama_trace_4layers{r}_with_annotations.json" for r in (0, 1)),
               *(f"h3_param_dlrm_8rank/worker{r}_step_12.{t}.pt.trace.json.gz" for r, t in (
                   (0, 1694128201545), (1, 1694128201556), (2, 1694128201554),
                   (3, 1694128201557), (4, 1694128201547), (5, 1694128201549),
                   (6, 1694128201553), (7, 1694128201553)))),
    "nsys": ("abacus_titanrtx_report1.qdrep", "ecf_baseline.sqlite", "ecf_poolformer.sqlite",
             "flux_gtx1650_report20.qdrep", "memfusion_trt_rtx3090_report1.sqlite",
             "pipit_perlmutter_cloverleaf_cuda.sqlite", "pipit_saxpy_mpi_cuda_perlmutter0.sqlite",
             "tensoriterator_report1.qdrep", "llama_demo.sqlite",
             "llama_real_inference_simulation.sqlite", "dlprof_lenet_nsys_profile.sqlite",
             "darknet_xavier_report1.qdrep"),
    "xplane": ("chess_tf_20210616-014419.xplane.pb", "chess_tf_20210616-112936.xplane.pb",
               "tracelens_jax_te_fused_attn.xplane.pb",
               "tracelens_mi300_jax08_attention.xplane.pb", "tracelens_mi300_jax08_conv.xplane.pb",
               "tracelens_mi300_jax08_elementwise.xplane.pb",
               "tracelens_mi300_jax08_gemm.xplane.pb", "tracelens_mi300_jax_conv_legacy.xplane.pb",
               "xprof_tpu_inference_2.xplane.pb",
               *(f"{KERAS}/{n}.xplane.pb" for n in ("resnet_s5", "alexnet_s1", "alexnet_s3tune"))),
}
# files no reader can take: advise must refuse them in one line
UNREADABLE = {
    # every non-UTF-8 byte replaced by U+FFFD: the protobuf wire format is broken
    "xprof_tpu_inference_2_CORRUPTED": FOREIGN / "xplane"
    / "xprof_tpu_inference_2_CORRUPTED_bfd424c8.xplane.pb",
    # recorded with nsys 2026.1; an older nsys cannot export it ("Version number is invalid")
    "cs336_myrun_nsys2026": FOREIGN / "nsys" / "cs336_myrun_nsys2026.nsys-rep",
}
RUNS = ("compile_full_torch", "cudnn_torch-forward-bf16", "cudnn_torch-train-none",
        "factorized_torch", "fine_torch", "fused_torch", "naive8_torch", "scan_jax",
        "streams_torch", "transposed_torch", "wavefront_torch")


def _key(path: Path) -> str:
    if path.parent.name == "h3_param_dlrm_8rank":  # worker<r>_step_12.<time>...
        return f"h3_param_dlrm_8rank_{path.name.split('_')[0]}"
    if path.parent.name == TP2:  # llama_trace_4layers<r>_with_annotations.json
        return f"{TP2}_rank{path.name.split('_')[2][-1]}"
    if path.parent.name == KERAS:
        return f"keras_{path.name.split('.')[0]}"
    return re.sub(r"(\.pt\.trace)?\.(json(\.gz)?|sqlite|qdrep|xplane\.pb(\.gz)?)$", "",
                  path.name)


PATHS: dict[str, Path] = {
    **{_key(p): p for p in shared_traces()},
    **{_key(FOREIGN / f / n): FOREIGN / f / n for f, names in FOREIGN_FILES.items()
       for n in names},
    **{f"h200_{r}": H200 / r for r in RUNS},
}
# over ~10 s each for advise on 2 shared cores: reports exported with nsys twice (here and
# by advise; tensoriterator's export is 171 MB), the largest kernel counts
SLOW = {"abacus_titanrtx_report1", "flux_gtx1650_report20", "tensoriterator_report1",
        "v100_19k_kernels", "h200_naive8_torch", "h200_cudnn_torch-train-none",
        "darknet_xavier_report1"}


def _param(key: str):
    marks = [pytest.mark.slow] if key in SLOW else []
    return pytest.param(key, id=key, marks=marks)


ALL = [_param(k) for k in PATHS]


def trace(key: str) -> Path:
    """A trace's path; skips where ../shared is not beside the checkout, or where this
    machine cannot read its format (a report without nsys, an XSpace without TensorFlow)."""
    path = shared(PATHS[key])
    if path.suffix in (".qdrep", ".nsys-rep") and not shutil.which("nsys"):
        missing("nsys is not on PATH: a .qdrep is read through `nsys export`")
    if ".xplane.pb" in path.name or (path.is_dir() and (path / "vm.xplane.pb.gz").exists()):
        try:
            from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: F401
        except ImportError as e:
            missing(f"TensorFlow's XSpace schema is not importable ({e})")
    return path


def raw(key: str) -> Facts:
    """The raw facts of a trace (a run folder's with its timed step); skips as ``trace``."""
    path = trace(key)
    return run_facts(path) if path.is_dir() else facts(path)


# verdicts a trace may have beyond its raw figures', where the contract's words and a user's
# reading part: darknet's main thread builds the network on the CPU for 2.1 s (untraced by
# CUDA; nsys' CPU samples: load_network > parse_network_cfg > make_convolutional_layer >
# rand_normal) between weight copies: start-up to a user, though no start-up call marks it
ALSO_ALLOWED = {"darknet_xavier_report1": {"startup"}}


def allowed_bound(key: str, f: Facts) -> frozenset[str]:
    """The verdicts ``bound.by`` may give for a trace: the raw figures', and any the
    trace's own reading adds (``ALSO_ALLOWED``)."""
    return expected_bound(f) | ALSO_ALLOWED.get(key, set())


def traceviz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceviz", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def cli(*args: str) -> tuple[int, str, str]:
    """A traceviz command run in this process (no interpreter start per trace):
    its exit status, stdout and stderr."""
    from traceviz.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's exits
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


@functools.cache
def _run(command: str, key: str) -> tuple[int, str, str]:
    return cli(command, "--json", str(PATHS[key]))


def json_of(command: str, key: str) -> dict:
    """``command --json`` of a trace, run once per trace and process (skips as
    ``trace``)."""
    trace(key)
    rc, out, err = _run(command, key)
    assert rc == 0, f"{command} failed on {key}: {err[-2000:]}"
    return json.loads(out)


MS = 1e6
