"""The rungs of the CUDA LSTM study's optimization ladder that ``lstms.py`` lacks, and
the factorized LSTM and the whole-model ``torch.compile``. Imported only inside a runner
process (or a test).

The ladder, after ``naive8_torch`` (8 GEMMs per step) and ``fine_torch`` (combined
GEMMs): ``streams_torch`` (the input GEMMs on a side stream, the recurrent ones on the
main stream, events between them), ``fused_torch`` (fused pointwise, in
``lstms.py``), ``transposed_torch`` (weights stored pre-transposed),
``wavefront_torch`` (layer l at step t beside layer l+1 at step t-1, one stream per
layer). On a CPU there are no streams: the same calls run in order, same results.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor, nn

from traceviz.runners.torch.lstms import (
    FineLayerW,
    FineLSTM,
    _Layered,
    _ref_weights,
    _zeros,
    lstm_pointwise,
)

CPU_IN_ORDER = "runs its CUDA streams' work in order on a CPU (there are no streams to overlap)"


class StreamSet:
    """Side CUDA streams and the events between them; on a CPU, nothing: each call runs
    in program order, which already satisfies every dependency."""

    def __init__(self, device: torch.device, count: int):
        self.cuda = device.type == "cuda"
        self.streams = [torch.cuda.Stream(device) for _ in range(count)] if self.cuda else []

    def fork(self) -> None:
        """Every side stream waits for what the current stream issued so far (the inputs
        they read are ready)."""
        for s in self.streams:
            s.wait_stream(torch.cuda.current_stream())

    def on(self, k: int) -> contextlib.AbstractContextManager:
        """Issue what follows on side stream k."""
        if not self.cuda:
            return contextlib.nullcontext()
        return torch.cuda.stream(self.streams[k])

    def mark(self) -> Any:
        """An event recorded on the current stream (None on a CPU)."""
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record()
        return event

    def wait(self, event: Any, *tensors: Tensor) -> None:
        """The current stream waits for ``event``; ``tensors`` made on another stream are
        marked as used here, so the caching allocator does not hand their memory back
        to their own stream too early."""
        if event is None:
            return
        current = torch.cuda.current_stream()
        current.wait_event(event)
        for t in tensors:
            t.record_stream(current)

    def join(self) -> None:
        """The current stream waits for every side stream (the outputs are complete)."""
        for s in self.streams:
            torch.cuda.current_stream().wait_stream(s)


class _StreamsLayer(FineLayerW):
    """Combined GEMMs (one input and one recurrent GEMM per step, gates together): the
    input GEMMs, which do not depend on h, on a side stream ahead of the recurrence."""

    streams: StreamSet | None = None

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if self.streams is None or self.streams.cuda != (x.device.type == "cuda"):
            self.streams = StreamSet(x.device, 1)
        s = self.streams
        bias = self.bias_ih + self.bias_hh
        s.fork()
        with s.on(0):  # every step's input GEMM, each followed by its event
            xws = [(torch.addmm(bias, x[t], self.weight_ih.t()), s.mark())
                   for t in range(x.size(0))]
        h = c = _zeros(x, self.hidden)
        outs = []
        for xw, ready in xws:
            s.wait(ready, xw)
            gates = xw + torch.mm(h, self.weight_hh.t())
            i, f, g, o = gates.chunk(4, 1)  # unfused pointwise: the next rung fuses it
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs), h, c


class StreamsLSTM(_Layered):
    layer = _StreamsLayer
    cpu_note = CPU_IN_ORDER


class _TransposedWeights(nn.Module):
    """nn.LSTM's weights stored transposed ([in, 4H] and [H, 4H], contiguous), so each
    GEMM reads its weight row-major as stored, with no transposed view."""

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        bound = hidden ** -0.5
        self.w_ih_t = nn.Parameter(torch.empty(input_size, 4 * hidden).uniform_(-bound, bound))
        self.w_hh_t = nn.Parameter(torch.empty(hidden, 4 * hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(4 * hidden))

    def load_weights(self, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> None:
        with torch.no_grad():
            self.w_ih_t.copy_(w_ih.t())
            self.w_hh_t.copy_(w_hh.t())
            self.bias.copy_(b_ih + b_hh)


class _TransposedLayer(_TransposedWeights):
    """fused_torch's schedule (all steps' input projection in one GEMM, then one GEMM and
    one fused pointwise step per step) over pre-transposed weights."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        seq, batch = x.size(0), x.size(1)
        xw = torch.addmm(self.bias, x.reshape(seq * batch, -1), self.w_ih_t).view(seq, batch, -1)
        h = c = torch.zeros(batch, self.hidden, dtype=xw.dtype, device=x.device)
        outs = []
        for t in range(seq):
            h, c = lstm_pointwise(torch.addmm(xw[t], h, self.w_hh_t), c)
            outs.append(h)
        return torch.stack(outs), h, c


