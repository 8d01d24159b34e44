"""The one classification table: kernel and op names -> category, and dtype-cast detection.

Patterns run once per distinct name (names are categorical), never per event.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceviz.schema import CATEGORIES

# Order matters: the first matching category wins.
_CATEGORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cat, re.compile(rx, re.IGNORECASE))
    for cat, rx in (
        ("communication",
         r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|c10d::|gloo|"
         r"\bbroadcast\b|sendrecv"),
        ("gemm",
         r"gemm|gemv|cublas|cutlass|xmma|nvjet|scudnn|implicit_?convolve|dgrad|wgrad|winograd|"
         r"conv(olution)?[_\d]|fft\d?d?_|splitKreduce|triton_tem|"
         r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_addmm_activation|addmv|mv|dot|einsum|"
         r"_?convolution|conv\w*|mkldnn_convolution|mkldnn_linear|mkldnn_matmul)$|"
         r"^(MatMul|BatchMatMul\w*|_FusedMatMul|Conv\w+|Einsum|dot|dot_general)$|"
         # XLA:CPU hands dots to YNNPACK as "ynn_fusion" custom fusions
         r"^ynn_fusion$"),
        ("rnn",
         r"lstm|gru_|\bgru\b|rnn|blockPersist|elemWiseRNN|mkldnn_rnn|CudnnRNN"),
        ("reduction",
         r"reduce|reduction|softmax|welford|norm(?!al)|\bbn_(fw|bw)|cub::|argmax|argmin|topk|"
         r"triton_(red|per)_|GammaBeta|nll_loss|cross_entropy|mse_loss|cumsum|scan|sort|pool|"
         r"^aten::(sum|mean|max|min|amax|amin|var|std|prod|all|any)$|"
         r"^(Sum|Mean|Max|Min|Prod|Softmax|LogSoftmax|SparseSoftmaxCrossEntropy\w*)$"),
        ("elementwise",
         r"elementwise|pointwise|triton_poi_|EigenMetaKernel|TensorCwise|multi_tensor_apply|"
         r"CatArray|copy|fill|index|gather|scatter|embedding|permute|transpose|dropout|"
         r"nchwToNhwc|nhwcToNchw|"
         r"sigmoid|tanh|relu|gelu|silu|"
         r"^aten::(add|sub|mul|div|addcmul|addcdiv|lerp|exp|log|neg|pow|sqrt|rsqrt|abs|sign|"
         r"clamp|where|fill|zero|cat|stack|clone|contiguous|masked_fill|threshold|hardtanh|"
         r"maximum|minimum|uniform|normal|bernoulli|rand|_foreach|ones_like|zeros_like)\w*$|"
         r"^(Add|AddV2|Sub|Mul|RealDiv|Sigmoid|Tanh|Relu|BiasAdd\w*|ConcatV2|Pack|Fill|Select\w*|"
         r"AddN|Square|Rsqrt|Exp|Log|Neg|Identity|Transpose|GatherV2|ResourceGather)$|"
         # XLA's HLO instructions and fusions (XLA:CPU thunks)
         r"fusion$|^wrapped_|dynamic-(update-)?slice|^(add|multiply|subtract|divide|concatenate|"
         r"broadcast|select|compare|exponential|logistic|maximum|minimum|negate)$"),
    )
)

# Kernel names that show a dtype conversion (PyTorch's dynamic-cast and dedicated
# copy kernels, Eigen's conversion op under TF, explicit cast/quantize kernels).
CAST_KERNEL = re.compile(
    r"copy_kernel\w*\W.*WithCast|TensorConversionOp|(b?float16|float8|fp8|half)_copy_kernel|"
    r"\bcast(_|Kernel|Functor)|_cast_kernel|"
    r"_to_(float|half|bf16|bfloat16|fp8|fp16|fp32)|(float|half|bf16|fp8|fp16|fp32)_to_(float|half|"
    r"bf16|bfloat16|fp8|fp16|fp32)|quantize",
    re.IGNORECASE,
)

# gemm/rnn kernels on half or bfloat16 tensor-core paths (cuBLAS/cuDNN/CUTLASS names:
# h884/h1688/h16816 tiles, hmma, f16/bf16 in xmma/nvjet/cutlass names).
TENSOR_CORE_HALF = re.compile(
    r"(^|_)h\d{3,5}|hmma|hgemm|bgemm|f16|bf16|fp16|half|bfloat16|tensorop_[hb]|_h_bz|"
    r"gemm_[hb]\d",
    re.IGNORECASE,
)


def tensor_core_flags(names: pd.Index) -> np.ndarray:
    return np.array([bool(TENSOR_CORE_HALF.search(str(n))) for n in names], dtype=bool)


# Framework ops that change a tensor's dtype. aten::to only dispatches to _to_copy
# (and is a no-op otherwise), so the time is counted on _to_copy and its copy_.
CAST_OPS = frozenset({"aten::_to_copy", "Cast", "tf.cast", "convert_element_type",
                      "convert"})  # convert: the HLO instruction (XLA:CPU thunks)
CAST_OP_CHILD = "aten::copy_"


# Ops that only make views, read metadata or allocate: no compute. On a CPU trace they
# are never work, and an op whose only children are these (aten::mm -> resolve_conj)
# is still a leaf.
TRIVIAL_OP = re.compile(
    r"^aten::(resolve_conj|resolve_neg|as_strided|view|view_as|_reshape_alias|reshape|t|"
    r"transpose|permute|expand|expand_as|slice|select|narrow|split|split_with_sizes|chunk|"
    r"unsqueeze|squeeze|detach|alias|empty|empty_strided|empty_like|unbind|_unsafe_view|"
    r"lift_fresh|result_type|size|stride|numel|is_nonzero|broadcast_tensors)$|^detach$"
)


def trivial_op_flags(names: pd.Index) -> np.ndarray:
    """For each distinct name: a view/metadata/allocation op (never work on a CPU trace)."""
    return np.array([bool(TRIVIAL_OP.match(str(n))) for n in names], dtype=bool)


def category_codes(names: pd.Index) -> np.ndarray:
    """For each distinct name, the index into ``CATEGORIES`` of its name category."""
    index = {c: i for i, c in enumerate(CATEGORIES)}
    return np.array([index[_category_of(str(n))] for n in names], dtype=np.int8)


def _category_of(name: str) -> str:
    for cat, rx in _CATEGORY_PATTERNS:
        if rx.search(name):
            return cat
    return "other"


def cast_kernel_flags(names: pd.Index) -> np.ndarray:
    """For each distinct name: does it look like a dtype-conversion kernel?"""
    return np.array([bool(CAST_KERNEL.search(str(n))) for n in names], dtype=bool)


def cast_op_flags(names: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct name: is it a cast op; is it the copy a cast op delegates to."""
    text = np.asarray([str(n) for n in names], dtype=object)
    return np.isin(text, list(CAST_OPS)), text == CAST_OP_CHILD
