"""FLOPs and tensors moved of matrix, recurrent and attention ops, each formula beside
its source."""

from __future__ import annotations

import math
from collections.abc import Callable

from traceviz.opcost.shapes import (
    SHAPE_INCOMPLETE,
    _Args,
    _Bad,
    _bool_list,
    _broadcast,
    _int_list,
    _numel,
)


# -- matrix ops --------------------------------------------------------------------
# Source: a product of an MxK and a KxN matrix takes M*N*K multiply-adds (cuBLAS's GEMM
# FLOP count, 2*M*N*K). Batched: times the batch.
def _gemm(m: int, n: int, k: int, batch: int = 1) -> int:
    return 2 * batch * m * n * k


def _plain_tensors(a: _Args) -> list:
    """The tensor arguments in order, scalars skipped (TorchScript records aten::mm with
    two leading Scalar arguments)."""
    return [t for i in range(len(a.dims)) if (t := a.tensor(i))]


def _nth(a: _Args, n: int):
    ts = _plain_tensors(a)
    return ts[n] if n < len(ts) else None


def _mm(a: _Args, first: int) -> tuple[int, list]:
    x, y = _nth(a, first), _nth(a, first + 1)
    if not x or not y or len(x[0]) != 2 or len(y[0]) != 2:
        raise _Bad("mm needs two matrices")
    (m, k), (_, n) = x[0], y[0]
    return _gemm(m, n, k), [x, y, ([m, n], x[1])]


def _bmm(a: _Args, first: int) -> tuple[int, list]:
    x, y = _nth(a, first), _nth(a, first + 1)
    if not x or not y or len(x[0]) != 3 or len(y[0]) != 3:
        raise _Bad("bmm needs two batches of matrices")
    (b, m, k), (_, _, n) = x[0], y[0]
    return _gemm(m, n, k, b), [x, y, ([b, m, n], x[1])]


def _matmul(a: _Args) -> tuple[int, list]:
    """torch.matmul's rules: 1-D operands gain a dimension; leading dims broadcast."""
    x, y = a.tensor(0), a.tensor(1)
    if not x or not y or not x[0] or not y[0]:
        raise _Bad("matmul needs two tensors")
    xs = [1, *x[0]] if len(x[0]) == 1 else list(x[0])
    ys = [*y[0], 1] if len(y[0]) == 1 else list(y[0])
    batch = _broadcast([xs[:-2], ys[:-2]])
    m, k, n = xs[-2], xs[-1], ys[-1]
    return _gemm(m, n, k, math.prod(batch)), [x, y, ([*batch, m, n], x[1])]


def _linear(a: _Args) -> tuple[int, list]:
    """linear(x[..., K], W[N, K], b[N]): M = the product of x's leading dims."""
    x, w = a.tensor(0), a.tensor(1)
    if not x or not w or len(w[0]) != 2 or not x[0]:
        raise _Bad("linear needs an input and a weight matrix")
    n, k = w[0]
    m = _numel(x[0][:-1])
    bias = [b] if (b := a.tensor(2)) else []
    return _gemm(m, n, k) + (m * n if bias else 0), [x, w, *bias, ([*x[0][:-1], n], x[1])]


# argument positions of (stride, padding, dilation, transposed) per convolution op, from
# ATen's schemas (native_functions.yaml): the ops that launch kernels (cudnn_, miopen_,
# mkldnn_) order them differently from the ones users call
CONV_ARGS: dict[str, tuple[int, int, int, int | None]] = {
    "aten::convolution": (3, 4, 5, 6), "aten::_convolution": (3, 4, 5, 6),
    "aten::conv1d": (3, 4, 5, None), "aten::conv2d": (3, 4, 5, None),
    "aten::conv3d": (3, 4, 5, None), "aten::cudnn_convolution": (3, 2, 4, None),
    "aten::miopen_convolution": (4, 3, 5, None),
    "aten::mkldnn_convolution": (4, 3, 5, None),
}
# ops without a bias argument (the third is the padding)
_NO_BIAS = ("aten::cudnn_convolution",)
# the two halves of a convolution's backward in PyTorch before 1.11, each its own op with
# its own kernels: *_backward_input(self_size, grad_output, weight, padding, stride,
# dilation, groups, ...) and *_backward_weight(weight_size, grad_output, self, ...)
CONV_BACKWARD_PARTS: dict[str, str] = {
    "aten::cudnn_convolution_backward_input": "input",
    "aten::miopen_convolution_backward_input": "input",
    "aten::cudnn_convolution_backward_weight": "weight",
    "aten::miopen_convolution_backward_weight": "weight",
}


