"""The PyTorch LSTM variants. Imported only inside a runner process (or a test).

Every variant maps ``x`` [seq, batch, input] to ``(out [seq, batch, hidden], (h_n, c_n))``
with ``nn.LSTM``'s gate order (i, f, g, o) and parameters, so ``load_lstm(ref)`` gives
them all the same weights and they compute the same function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from traceviz.runners.torch.graphs import ForwardGraph


def _zeros(x: Tensor, hidden: int) -> Tensor:
    return torch.zeros(x.size(1), hidden, dtype=x.dtype, device=x.device)


def _ref_weights(ref: nn.LSTM, layer: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return tuple(getattr(ref, f"{n}_l{layer}").detach()
                 for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))


class CudnnLSTM(nn.Module):
    """nn.LSTM: cuDNN on GPU, oneDNN (or ATen) on CPU."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.rnn = nn.LSTM(input_size, hidden, layers)

    def load_lstm(self, ref: nn.LSTM) -> None:
        self.rnn.load_state_dict(ref.state_dict())

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        out, (h, c) = self.rnn(x)
        return out, (h, c)


class CellLSTM(nn.Module):
    """A Python loop over nn.LSTMCell, layer by layer."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.hidden = hidden
        self.cells = nn.ModuleList(
            nn.LSTMCell(input_size if i == 0 else hidden, hidden) for i in range(layers)
        )

    def load_lstm(self, ref: nn.LSTM) -> None:
        for i, cell in enumerate(self.cells):
            w_ih, w_hh, b_ih, b_hh = _ref_weights(ref, i)
            cell.load_state_dict({"weight_ih": w_ih, "weight_hh": w_hh,
                                  "bias_ih": b_ih, "bias_hh": b_hh})

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        hs, cs = [], []
        for cell in self.cells:
            h = c = _zeros(x, self.hidden)
            outs = []
            for t in range(x.size(0)):
                h, c = cell(x[t], (h, c))
                outs.append(h)
            x = torch.stack(outs)
            hs.append(h)
            cs.append(c)
        return x, (torch.stack(hs), torch.stack(cs))


def cell_step(x: Tensor, h: Tensor, c: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor,
              b_hh: Tensor) -> tuple[Tensor, Tensor]:
    """One fine-grained LSTM step (gate order i, f, g, o); TorchScript- and compile-able."""
    gates = torch.mm(x, w_ih.t()) + b_ih + torch.mm(h, w_hh.t()) + b_hh
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class FineLayer(nn.Module):
    """One layer of fine-grained gate ops; TorchScript-compatible."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden, hidden))
        self.bias_ih = nn.Parameter(torch.zeros(4 * hidden))
        self.bias_hh = nn.Parameter(torch.zeros(4 * hidden))
        bound = hidden ** -0.5
        for p in (self.weight_ih, self.weight_hh):
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h = torch.zeros(x.size(1), self.hidden, dtype=x.dtype, device=x.device)
        c = torch.zeros(x.size(1), self.hidden, dtype=x.dtype, device=x.device)
        outs: list[Tensor] = []
        for t in range(x.size(0)):
            h, c = cell_step(x[t], h, c, self.weight_ih, self.weight_hh, self.bias_ih,
                             self.bias_hh)
            outs.append(h)
        return torch.stack(outs), h, c


class _Layered(nn.Module):
    """Stacks ``layer`` modules that take [seq, b, in] and return (out, h, c)."""

    layer: type[nn.Module]

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer(input_size if i == 0 else hidden, hidden) for i in range(layers)
        )

    def load_lstm(self, ref: nn.LSTM) -> None:
        for i, layer in enumerate(self.layers):
            layer.load_weights(*_ref_weights(ref, i))  # type: ignore[operator]  # a ModuleList
            # item is typed as Module, whose unknown attributes read as Tensor

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        hs: list[Tensor] = []
        cs: list[Tensor] = []
        for layer in self.layers:
            x, h, c = layer(x)
            hs.append(h)
            cs.append(c)
        return x, (torch.stack(hs), torch.stack(cs))


