"""FLOPs and tensors moved of matrix, recurrent and attention ops, each formula beside
its source."""

from __future__ import annotations

import math

from traceviz.opcost.shapes import (
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


def _conv(a: _Args, backward: bool) -> tuple[int, list]:
    """Convolution: 2 * N * C_out * prod(output spatial) * C_in/groups * prod(kernel)
    (the direct-convolution count of cuDNN's documentation). Forward ops take stride,
    padding and dilation from Concrete Inputs; convolution_backward reads the output
    shape from its grad_output and doubles per gradient asked (output_mask)."""
    if backward:  # (grad_output, input, weight, bias_sizes, stride, padding, dilation,
        # transposed, output_padding, groups, output_mask)
        go, x, w = a.tensor(0), a.tensor(1), a.tensor(2)
        if not go or not x or not w:
            raise _Bad("convolution_backward needs grad_output, input and weight")
        mask = _bool_list(a.scalar(10)) or [True, True, False]
        per = 2 * _numel(go[0]) * _numel(w[0][1:])
        out = [x] * mask[0] + [w] * mask[1]
        return per * (int(mask[0]) + int(mask[1])), [go, x, w, *out]
    x, w = a.tensor(0), a.tensor(1)
    if not x or not w or len(x[0]) < 3 or len(x[0]) != len(w[0]):
        raise _Bad("convolution needs an input and a weight of the same rank")
    spatial = len(x[0]) - 2
    stride = _int_list(a.scalar(3)) or [1] * spatial
    pad = _int_list(a.scalar(4)) or [0] * spatial
    dil = _int_list(a.scalar(5)) or [1] * spatial
    if str(a.scalar(6)) == "True":
        raise _Bad("transposed convolution has no model")
    stride, pad, dil = (v * spatial if len(v) == 1 else v for v in (stride, pad, dil))
    out_sp = [(x[0][2 + i] + 2 * pad[i] - dil[i] * (w[0][2 + i] - 1) - 1) // stride[i] + 1
              for i in range(spatial)]
    if any(d <= 0 for d in out_sp):
        raise _Bad(f"convolution output {out_sp} is empty")
    out = [x[0][0], w[0][0], *out_sp]
    bias = [b] if (b := a.tensor(2)) else []
    flops = 2 * _numel(out) * _numel(w[0][1:]) + (_numel(out) if bias else 0)
    return flops, [x, w, *bias, (out, x[1])]


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
def _attention(a: _Args, backward: bool) -> tuple[int, list]:
    first = 1 if backward else 0  # backward ops start with grad_out
    q, k, v = a.tensor(first), a.tensor(first + 1), a.tensor(first + 2)
    if not q or not k or not v or len(q[0]) < 3:
        raise _Bad("attention needs query, key and value")
    lq, d = q[0][-2], q[0][-1]
    lk, dv = k[0][-2], v[0][-1]
    heads = _numel(q[0][:-2])
    flops = 2 * heads * lq * lk * (d + dv)
    if any(s == "True" for s in a.concrete[3:6]):  # is_causal among the flags
        flops //= 2
    out = (list(q[0][:-1]) + [dv], q[1])
    if backward:
        go = a.tensor(0)
        return flops * 5 // 2, [t for t in (go, q, k, v, out, q, k, v) if t]
    return flops, [q, k, v, out]


_MATRIX = {
    "aten::mm": lambda a: _mm(a, 0),
    "aten::addmm": lambda a: _with_first(_mm(a, 1), a),
    "aten::bmm": lambda a: _bmm(a, 0),
    "aten::baddbmm": lambda a: _with_first(_bmm(a, 1), a),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::_scaled_mm": lambda a: _mm(a, 0),
    "aten::convolution": lambda a: _conv(a, False),
    "aten::_convolution": lambda a: _conv(a, False),
    "aten::cudnn_convolution": lambda a: _conv(a, False),
    "aten::mkldnn_convolution": lambda a: _conv(a, False),
    "aten::conv1d": lambda a: _conv(a, False),
    "aten::conv2d": lambda a: _conv(a, False),
    "aten::conv3d": lambda a: _conv(a, False),
    "aten::convolution_backward": lambda a: _conv(a, True),
    "aten::_cudnn_rnn": lambda a: _cudnn_rnn(a, False),
    "aten::_cudnn_rnn_backward": lambda a: _cudnn_rnn(a, True),
    "aten::lstm": lambda a: _with_input(_rnn(a, 2, 1), a),
    "aten::mkldnn_rnn_layer": lambda a: _mkldnn_rnn_layer(a, False),
    "aten::mkldnn_rnn_layer_backward": lambda a: _mkldnn_rnn_layer(a, True),
    "aten::scaled_dot_product_attention": lambda a: _attention(a, False),
    "aten::_scaled_dot_product_flash_attention": lambda a: _attention(a, False),
    "aten::_scaled_dot_product_efficient_attention": lambda a: _attention(a, False),
    "aten::_scaled_dot_product_cudnn_attention": lambda a: _attention(a, False),
    "aten::_flash_attention_forward": lambda a: _attention(a, False),
    "aten::_efficient_attention_forward": lambda a: _attention(a, False),
    "aten::_scaled_dot_product_flash_attention_backward": lambda a: _attention(a, True),
    "aten::_scaled_dot_product_efficient_attention_backward": lambda a: _attention(a, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": lambda a: _attention(a, True),
    "aten::_flash_attention_backward": lambda a: _attention(a, True),
    "aten::_efficient_attention_backward": lambda a: _attention(a, True),
}
MODELLED_MATRIX_OPS = tuple(_MATRIX)
# ops whose scalar arguments (Concrete Inputs) a formula reads: the parser keeps them
CONCRETE_OPS = ("aten::embedding_dense_backward", "aten::_cudnn_rnn",
                "aten::_cudnn_rnn_backward", "aten::convolution",
                "aten::_convolution", "aten::cudnn_convolution", "aten::mkldnn_convolution",
                "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution_backward",
                "aten::_to_copy", "aten::to", "aten::scaled_dot_product_attention",
                "aten::_scaled_dot_product_flash_attention",
                "aten::_scaled_dot_product_efficient_attention",
                "aten::_scaled_dot_product_cudnn_attention")


def _with_first(r: tuple[int, list], a: _Args) -> tuple[int, list]:
    """addmm/baddbmm: the bias (or C) argument is read too, and added to each output
    element (one FLOP each)."""
    c = _nth(a, 0)
    out = r[1][-1]
    return r[0] + (_numel(out[0]) if c else 0), ([c] if c else []) + r[1]


def _with_input(r: tuple[int, list], a: _Args) -> tuple[int, list]:
    x = a.tensor(0)
    return r[0], ([x] if x else []) + r[1]