def _is_shape(v: object, rank: int) -> bool:
    return isinstance(v, list) and len(v) == rank and all(
        isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)


def _related(a: _Args) -> tuple[list, list, list] | None:
    """The [input, weight, output] shapes a related record gave (``conv:``), when all
    three are shapes of one rank."""
    c = a.conv
    if len(c) != 3 or not isinstance(c[0], list) or len(c[0]) < 3 \
            or not all(_is_shape(v, len(c[0])) for v in c):
        return None
    return c[0], c[1], c[2]


def _conv(a: _Args, name: str) -> tuple[int, list]:
    """Convolution: 2 * N * C_out * prod(output spatial) * C_in/groups * prod(kernel)
    (the direct-convolution count of cuDNN's documentation; the weight's second
    dimension is C_in/groups, so groups need no argument of their own), plus one per
    output element for a bias. The output's shape: a related record's (``conv:``: the
    gradient its backward received; no stride or padding needed), else from stride,
    padding and dilation in Concrete Inputs at the op's positions (``CONV_ARGS``);
    neither recorded: shape incomplete, no figures (a stride or padding assumed would
    count a stride-2 1x1 convolution four times over). A transposed convolution counts
    2 * numel(input) * prod(weight[1:])."""
    x, w = a.tensor(0), a.tensor(1)
    if not x or not w or len(x[0]) < 3 or len(x[0]) != len(w[0]):
        raise _Bad("convolution needs an input and a weight of the same rank")
    s_at, p_at, d_at, t_at = CONV_ARGS[name]
    bias = [b] if name not in _NO_BIAS and (b := a.tensor(2)) else []
    if t_at is not None and str(a.scalar(t_at)) == "True":
        return 2 * _numel(x[0]) * _numel(w[0][1:]), [x, w, *bias]
    rel = _related(a)
    if rel is not None and rel[0] == x[0] and rel[1] == w[0] \
            and rel[2][:2] == [x[0][0], w[0][0]]:
        out = list(rel[2])
    else:
        out = [x[0][0], w[0][0], *_output_spatial(a, x[0], w[0], (s_at, p_at, d_at))]
    flops = 2 * _numel(out) * _numel(w[0][1:]) + (_numel(out) if bias else 0)
    return flops, [x, w, *bias, (out, x[1])]


def _output_spatial(a: _Args, x: list, w: list, at: tuple[int, int, int]) -> list[int]:
    """The output's spatial size from the recorded stride, padding and dilation."""
    spatial = len(x) - 2
    s_at, p_at, d_at = at
    stride, dil = _int_list(a.scalar(s_at)), _int_list(a.scalar(d_at))
    pad_text = str(a.scalar(p_at)).strip("'\"")
    pad = [0] if pad_text == "valid" else _int_list(pad_text)
    if not stride or not dil or (not pad and pad_text != "same"):
        raise _Bad(f"{SHAPE_INCOMPLETE}: no stride, padding or dilation recorded (Concrete "
                   "Inputs) and no output shape: no FLOPs")
    stride, dil, pad = (v * spatial if len(v) == 1 else v for v in (stride, dil, pad or [0]))
    if pad_text == "same":  # conv*d(padding="same"): the output keeps the input's size
        out_sp = list(x[2:])
    else:
        out_sp = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
                  for i in range(spatial)]
    if any(d <= 0 for d in out_sp):
        raise _Bad(f"convolution output {out_sp} is empty")
    return out_sp


