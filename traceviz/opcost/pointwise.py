"""FLOPs and tensors moved of elementwise ops, reductions, copies and casts."""

from __future__ import annotations

from traceviz.opcost.shapes import (
    DTYPE_PRECISION,
    NO_DTYPE,
    SCALAR_TYPE,
    _Args,
    _Bad,
    _broadcast,
    _numel,
    _size,
)

# -- elementwise, reductions, copies ------------------------------------------------
# One FLOP per output element per arithmetic op; copies, casts, fills and gathers none.
_ARITH = frozenset([
    "add", "sub", "rsub", "mul", "div", "neg", "sigmoid", "tanh", "relu", "gelu", "silu",
    "exp", "log", "sqrt", "rsqrt", "pow", "abs", "reciprocal", "clamp", "clamp_min",
    "clamp_max", "where", "masked_fill", "threshold_backward", "sigmoid_backward",
    "tanh_backward", "gelu_backward", "silu_backward", "leaky_relu", "hardtanh", "addcmul",
    "addcdiv", "lerp", "mish", "sign", "sin", "cos", "erf", "native_dropout", "dropout"])
_COPIES = frozenset(["copy_", "clone", "contiguous", "fill_", "zero_", "_to_copy", "to", "cat",
                     "stack", "index_select", "embedding", "gather", "embedding_dense_backward"])
# softmax family: read the input, write as much (about 5 FLOPs per element: max, sub,
# exp, sum, divide, as TraceLens counts a softmax)
_SOFTMAX = frozenset(["softmax", "_softmax", "log_softmax", "_log_softmax"])
_SOFTMAX_BACKWARD = frozenset(["_softmax_backward_data", "_log_softmax_backward_data"])
_REDUCE = frozenset(["sum", "mean", "amax", "amin", "max", "min", "norm", "prod", "var", "std"])


def _base(name: str) -> str:
    base = name.split("::", 1)[1] if name.startswith("aten::") else ""
    return base


def _pointwise(base: str, a: _Args) -> tuple[int, list]:
    ts = [t for t in a.tensors() if t[0] is not None]
    if not ts:
        raise _Bad("no tensor argument with a recorded dtype (a tensor list's dtype is "
                   "not recorded)")
    foreach = base.startswith("_foreach_")
    inplace = base.endswith("_") and not base.startswith("_") or foreach
    plain = base.rstrip("_").removeprefix("_foreach_")
    if foreach:  # lists: the output list is the first list
        first = a.dims[0] if a.dims and isinstance(a.dims[0], list) else []
        outs = [(s, ts[0][1]) for s in first if isinstance(s, list)] or ts[:1]
        return (sum(_numel(s) for s, _ in outs) if plain in _ARITH or plain == "add"
                else 0), [*ts, *outs]
    if base in ("copy_",):
        return 0, ts[:2]  # read src, write dst
    if base in ("fill_", "zero_"):
        return 0, ts[:1]
    if base in ("_to_copy", "to"):
        code = next((int(c) for c in a.concrete[1:2] if str(c).isdigit()), None)
        out_type = SCALAR_TYPE.get(code, ts[0][1]) if code is not None else ts[0][1]
        return 0, [ts[0], (ts[0][0], out_type)]
    if base == "cat" or base == "stack":
        return 0, [*ts, *ts]
    if base == "gather":  # gather(self, dim, index): one element read per index
        index = next((t for t in ts[1:] if t[1] in ("long int", "int")), None)
        if index is None:
            raise _Bad("gather needs its index")
        out = (index[0], ts[0][1])
        return 0, [index, out, out]
    if base == "embedding_dense_backward":  # (grad, indices, num_weights, ...): a
        # scatter-add of the gradient rows into a [num_weights, dim] gradient
        grad, idx = ts[0], ts[1] if len(ts) > 1 else ts[0]
        rows = int(a.scalar(2)) if a.scalar(2).isdigit() else 0
        out = ([rows, grad[0][-1]], grad[1])
        return _numel(grad[0]), [grad, idx, out]
    if base in ("index_select", "embedding"):
        weight, index = (ts[0], ts[1]) if len(ts) > 1 else (ts[0], ts[0])
        row = _numel(weight[0][1:]) if base == "embedding" else _numel(weight[0][1:])
        out = ([*index[0], row], weight[1])
        return 0, [index, out, out]  # the rows read are the rows written
    if base in _SOFTMAX:
        return 5 * _numel(ts[0][0]), [ts[0], ts[0]]
    if base in _SOFTMAX_BACKWARD:
        return 3 * _numel(ts[0][0]), [*ts[:2], ts[0]]
    if base in _REDUCE:
        return _numel(ts[0][0]), ts[:1]  # the (smaller) output is not counted
    inputs, given_out = _split_out(plain, ts, inplace)
    out = (_broadcast([s for s, _ in inputs]), _result_type(inputs))
    if given_out is not None:  # an out= variant (DDP's mul_out): the result lands there
        out = given_out
    elif inplace:
        out = ts[0]
    return (_numel(out[0]) if plain in _ARITH else 0), [*inputs, out]


# tensor operands of the elementwise ops that take more than one (the rest take one); a
# recorded tensor beyond these is the out= argument
_ARITY = {"add": 2, "sub": 2, "rsub": 2, "mul": 2, "div": 2, "pow": 2, "where": 3,
          "masked_fill": 3, "threshold_backward": 2, "sigmoid_backward": 2,
          "tanh_backward": 2, "gelu_backward": 2, "silu_backward": 2, "addcmul": 3,
          "addcdiv": 3, "lerp": 3, "clamp": 3}


def _split_out(plain: str, ts: list, inplace: bool) -> tuple[list, tuple | None]:
    """(the operands read, the out= tensor written or None)."""
    arity = _ARITY.get(plain, 1)
    if not inplace and len(ts) > arity:
        return ts[:arity], ts[arity]
    return ts, None


def _result_type(ts: list) -> str:
    """PyTorch's type promotion, as far as the record tells: a 0-dim tensor does not
    promote tensors with dimensions of its kind (float * 0-dim double stays float), a
    floating-point type wins over an integer one, else the widest."""
    if any(t[1] == NO_DTYPE for t in ts):
        return NO_DTYPE
    dimmed = [t for t in ts if t[0]] or ts
    floats = [t for t in dimmed if t[1] in DTYPE_PRECISION or "complex" in t[1]]
    return max(floats or dimmed, key=lambda t: _size(t[1]))[1]


def _modelled_pointwise(base: str) -> bool:
    plain = base.rstrip("_").removeprefix("_foreach_")
    return (plain in _ARITH or base in _COPIES or plain in _COPIES or base in _SOFTMAX
            or base in _SOFTMAX_BACKWARD or base in _REDUCE)