class _FineWeights:
    weight_ih: nn.Parameter
    weight_hh: nn.Parameter
    bias_ih: nn.Parameter
    bias_hh: nn.Parameter

    def load_weights(self, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> None:
        with torch.no_grad():
            self.weight_ih.copy_(w_ih)
            self.weight_hh.copy_(w_hh)
            self.bias_ih.copy_(b_ih)
            self.bias_hh.copy_(b_hh)


class FineLayerW(FineLayer, _FineWeights):
    pass


class FineLSTM(_Layered):
    """Fine-grained gate ops, eager: many small kernels per step (launch-bound on GPU)."""

    layer = FineLayerW


class JitLSTM(nn.Module):
    """FineLSTM compiled by torch.jit.script (a JIT-compiled fine-grained LSTM)."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.inner = FineLSTM(input_size, hidden, layers)
        self.scripted: Callable | None = None

    def load_lstm(self, ref: nn.LSTM) -> None:
        self.inner.load_lstm(ref)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if self.scripted is None:  # script after weights are final; shares the parameters
            self.scripted = torch.jit.script(self.inner)
        return self.scripted(x)


class CompiledLayer(FineLayerW):
    """The fine-grained cell step under torch.compile (compiled once, static shapes)."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__(input_size, hidden)
        self.step = torch.compile(cell_step, dynamic=False)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h = c = _zeros(x, self.hidden)
        outs = []
        for t in range(x.size(0)):
            h, c = self.step(x[t], h, c, self.weight_ih, self.weight_hh, self.bias_ih,
                             self.bias_hh)
            outs.append(h)
        return torch.stack(outs), h, c


class CompileLSTM(_Layered):
    layer = CompiledLayer


class StaticLSTM(nn.Module):
    """The LSTMCell loop traced (torch.jit.trace) into one static, unrolled graph."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.inner = CellLSTM(input_size, hidden, layers)
        self.traced: Callable | None = None

    def load_lstm(self, ref: nn.LSTM) -> None:
        self.inner.load_lstm(ref)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if self.traced is None:  # the graph is specialised to this input's shape
            with torch.autocast(x.device.type, enabled=False):
                self.traced = torch.jit.trace(self.inner, (x.detach(),), check_trace=False)
        return self.traced(x)


class Naive8Layer(nn.Module):
    """Eight GEMMs per step: one per gate for the input and one per gate for h."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.w_x = nn.ParameterList(nn.Parameter(torch.empty(hidden, input_size))
                                    for _ in range(4))
        self.w_h = nn.ParameterList(nn.Parameter(torch.empty(hidden, hidden)) for _ in range(4))
        self.b = nn.ParameterList(nn.Parameter(torch.zeros(hidden)) for _ in range(4))
        for p in (*self.w_x, *self.w_h):
            nn.init.uniform_(p, -hidden ** -0.5, hidden ** -0.5)

    def load_weights(self, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> None:
        with torch.no_grad():
            for k, (wx, wh, bi, bh) in enumerate(zip(w_ih.chunk(4), w_hh.chunk(4),
                                                     b_ih.chunk(4), b_hh.chunk(4), strict=True)):
                self.w_x[k].copy_(wx)
                self.w_h[k].copy_(wh)
                self.b[k].copy_(bi + bh)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h = c = _zeros(x, self.hidden)
        outs = []
        for t in range(x.size(0)):
            i, f, g, o = (torch.mm(x[t], self.w_x[k].t()) + torch.mm(h, self.w_h[k].t())
                          + self.b[k] for k in range(4))
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs), h, c


class Naive8LSTM(_Layered):
    layer = Naive8Layer


@torch.jit.script
def lstm_pointwise(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """All of a step's elementwise work in one scripted function (fusible on GPU)."""
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class FusedLayer(FineLayerW):
    """One GEMM for the input projection of all steps, then per step one GEMM + pointwise."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        seq, batch = x.size(0), x.size(1)
        xw = torch.addmm(self.bias_ih + self.bias_hh, x.reshape(seq * batch, -1),
                         self.weight_ih.t()).view(seq, batch, -1)
        h = c = torch.zeros(batch, self.hidden, dtype=xw.dtype, device=x.device)
        w_hh_t = self.weight_hh.t()
        outs = []
        for t in range(seq):
            gates = torch.addmm(xw[t], h, w_hh_t)
            h, c = lstm_pointwise(gates, c)
            outs.append(h)
        return torch.stack(outs), h, c


class FusedLSTM(_Layered):
    layer = FusedLayer


class GraphLSTM(nn.Module):
    """fused_torch captured once as CUDA graphs and replayed.

    Training: ``torch.cuda.make_graphed_callables`` (forward and backward graphs).
    Inference (grad disabled): the forward pass captured by ``graphs.ForwardGraph``
    (one ``torch.cuda.graph`` capture, replayed after copying the new input into the
    captured input buffer).
    """

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.inner = FusedLSTM(input_size, hidden, layers)
        self.graphed: Any = None  # a graphed callable once the first batch is seen
        self.fwd: Any = None  # the forward pass's ForwardGraph, once one ran without grad

    def load_lstm(self, ref: nn.LSTM) -> None:
        self.inner.load_lstm(ref)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if x.device.type != "cuda":
            raise RuntimeError("graph_torch needs a CUDA device (CUDA graphs)")
        if torch.is_grad_enabled():
            if self.graphed is None:
                sample = x.detach().clone().requires_grad_(x.requires_grad)
                self.graphed = torch.cuda.make_graphed_callables(self.inner, (sample,))
            return self.graphed(x)
        if self.fwd is None:
            self.fwd = ForwardGraph(self.inner)
        return self.fwd(x)
