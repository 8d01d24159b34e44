"""The one classification table: kernel and op names -> category, and dtype-cast detection.

Patterns run once per distinct name (names are categorical), never per event.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

from traceviz.algos.categorical import as_list
from traceviz.algos.patterns import Gated, in_line, in_word
from traceviz.table.names import bounded
from traceviz.table.schema import CATEGORIES

# Order matters: the first matching category wins. Attention comes first: a fused
# attention kernel holds gemms, softmax and dropout ("fmha_fwd...Dropout"), and is one thing.
# "A\w*B" and "A.*B" are written with in_word/in_line (traceviz.algos.patterns): as
# written plainly they cost quadratic time on a name holding A many times.
_CATEGORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cat, re.compile(rx, re.IGNORECASE))
    for cat, rx in (
        ("attention",
         r"flash_?(fwd|bwd|attn|decoding|fprop|bprop)|fmha|mha_(fwd|bwd)|attn_(fwd|bwd)|"
         r"_attention(_|\b)|attention_?(kernel|fwd|bwd)|unified_attention|paged_attention|"
         r"sage_(fwd|bwd)|efficient_attention|fused_attn(?!_rocm::populate)|cudnn_?mha|_sdpa_|"
         r"scaled_dot_product|" + in_word("BatchPrefill", "*", "Kernel") + "|"
         + in_word("BatchDecode", "*", "Kernel") + "|"
         r"^aten::(_?scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*)$"),
        ("communication",
         r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|c10d::|gloo|"
         r"\bbroadcast\b|sendrecv|multimem_|cross_device_reduce|::ep::|deep_ep|"
         r"nvshmem|record_param_comms|(one|two)_shot_all_reduce|oneccl|\bccl::|"
         r"^(CollectiveReduceV2|NcclAllReduce|all-reduce|all-gather|reduce-scatter|"
         r"all-to-all|collective-permute|collective-broadcast|ragged-all-to-all|"
         r"(send|recv)(-done)?)\b"),
        ("gemm",
         r"gemm|gemv|cublas|hipblaslt|cutlass|xmma|nvjet|scudnn|implicit_?convolve|"
         r"(?-i:[dw]grad|Dgrad|Wgrad)|winograd|conv(olution)?[_\d]|_conv_|fft\d?d?_|"
         r"splitKreduce|triton_tem|^Cijk_|GridwiseGemm|^_?matmul|matmul_kernel|^bmm_|Im\dd2Col|"
         r"im2col|^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_addmm_activation|addmv|mv|dot|"
         r"einsum|_?convolution|conv\w*|mkldnn_convolution|mkldnn_linear|mkldnn_matmul|"
         r"_scaled_mm|_grouped_mm)$|"
         # TF ops; oneDNN builds of TF rename them _Mkl<Op> (_MklMatMul under bf16 on
         # AVX512-BF16 CPUs)
         r"(?-i:^(_Mkl(Native)?)?(MatMul|BatchMatMul\w*|_?FusedMatMul|Conv\d\w*|Einsum|"
         r"FullyConnected)$)|"
         r"^(dot|dot_general|convolution)$|"
         # XLA:CPU hands dots to YNNPACK as "ynn_fusion" custom fusions
         r"^ynn_fusion$"),
        ("rnn",
         r"lstm|gru_|\bgru\b|rnn|blockPersist|elemWiseRNN|mkldnn_rnn|CudnnRNN"),
        ("reduction",
         r"reduce|reduction|softmax|welford|norm(?!al)|\bbn_(fw|bw)|cub::|argmax|argmin|topk|"
         r"triton_(red|per)_|GammaBeta|RowwiseMoments|nll_?loss|NLLCriterion|cross_entropy|"
         r"mse_loss|cumsum|scan|sort|pool(?!ed_embs)|_sum_|sum_rows|histogram|"
         r"^aten::(sum|mean|max|min|amax|amin|var|std|prod|all|any)$|"
         r"^(Sum|Mean|Max|Min|Prod|Softmax|LogSoftmax|SparseSoftmaxCrossEntropy\w*|"
         r"BiasAddGrad)$"),
        ("elementwise",
         r"elementwise|pointwise|triton_poi_|EigenMetaKernel|TensorCwise|multi_tensor_apply|"
         r"CatArray|copy|fill|index|gather|scatter|embedding|permute|transpose|dropout|"
         r"nchwToNhwc|nhwcToNchw|rotary|swiglu|sigmoid|tanh|relu|gelu|silu|SubTensorOp|"
         r"reshape_and_cache|store_kvcache|Reformat|clamp|"
         r"^aten::(add|sub|mul|div|addcmul|addcdiv|lerp|exp|log|neg|pow|sqrt|rsqrt|abs|sign|"
         r"clamp|where|fill|zero|cat|stack|clone|contiguous|masked_fill|threshold|hardtanh|"
         r"maximum|minimum|uniform|normal|bernoulli|rand|_foreach|ones_like|zeros_like)\w*$|"
         r"^(Add|AddV2|Sub|Mul|RealDiv|Sigmoid|Tanh|Relu|BiasAdd|ConcatV2|Pack|Fill|Select\w*|"
         r"AddN|Square|Rsqrt|Exp|Log|Neg|Identity|Transpose|GatherV2|ResourceGather)$|"
         # XLA's HLO instructions and fusions (XLA:CPU thunks, GPU and TPU kernels)
         r"fusion$|^wrapped_|dynamic-(update-)?slice|^(add|multiply|subtract|divide|concatenate|"
         r"broadcast|select|compare|exponential|logistic|maximum|minimum|negate|copy|"
         r"transpose|reshape|bitcast)$"),
    )
)

# each pattern behind its literal gate (algos/patterns.py): most names hold none of a
# category's literals, and the patterns were most of reading a small trace's names
_CATEGORY_GATES = tuple((cat, Gated(rx)) for cat, rx in _CATEGORY_PATTERNS)

# Names whose text would mislead the patterns: fbgemm's embedding kernels are no gemms,
# an AMD code object's ".kd" suffix and XLA's ".12" instruction numbers are no part of
# the name. "[clone .kd]" goes with the white space before it, matched from the start of
# that run only: tried from every space of a long run, "\s*" ran to its end each time.
_NOISE = re.compile(r"fbgemm\w*|(?<!\s)\s*\[clone \.kd\]|\.kd$|(?<=\w)\.\d+$")


def _text(name: str) -> str:
    """The text the patterns read: ``name`` without its noise, and where it is longer than
    any real name, its two ends (``bounded``: the patterns cost time per character)."""
    text = bounded(name)
    # every noise holds "fbgemm" or ".kd", or ends the name with a digit: a name without
    # them (most) skips the pattern, tried at every position of a long kernel name
    if "fbgemm" not in text and ".kd" not in text and not text[-1:].isdigit():
        return text
    return _NOISE.sub("", text)


# Eigen (TensorFlow's GPU kernels) converts a stored tensor when the whole expression a
# kernel assigns is TensorConversionOp<T, TensorMap<...>>. A conversion inside another
# expression (ReluGrad's gradient * (x > 0) converts the comparison's bool to float
# inline) is that expression's work, and one of a computed result (ArgMax's index to
# int64) is the reduction's: neither is a cast.
_EIGEN_CAST = (r"TensorAssignOp<(Eigen::)?TensorMap<[^<>]*<[^<>]*>[^<>]*>,\s*(const\s+)?"
               # "[^<>,]*(<...>[^<>,]*)?,": one way to split the text before the
               # comma (two runs of [^<>,]* side by side split it every way, quadratic)
               r"(Eigen::)?TensorConversionOp<[^<>,]*(?:<[^<>]*>[^<>,]*)?,\s*(const\s+)?"
               r"(Eigen::)?TensorMap<")

# Kernel names that show a dtype conversion (PyTorch's dynamic-cast and dedicated
# copy kernels, Eigen's conversion of a tensor under TF, cuDNN's convertTensor, XLA
# convert fusions, Inductor kernels fused around _to_copy, TensorRT reformats,
# Transformer Engine and other cast/quantize kernels).
CAST_KERNEL = re.compile(
    # copy_kernel<...>(...) [with ... WithCast ...]: the non-word character after its word
    # ends the line (then "WithCast" is on the next) or does not
    in_line(in_word("copy_kernel", "*", r"[^\w\n]"), "WithCast") + "|"
    + in_word("copy_kernel", "*", r"\n") + r"[^\n]*WithCast|"
    + _EIGEN_CAST + r"|(b?float16|float8|fp8|half)_copy_kernel|"
    r"\bcast(_|Kernel|Functor)|_cast_kernel|cast_(to|back|transpose)|per_token_cast|"
    r"_to_h?(float|half|bf16|bfloat16|fp8|fp16|fp32)|(float|half|bf16|fp8|fp16|fp32)_to_h?(float|"
    r"half|bf16|bfloat16|fp8|fp16|fp32)|quantize|_quant_kernel|fp8_quant|"
    r"convertTensor|^(loop_|input_)?convert(_\w*)?_fusion|^wrapped_convert|^convert$|"
    # Inductor kernels of a _to_copy alone (with views at most): one fused into real work
    # is that work
    r"^triton_[a-z]+_fused__to_copy(_(view|clone|_unsafe_view|permute|transpose|t))*_\d+$|"
    r"genericReformat|" + in_word("reformat", "*", "kernel") + r"|SubTensorOpWithCast|"
    r"transformer_engine::\w*(cast|quantize)",
    re.IGNORECASE,
)

# matrix kernels on half, bfloat16 or fp8 tensor-core paths (cuBLAS/cuDNN/CUTLASS names:
# h884/h1688/h16816 tiles, hmma, f16/bf16 in xmma/nvjet/cutlass names).
TENSOR_CORE_HALF = re.compile(
    r"(^|_)h\d{3,5}|hmma|hgemm|bgemm|f16|bf16|fp16|half|bfloat16|tensorop_[hb]|_h_bz|"
    r"gemm_[hb]\d|e4m3|e5m2|fp8|mxfp|"
    # Tensile (rocBLAS/hipBLASLt) names: Cijk_<layout>_<in/out/compute types>, H/B = fp16/bf16
    r"^Cijk_\w+?_(HH|HS|BB|BS|HHS|BBS|HSS|BSS)_",
    re.IGNORECASE,
)


# FP32 matrix kernels on TF32 tensor cores (cuBLAS/cuDNN xmma "tf32" names, CUTLASS's
# tensorop SGEMM "tensorop_s1688gemm"/"s16816gemm")
TF32_KERNEL = re.compile(r"tf32|tensorop_s1688gemm|tensorop_s16816gemm", re.IGNORECASE)


def tensor_core_flags(names: pd.Index) -> np.ndarray:
    """Matrix kernels on tensor cores: half, bf16 or fp8 paths, and TF32."""
    text = [bounded(str(n)) for n in names]
    return np.array([bool(TENSOR_CORE_HALF.search(t) or TF32_KERNEL.search(t)) for t in text],
                    dtype=bool)


# Framework ops that change a tensor's dtype. aten::to only dispatches to _to_copy
# (and is a no-op otherwise), so the time is counted on _to_copy and its copy_.
CAST_OPS = frozenset({"aten::_to_copy", "Cast", "tf.cast", "convert_element_type",
                      "convert"})  # convert: the HLO instruction (XLA:CPU thunks)
CAST_OP_CHILD = "aten::copy_"

# torch's ScalarType codes of the floating-point types, as Kineto writes dtypes
SCALAR_TYPES = {5: "c10::Half", 6: "float", 7: "double", 15: "c10::BFloat16",
                23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn", 25: "c10::Float8_e5m2fnuz",
                26: "c10::Float8_e4m3fnuz", 0: "unsigned char", 1: "signed char",
                2: "short int", 3: "int", 4: "long int", 11: "bool"}
_FLOAT_TYPE = re.compile(r"^(float|double|c10::(Half|BFloat16|Float8\w*))$")


def precision_change(src: str, dst: str) -> int:
    """1 when a conversion changes the floating-point format (fp32 -> bf16: what AMP pays
    for), 0 when it does not (same dtype, or to/from integer or bool: index and mask
    conversions), -1 when a dtype is unknown."""
    if not src or not dst:
        return -1
    if src == dst:
        return 0
    return int(bool(_FLOAT_TYPE.match(src)) and bool(_FLOAT_TYPE.match(dst)))


# Ops that only make views, read metadata or allocate: no compute. On a CPU trace they
# are never work, and an op whose only children are these (aten::mm -> resolve_conj)
# is still a leaf.
TRIVIAL_OP = re.compile(
    r"^aten::(resolve_conj|resolve_neg|as_strided|view|view_as|_reshape_alias|reshape|t|"
    r"transpose|permute|expand|expand_as|slice|select|narrow|split|split_with_sizes|chunk|"
    r"unsafe_split|unsafe_split_with_sizes|unsafe_chunk|"
    r"unsqueeze|squeeze|detach|alias|empty|empty_strided|empty_like|unbind|_unsafe_view|"
    r"lift_fresh|result_type|size|stride|numel|is_nonzero|broadcast_tensors)$|"
    # TorchScript records its graph's chunk under the bare name
    r"^(detach|chunk)$"
)


def trivial_op_flags(names: pd.Index) -> np.ndarray:
    """For each distinct name: a view/metadata/allocation op (never work on a CPU trace)."""
    return np.array([bool(TRIVIAL_OP.match(str(n))) for n in as_list(names)], dtype=bool)


def category_codes(names: pd.Index) -> np.ndarray:
    """For each distinct name, the index into ``CATEGORIES`` of its name category."""
    index = {c: i for i, c in enumerate(CATEGORIES)}
    return np.array([index[_category_of(str(n))] for n in as_list(names)], dtype=np.int8)


# Names repeat across the ranks of a job and the runs of a sweep, and the patterns are
# the cost of a small trace's import: each distinct name is classified once per process.
@functools.lru_cache(maxsize=1 << 16)
def _category_of(name: str) -> str:
    text = _text(name)
    lower = text.lower()
    xla = xla_category(text)
    for cat, gate in _CATEGORY_GATES:
        if xla is not None and cat not in _BEFORE_XLA:
            return xla
        if gate.search(text, lower):
            return cat
    return xla or "other"


# XLA names a GPU kernel after its fusion: the fusion's kind, the HLO ops it fuses, and a
# uniquifying number ("loop_add_fusion", "loop_add_fusion_2", "input_reduce_fusion",
# "gemm_fusion_dot_19"), or after the one op it wraps ("wrapped_concatenate"). The kind
# decides: kLoop fusions are elementwise work (arithmetic, broadcasts, slices, updates),
# kInput fusions reductions (a scatter: elementwise); a fused reduce is a reduction
# wherever it sits. Attention, communication and GEMM names keep their own category.
_BEFORE_XLA = ("attention", "communication", "gemm")
_XLA_FUSION = re.compile(r"^(?:(?P<kind>loop|input)_(?P<ops>\w+?)_fusion|"
                         r"wrapped_(?P<op>[a-z][a-z_]*?)|(?P<bare>[a-z][a-z_]*?)_fusion)"
                         r"(?:_\d+)?$")
# a CUDA graph's copy node run as a kernel (XLA command buffers): a device copy
_COPY_KERNEL = re.compile(r"^memcpy\d*_(post|pre)$")
_XLA_REDUCE = re.compile(r"(^|_)(reduce|reduce_window|sort|argmax|argmin|softmax)(_|$)")
_XLA_SCATTER = re.compile(r"(^|_)scatter(_|$)")


def xla_category(text: str) -> str | None:
    """The category of an XLA GPU kernel from its fusion kind and ops (None: not an XLA
    fusion or wrapped op name)."""
    if _COPY_KERNEL.match(text):
        return "memcpy"
    m = _XLA_FUSION.match(text)
    if m is None:
        return None
    ops = m.group("ops") or m.group("op") or m.group("bare") or ""
    if _XLA_REDUCE.search(ops):
        return "reduction"
    if m.group("kind") == "input":
        return "elementwise" if _XLA_SCATTER.search(ops) else "reduction"
    return "elementwise"


def cast_kernel_flags(names: pd.Index) -> np.ndarray:
    """For each distinct name: does it look like a dtype-conversion kernel?"""
    return np.array([_is_cast_kernel(str(n)) for n in as_list(names)], dtype=bool)


_CAST_GATE = Gated(CAST_KERNEL)


@functools.lru_cache(maxsize=1 << 16)
def _is_cast_kernel(name: str) -> bool:
    return bool(_CAST_GATE.search(_text(name)))


def cast_op_flags(names: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct name: is it a cast op; is it the copy a cast op delegates to."""
    text = np.asarray([str(n) for n in as_list(names)], dtype=object)
    return np.isin(text, list(CAST_OPS)), text == CAST_OP_CHILD