class TransposedLSTM(_Layered):
    layer = _TransposedLayer


class WavefrontLSTM(nn.Module):
    """Many-layer scheduling: diagonal d runs layer l at step d - l for every l, each layer
    on its own stream, so layer l+1 at step t-1 runs beside layer l at step t. Layer l
    at step t waits (an event) for layer l-1 at step t; its own step t-1 is earlier on its
    stream. Pre-transposed weights and the fused pointwise step, as the rungs below."""

    cpu_note = CPU_IN_ORDER

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.hidden = hidden
        self.layers = nn.ModuleList(_TransposedWeights(input_size if i == 0 else hidden, hidden)
                                    for i in range(layers))
        self.streams: StreamSet | None = None

    def load_lstm(self, ref: nn.LSTM) -> None:
        for i, layer in enumerate(self.layers):
            layer.load_weights(*_ref_weights(ref, i))  # type: ignore[operator]  # ModuleList item

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        n, seq, batch = len(self.layers), x.size(0), x.size(1)
        if self.streams is None or self.streams.cuda != (x.device.type == "cuda"):
            self.streams = StreamSet(x.device, n)
        s = self.streams
        w: list[Any] = list(self.layers)
        # layer 0's input is all there: its projection for every step in one GEMM
        x0 = torch.addmm(w[0].bias, x.reshape(seq * batch, -1), w[0].w_ih_t).view(seq, batch, -1)
        h = [_zeros(x, self.hidden) for _ in range(n)]
        c = [_zeros(x, self.hidden) for _ in range(n)]
        outs: list[list[Tensor]] = [[] for _ in range(n)]
        done: list[list[Any]] = [[] for _ in range(n)]  # event after layer l's step t
        s.fork()  # x0 and the zero states are made: the layers' streams may start
        for d in range(seq + n - 1):
            for layer in range(max(0, d - seq + 1), min(n, d + 1)):
                t = d - layer
                with s.on(layer):
                    if layer == 0:
                        gates = torch.addmm(x0[t], h[0], w[0].w_hh_t)
                    else:
                        below = outs[layer - 1][t]
                        s.wait(done[layer - 1][t], below)
                        gates = torch.addmm(torch.addmm(w[layer].bias, below, w[layer].w_ih_t),
                                            h[layer], w[layer].w_hh_t)
                    h[layer], c[layer] = lstm_pointwise(gates, c[layer])
                    outs[layer].append(h[layer])
                    done[layer].append(s.mark())
        if s.cuda:
            s.join()
            for layer in range(n):  # made on side streams, used from here on
                for tensor in (*outs[layer], h[layer], c[layer]):
                    tensor.record_stream(torch.cuda.current_stream())
        return torch.stack(outs[-1]), (torch.stack(h), torch.stack(c))