def _conv_backward_part(a: _Args, name: str) -> tuple[int, list]:
    """One gradient of a convolution (``CONV_BACKWARD_PARTS``): 2 * numel(grad_output) *
    prod(weight[1:]), the forward's count (the input's gradient is grad_output convolved
    with the weight, the weight's the input correlated with grad_output: as many
    multiply-adds). The size argument (self_size, weight_size) from Concrete Inputs, else
    from the enclosing backward op's record (``conv:``). The weight's gradient without
    the weight's shape: shape incomplete; the input's without the input's: FLOPs, no
    bytes."""
    go, other = a.tensor(1), a.tensor(2)
    if not go or not other or len(go[0]) < 3 or len(go[0]) != len(other[0]):
        raise _Bad("a convolution gradient needs grad_output and the input or weight")
    rank = len(go[0])
    size: list | None = _int_list(a.scalar(0)) or None
    rel = _related(a)
    wants_input = CONV_BACKWARD_PARTS[name] == "input"
    if size is None and rel is not None and rel[2] == go[0] \
            and rel[1 if wants_input else 0] == other[0]:
        size = rel[0 if wants_input else 1]
    if size is not None and not _is_shape(size, rank):
        size = None
    if wants_input:
        return 2 * _numel(go[0]) * _numel(other[0][1:]), [go, other, (size, go[1])]
    if size is None:
        raise _Bad(f"{SHAPE_INCOMPLETE}: the weight's shape is not recorded: no FLOPs")
    return 2 * _numel(go[0]) * _numel(size[1:]), [go, other, (size, go[1])]


