"""Reading an op's recorded shapes, dtypes and scalar arguments (``details``)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

INT64_MAX = 2**63 - 1

# bytes per element of the dtype names torch.profiler records (c10 type names)
DTYPE_BYTES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2, "signed char": 1,
    "unsigned char": 1,
    "bool": 1, "c10::quint8": 1, "c10::qint8": 1, "c10::qint32": 4,
}
# the precision a peak is looked up by (peaks.py); integer types have no FLOP peak here
DTYPE_PRECISION = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
}
# ATen ScalarType codes, as Concrete Inputs give a ``dtype=`` argument
SCALAR_TYPE = {5: "c10::Half", 6: "float", 7: "double", 15: "c10::BFloat16", 4: "long int",
               3: "int", 11: "bool", 0: "unsigned char", 1: "signed char", 2: "short int",
               23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn"}



class _Bad(ValueError):
    """A shape or dtype the formulas cannot use (the message is the note)."""


class _NoDtype(_Bad):
    """The record has shapes but no dtypes: FLOPs can be counted, bytes cannot."""


class _NoShape(_NoDtype):
    """A tensor the op writes has no recorded shape: FLOPs can be counted, bytes cannot."""


# an op whose FLOPs need a shape or a scalar argument the trace did not record: no
# figure, never one from a guessed value (stride 1, padding 0)
SHAPE_INCOMPLETE = "shape incomplete"


NO_DTYPE = "?"


def _numel(shape: object) -> int:
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                              for d in shape):
        raise _Bad("a shape is not a list of integers")
    if any(d < 0 for d in shape):
        raise _Bad(f"negative dimension in {shape}")
    return math.prod(shape)


def _size(dtype: str) -> int:
    if dtype == NO_DTYPE:
        raise _NoDtype("no dtypes recorded (NVTX sizes carry none): no bytes")
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise _Bad(f"unknown dtype {dtype!r}") from None


@dataclass(frozen=True)
class _Args:
    dims: list
    types: list
    concrete: list
    # a convolution's [input, weight, output] shapes as a related record gives them
    # (efficiency/conv.py: its backward's, the enclosing backward op's); [] where none
    conv: list = field(default_factory=list)

    def tensor(self, i: int) -> tuple[list[int], str] | None:
        """Argument i as (shape, dtype) when it is a tensor (a recorded dtype with a
        shape); None for scalars, lists and absent arguments. A record without dtypes
        (NVTX sizes): every non-empty shape is a tensor of dtype ``NO_DTYPE``."""
        if not self.types and i < len(self.dims):
            shape = self.dims[i]
            return (shape, NO_DTYPE) if isinstance(shape, list) and shape and all(
                isinstance(d, int) for d in shape) else None
        if i >= len(self.dims) or i >= len(self.types):
            return None
        shape, dtype = self.dims[i], self.types[i]
        if not isinstance(dtype, str) or dtype in ("", "Scalar", "ScalarList", "TensorList",
                                                   "GenericList") \
                or not isinstance(shape, list) or any(isinstance(d, list) for d in shape):
            return None
        return shape, dtype

    def tensors(self) -> list[tuple[list[int], str]]:
        """Every tensor argument, tensors inside a TensorList too (dtype of the list
        unknown in the record: that of the first plain tensor argument)."""
        out = [t for i in range(len(self.dims)) if (t := self.tensor(i))]
        default = out[0][1] if out else None
        for shape, dtype in zip(self.dims, self.types, strict=False):
            if dtype == "TensorList" and isinstance(shape, list):
                for s in shape:
                    if s and default is not None:
                        out.append((s, default))
        return out

    def scalar(self, i: int) -> str:
        return str(self.concrete[i]) if i < len(self.concrete) else ""


_FIELD = re.compile(r"(dims|types|concrete|conv):")


def parse_details(details: str) -> _Args | None:
    """``dims:[...] types:[...] concrete:[...] conv:[...]`` -> the lists; None without
    dims."""
    if not details.startswith("dims:"):
        return None
    parts = _FIELD.split(details)
    fields: dict[str, object] = {}
    for key, text in zip(parts[1::2], parts[2::2], strict=False):
        try:
            fields[key] = json.loads(text.strip())
        except (ValueError, RecursionError):
            return None
    dims, types = fields.get("dims"), fields.get("types")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    concrete, conv = fields.get("concrete"), fields.get("conv")
    return _Args(dims, types, concrete if isinstance(concrete, list) else [],
                 conv if isinstance(conv, list) else [])


def _bytes_of(tensors: list[tuple[list[int] | None, str]]) -> int:
    """Bytes of the tensors; a shape None (a gradient whose shape the trace did not
    record) leaves the op without bytes."""
    if any(s is None for s, _ in tensors):
        raise _NoShape(f"{SHAPE_INCOMPLETE}: a written tensor's shape is not recorded: "
                       "no bytes")
    return sum(_numel(s) * _size(t) for s, t in tensors)


def _broadcast(shapes: list[list[int]]) -> list[int]:
    """NumPy broadcasting of the shapes (the output shape of an elementwise op)."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, start=n - len(s)):
            if d != 1:
                if out[i] not in (1, d):
                    raise _Bad(f"shapes {shapes} do not broadcast")
                out[i] = d
    return out


def _int_list(text: str) -> list[int]:
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        return []
    return [int(i) for i in v] if isinstance(v, list) and all(isinstance(i, int) for i in v) \
        else []


def _bool_list(text: str) -> list[bool]:
    found = re.findall(r"True|False", text)
    return [t == "True" for t in found]