class _FactorizedLayer(nn.Module):
    """One factorized LSTM layer (the "Factorization tricks for LSTM networks" F-LSTM):
    gates = W2 (W1 [x_t; h_{t-1}]) + b, W1 [r, in + H], W2 [4H, r], gate order i, f, g, o.
    W1's input columns do not depend on h: their product for every step is one GEMM."""

    def __init__(self, input_size: int, hidden: int, rank: int):
        super().__init__()
        self.hidden, self.input_size = hidden, input_size
        self.w1 = nn.Parameter(torch.empty(rank, input_size + hidden))
        self.w2 = nn.Parameter(torch.empty(4 * hidden, rank))
        self.bias = nn.Parameter(torch.zeros(4 * hidden))
        for p in (self.w1, self.w2):
            nn.init.uniform_(p, -hidden ** -0.5, hidden ** -0.5)

    def load_weights(self, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> None:
        """The best rank-r approximation of [W_ih W_hh] (truncated SVD: W2 = U_r S_r,
        W1 = V_r^T); at full rank the layer is nn.LSTM's. A rank above W's own leaves the
        extra rows and columns zero."""
        u, sv, vh = torch.linalg.svd(torch.cat([w_ih, w_hh], 1), full_matrices=False)
        k = min(self.w1.size(0), sv.numel())
        with torch.no_grad():
            self.w2.zero_()
            self.w1.zero_()
            self.w2[:, :k] = u[:, :k] * sv[:k]
            self.w1[:k] = vh[:k]
            self.bias.copy_(b_ih + b_hh)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        seq, batch = x.size(0), x.size(1)
        w1x, w1h = self.w1[:, :self.input_size], self.w1[:, self.input_size:]
        zx = torch.mm(x.reshape(seq * batch, -1), w1x.t()).view(seq, batch, -1)
        h = c = _zeros(x, self.hidden)
        outs = []
        for t in range(seq):
            z = torch.addmm(zx[t], h, w1h.t())
            h, c = lstm_pointwise(torch.addmm(self.bias, z, self.w2.t()), c)
            outs.append(h)
        return torch.stack(outs), h, c


class FactorizedLSTM(nn.Module):
    """The factorized LSTM of rank ``rank`` (default hidden // 4) per layer."""

    def __init__(self, input_size: int, hidden: int, layers: int, rank: int | None = None):
        super().__init__()
        self.rank = rank or max(1, hidden // 4)
        self.layers = nn.ModuleList(
            _FactorizedLayer(input_size if i == 0 else hidden, hidden, self.rank)
            for i in range(layers))

    load_lstm = _Layered.load_lstm
    forward = _Layered.forward


def factorized_parameters(input_size: int, hidden: int, layers: int, rank: int) -> int:
    """Parameters of the factorized LSTM: per layer r (I_l + H) + 4H r + 4H."""
    return sum(rank * ((input_size if i == 0 else hidden) + hidden) + 4 * hidden * rank
               + 4 * hidden for i in range(layers))


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


class CompileFullLSTM(nn.Module):
    """torch.compile over the whole model, the time loop included (unrolled into one
    graph per layer stack), as users compile a model today; ``compile_mode`` None:
    reduce-overhead (CUDA graphs) on a GPU, default on a CPU."""

    def __init__(self, input_size: int, hidden: int, layers: int,
                 compile_mode: str | None = None):
        super().__init__()
        self.inner = FineLSTM(input_size, hidden, layers)
        self.mode = compile_mode
        self.compiled: Any = None

    def load_lstm(self, ref: nn.LSTM) -> None:
        self.inner.load_lstm(ref)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        mode = self.mode or ("reduce-overhead" if x.device.type == "cuda" else "default")
        if self.compiled is None:  # after load_lstm: the weights are final
            self.compiled = torch.compile(self.inner, mode=mode, dynamic=False)
        if mode != "default" and x.device.type == "cuda":
            # CUDA graph trees: a new iteration may overwrite the last one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(x)