def _conv_backward(a: _Args) -> tuple[int, list]:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask): the forward count (from
    grad_output's shape; a transposed one's from the input's) per gradient asked."""
    go, x, w = a.tensor(0), a.tensor(1), a.tensor(2)
    if not go or not x or not w:
        raise _Bad("convolution_backward needs grad_output, input and weight")
    mask = _bool_list(a.scalar(10)) or [True, True, False]
    small = x if str(a.scalar(7)) == "True" else go
    per = 2 * _numel(small[0]) * _numel(w[0][1:])
    out = [x] * mask[0] + [w] * mask[1]
    return per * (int(mask[0]) + int(mask[1])), [go, x, w, *out]


# -- recurrent ops -----------------------------------------------------------------
# Source: an LSTM layer computes, per time step and sequence, W_ih @ x_t and W_hh @ h_t-1
# (weights [4H, I] and [4H, H]; GRU 3H, vanilla RNN H; a projection W_hr [P, H]), i.e.
# 2 * T * B * rows * cols FLOPs per weight matrix (cuDNN's RNN documentation; the LSTM
# studies' count, "2 x 4 x (I + H) x H per step"). Every 2-D weight in the op's weight
# list is one such product over all T * B positions of every direction. The pointwise
# gate arithmetic (about 20 FLOPs per hidden unit) is not counted. Backward: the data
# gradient costs as much as the forward, the weight gradient as much again
# (output_mask[3]), the usual 2x of backward propagation.
_GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # cuDNN/ATen RNN mode: RNN_RELU, RNN_TANH, LSTM, GRU


def _rnn(a: _Args, weights_at: int, mult: int, mode_at: int = -1,
         hidden_at: int = -1) -> tuple[int, list]:
    x = a.tensor(0)
    if not x or len(x[0]) < 2:
        raise _Bad("an RNN op needs its input sequence")
    positions = _numel(x[0][:-1])  # T * B (time- or batch-major); packed: sum of lengths
    wl = a.dims[weights_at] if weights_at < len(a.dims) else None
    if not isinstance(wl, list) or not wl or not all(isinstance(w, list) for w in wl):
        raise _Bad("an RNN op needs its weight list")
    if any(len(w) == 2 and min(w) > 1 for w in wl):
        mats = [_numel(w) for w in wl if len(w) == 2]
    else:
        # weights recorded flattened ([N, 1] views of the weight buffer, as under
        # autocast): a matrix is a weight larger than one gate bias (gates x hidden)
        mode, hidden = a.scalar(mode_at), a.scalar(hidden_at)
        if mode_at < 0 or not mode.isdigit() or not hidden.isdigit() \
                or int(mode) not in _GATES:
            raise _Bad("flattened RNN weights without mode and hidden size")
        bias = _GATES[int(mode)] * int(hidden)
        mats = [n for w in wl if (n := _numel(w)) > bias]
    flops = sum(2 * positions * n for n in mats) * mult
    weights = [(w, x[1]) for w in wl if w]
    return flops, weights


def _cudnn_rnn(a: _Args, backward: bool) -> tuple[int, list]:
    """aten::_cudnn_rnn(input, weight[], stride0, weight_buf, hx, cx, mode, hidden,
    proj, layers, batch_first, dropout, train, bidirectional, batch_sizes, state) and
    its backward (input, weight[], stride0, weight_buf, hx, cx, output, grad_output,
    grad_hy, grad_cy, ..., reserve, output_mask). weight_buf is the same memory as the
    weight list: counted once."""
    mult = 1
    if backward:
        mask = _bool_list(a.scalar(len(a.concrete) - 1)) if a.concrete else []
        mult = 1 + int(mask[3] if len(mask) > 3 else True)
    # mode and hidden size: arguments 6 and 7 forward, 10 and 11 backward
    flops, weights = _rnn(a, 1, mult, 10 if backward else 6, 11 if backward else 7)
    x = a.tensor(0)
    assert x is not None  # _rnn checked it
    states = [t for i in (4, 5) if (t := a.tensor(i))]
    if backward:
        rest = [t for i in range(6, len(a.dims)) if (t := a.tensor(i))]
        # read: everything recorded; written: grads of input, states and weights
        return flops, [x, *weights, *states, *rest, x, *states, *weights]
    hidden = states[0][0][-1] if states else 0
    directions = 2 if a.scalar(13) == "True" else 1
    out = ([*x[0][:-1], hidden * directions], x[1])
    return flops, [x, *weights, *states, out, *states]


def _mkldnn_rnn_layer(a: _Args, backward: bool) -> tuple[int, list]:
    """oneDNN's LSTM layer (CPU nn.LSTM): mkldnn_rnn_layer(input, w_ih, w_hh, b_ih,
    b_hh, hx, cx, reverse, batch_sizes, mode, hidden, layers, has_biases, bidirectional,
    batch_first, train): one layer, one direction; backward 2x (data and weights)."""
    x, wi, wh = a.tensor(0), a.tensor(1), a.tensor(2)
    if not x or not wi or not wh or len(x[0]) < 2:
        raise _Bad("mkldnn_rnn_layer needs input and weights")
    positions = _numel(x[0][:-1])
    flops = 2 * positions * (_numel(wi[0]) + _numel(wh[0])) * (2 if backward else 1)
    ts = a.tensors()
    hidden = wh[0][1]
    out = ([*x[0][:-1], hidden], x[1])
    return flops, [*ts, out] if not backward else [*ts, *ts[:3]]


# -- attention ---------------------------------------------------------------------
# Source: FlashAttention (Dao et al. 2022), section 3: forward 4 * B * H * Lq * Lk * d
# FLOPs (QK^T and PV), halved with a causal mask; backward 2.5x forward (five matrix
# products against two).
# per op: (position of is_causal, or of custom_mask_type (nonzero: causal); whether the
# tensors are [B, L, H, d] rather than [B, H, L, d]), from ATen's schemas
ATTENTION_ARGS: dict[str, tuple[int, bool, bool]] = {
    "aten::scaled_dot_product_attention": (5, False, False),
    "aten::_scaled_dot_product_flash_attention": (4, False, False),
    "aten::_scaled_dot_product_efficient_attention": (6, False, False),
    "aten::_scaled_dot_product_cudnn_attention": (6, False, False),
    "aten::_flash_attention_forward": (8, False, True),
    "aten::_efficient_attention_forward": (9, True, True),
    "aten::_scaled_dot_product_flash_attention_backward": (11, False, False),
    "aten::_scaled_dot_product_efficient_attention_backward": (11, False, False),
    "aten::_scaled_dot_product_cudnn_attention_backward": (14, False, False),
    "aten::_flash_attention_backward": (11, False, True),
    "aten::_efficient_attention_backward": (14, True, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (4, False, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (7, False, False),
}


def _attention(a: _Args, name: str) -> tuple[int, list]:
    backward = name.endswith("_backward")
    causal_at, mask_type, blhd = ATTENTION_ARGS[name]
    first = 1 if backward else 0  # backward ops start with grad_out
    q, k, v = a.tensor(first), a.tensor(first + 1), a.tensor(first + 2)
    if not q or not k or not v or len(q[0]) < 3 or len(k[0]) < 3:
        raise _Bad("attention needs query, key and value")
    if blhd:  # [B, L, H, d]
        lq, lk = q[0][-3], k[0][-3]
        heads = _numel(q[0][:-3]) * q[0][-2]
    else:  # [B, H, L, d]
        lq, lk = q[0][-2], k[0][-2]
        heads = _numel(q[0][:-2])
    d, dv = q[0][-1], v[0][-1]
    flops = 2 * heads * lq * lk * (d + dv)
    flag = str(a.scalar(causal_at))
    if (flag.isdigit() and int(flag) != 0) if mask_type else flag == "True":
        flops //= 2
    out = (list(q[0][:-1]) + [dv], q[1])
    if backward:
        go = a.tensor(0)
        return flops * 5 // 2, [t for t in (go, q, k, v, out, q, k, v) if t]
    return flops, [q, k, v, out]


def _named(formula: Callable[[_Args, str], tuple[int, list]],
           name: str) -> Callable[[_Args], tuple[int, list]]:
    """``formula`` for the op ``name`` (one formula serves a family of ops)."""
    return lambda a: formula(a, name)


_MATRIX: dict[str, Callable[[_Args], tuple[int, list]]] = {
    "aten::mm": lambda a: _mm(a, 0),
    "aten::addmm": lambda a: _with_first(_mm(a, 1), a),
    "aten::bmm": lambda a: _bmm(a, 0),
    "aten::baddbmm": lambda a: _with_first(_bmm(a, 1), a),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": lambda a: _mm(a, 0),
    **{name: _named(_conv, name) for name in CONV_ARGS},
    **{name: _named(_conv_backward_part, name) for name in CONV_BACKWARD_PARTS},
    "aten::convolution_backward": _conv_backward,
    **{name: _named(_attention, name) for name in ATTENTION_ARGS},
    "aten::_cudnn_rnn": lambda a: _cudnn_rnn(a, False),
    "aten::_cudnn_rnn_backward": lambda a: _cudnn_rnn(a, True),
    "aten::lstm": lambda a: _with_input(_rnn(a, 2, 1), a),
    "aten::mkldnn_rnn_layer": lambda a: _mkldnn_rnn_layer(a, False),
    "aten::mkldnn_rnn_layer_backward": lambda a: _mkldnn_rnn_layer(a, True),
}
MODELLED_MATRIX_OPS = tuple(_MATRIX)
# ops whose scalar arguments (Concrete Inputs) a formula reads: the parser keeps them
CONCRETE_OPS = ("aten::embedding_dense_backward", "aten::_cudnn_rnn",
                "aten::_cudnn_rnn_backward", "aten::convolution_backward", "aten::_to_copy",
                "aten::to", *CONV_ARGS, *CONV_BACKWARD_PARTS, *ATTENTION_ARGS)


def _with_first(r: tuple[int, list], a: _Args) -> tuple[int, list]:
    """addmm/baddbmm: the bias (or C) argument is read too, and added to each output
    element (one FLOP each)."""
    c = _nth(a, 0)
    out = r[1][-1]
    return r[0] + (_numel(out[0]) if c else 0), ([c] if c else []) + r[1]


def _with_input(r: tuple[int, list], a: _Args) -> tuple[int, list]:
    x = a.tensor(0)
    return r[0], ([x] if x else []) + r[1]