# ATen matrix ops whose recorded shapes decide tensor-core eligibility (the Kineto parser
# keeps their input dims and types in ``details``)
MATRIX_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
              "aten::linear", "aten::_cudnn_rnn", "aten::lstm", "aten::_thnn_fused_lstm_cell")


def _ep(step: str) -> str:
    r"""``::ep::.*step|deep_ep\w*::.*step`` as in_line/in_word pieces (linear time)."""
    return in_line("::ep::", step) + "|" + in_line(in_word("deep_ep", "*", "::"), step)


# The collective a communication name performs, first match wins: an all-reduce before
# a bare reduce, a reduce-scatter before a scatter. DeepEP's expert-parallel kernels
# (dispatch, combine, their notify and layout steps) are all-to-all exchanges of their
# own; a name that says no kind (a host wrapper, an NVSHMEM barrier) is "other".
COLLECTIVE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rx, re.IGNORECASE))
    for kind, rx in (
        ("all_reduce", r"all_?reduce|all-reduce|CollectiveReduce|cross_device_reduce"),
        ("reduce_scatter", r"reduce_?scatter|reduce-scatter"),
        ("all_gather", r"all_?gather|all-gather"),
        ("all_to_all", r"all_?to_?all|all-to-all"),
        ("notify", _ep("notify")),
        ("dispatch", _ep("dispatch") + r"|\bdispatch"),
        ("combine", _ep("combine") + r"|\bcombine"),
        ("permute", r"collective-permute|collective_permute"),
        ("send_recv", r"send_?recv|\bsend\b|\brecv\b|(^|[:_])(send|recv)(_|-|\b)|"
                      + in_word("nccl", "*", "Send|Recv")),
        ("broadcast", r"broadcast"),
        ("reduce", in_word("nccl", "*", "_Reduce_")
         + r"|c10d::reduce_|^nccl:reduce$|\breduce\b"),
        ("barrier", r"barrier"),
    )
)


@functools.lru_cache(maxsize=1 << 12)
def collective_kind(name: str) -> str | None:
    """The collective a communication kernel or op performs (all_reduce, all_gather,
    reduce_scatter, all_to_all, dispatch, combine, notify, permute, send_recv, broadcast,
    reduce, barrier; "other" where the name says none), None for a name that is not
    communication."""
    if _category_of(name) != "communication":
        return None
    text = _text(name)
    for kind, rx in COLLECTIVE_KINDS:
        if rx.search(text):
            return kind
    return "other"
