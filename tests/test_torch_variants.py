"""Every PyTorch variant computes nn.LSTM's function, forward and backward; the factorized
LSTM computes its own formula."""

from __future__ import annotations

import pytest

from tests.conftest import needs

torch = needs("torch")

from traceviz.runners.torch.variants import MODELS, build  # noqa: E402

# factorized_torch is another model: tested against its own formula below
CPU_VARIANTS = [m for m in MODELS if m not in ("graph_torch", "factorized_torch")]
# fp32 on a CPU: the same math in another order differs in the last bits only
TOL = 1e-5


def _weight_grad_norm(module: torch.nn.Module) -> float:
    """Σ‖∂L/∂W‖² over weight matrices: naive8's per-gate matrices partition nn.LSTM's."""
    return sum(float((p.grad ** 2).sum()) for n, p in module.named_parameters()
               if p.grad is not None and p.dim() == 2)


@pytest.mark.parametrize("name", CPU_VARIANTS)
def test_variant_matches_nn_lstm(name):
    torch.manual_seed(0)
    ref = torch.nn.LSTM(6, 8, 2)
    x = torch.randn(7, 3, 6)
    x_ref = x.clone().requires_grad_(True)
    out_ref, (h_ref, c_ref) = ref(x_ref)
    (out_ref.pow(2).sum() + c_ref.sum()).backward()

    model = build(name, 6, 8, 2)
    model.load_lstm(ref)
    x_var = x.clone().requires_grad_(True)
    out, (h, c) = model(x_var)
    (out.pow(2).sum() + c.sum()).backward()

    assert out.shape == out_ref.shape and h.shape == h_ref.shape and c.shape == c_ref.shape
    assert torch.allclose(out, out_ref, atol=TOL)
    assert torch.allclose(h, h_ref, atol=TOL)
    assert torch.allclose(c, c_ref, atol=TOL)
    assert torch.allclose(x_var.grad, x_ref.grad, atol=TOL)
    assert _weight_grad_norm(model) == pytest.approx(_weight_grad_norm(ref), rel=1e-5)


def test_graph_variant_refuses_cpu():
    model = build("graph_torch", 4, 4, 1)
    with pytest.raises(RuntimeError, match="CUDA"):
        model(torch.randn(2, 1, 4))


def _factorized_reference(x, ref: torch.nn.LSTM, rank: int):
    """The F-LSTM by its formula, in float64, from nn.LSTM's weights: W = [W_ih W_hh]
    replaced by its best rank-r approximation W2 W1 (numpy's SVD), then per step
    gates = W2 (W1 [x_t; h]) + b_ih + b_hh, i f g o as nn.LSTM."""
    import numpy as np

    def sig(v):
        return 1 / (1 + np.exp(-v))

    inp = x.double().numpy()
    hs, cs = [], []
    for layer in range(ref.num_layers):
        w = np.concatenate([getattr(ref, f"weight_{k}_l{layer}").detach().double().numpy()
                            for k in ("ih", "hh")], 1)
        b = sum(getattr(ref, f"bias_{k}_l{layer}").detach().double().numpy()
                for k in ("ih", "hh"))
        u, sv, vh = np.linalg.svd(w, full_matrices=False)
        w2, w1 = u[:, :rank] * sv[:rank], vh[:rank]
        hid = ref.hidden_size
        h = np.zeros((inp.shape[1], hid))
        c = np.zeros_like(h)
        outs = []
        for t in range(inp.shape[0]):
            gates = (np.concatenate([inp[t], h], 1) @ w1.T) @ w2.T + b
            i, f, g, o = np.split(gates, 4, axis=1)
            c = sig(f) * c + sig(i) * np.tanh(g)
            h = sig(o) * np.tanh(c)
            outs.append(h)
        inp = np.stack(outs)
        hs.append(h)
        cs.append(c)
    return inp, np.stack(hs), np.stack(cs)


@pytest.mark.parametrize("rank", [2, 5])
def test_factorized_follows_its_formula(rank):
    torch.manual_seed(1)
    ref = torch.nn.LSTM(6, 8, 2)
    x = torch.randn(7, 3, 6)
    model = build("factorized_torch", 6, 8, 2, {"rank": rank})
    model.load_lstm(ref)
    out, (h, c) = model(x)
    want_out, want_h, want_c = _factorized_reference(x, ref, rank)
    assert torch.allclose(out.double(), torch.from_numpy(want_out), atol=TOL)
    assert torch.allclose(h.double(), torch.from_numpy(want_h), atol=TOL)
    assert torch.allclose(c.double(), torch.from_numpy(want_c), atol=TOL)
    # a low rank is another function: it does not compute nn.LSTM's
    assert not torch.allclose(out, ref(x)[0], atol=1e-3)


def test_factorized_at_full_rank_is_nn_lstm():
    torch.manual_seed(2)
    ref = torch.nn.LSTM(6, 8, 2)
    x = torch.randn(5, 3, 6)
    model = build("factorized_torch", 6, 8, 2, {"rank": 8 + 8})  # [W_ih W_hh]'s widest
    model.load_lstm(ref)
    assert torch.allclose(model(x)[0], ref(x)[0], atol=TOL)


@pytest.mark.parametrize("rank", [None, 3])
def test_factorized_parameter_count(rank):
    from traceviz.runners.torch.rung_lstms import factorized_parameters

    inp, hid, layers = 10, 16, 3
    model = build("factorized_torch", inp, hid, layers, {"rank": rank})
    r = rank or hid // 4  # the default rank: hidden / 4
    counted = sum(p.numel() for p in model.parameters())
    # per layer W1 [r, I_l + H], W2 [4H, r], one bias [4H]
    assert counted == sum(r * (i + hid) + 4 * hid * r + 4 * hid
                          for i in (inp, hid, hid)) == factorized_parameters(inp, hid, layers, r)
    dense = sum(p.numel() for p in torch.nn.LSTM(inp, hid, layers).parameters())
    assert counted < dense


def test_options_reach_only_the_variants_that_take_them():
    assert build("factorized_torch", 4, 8, 1, {"rank": 3, "compile_mode": "default"}).rank == 3
    assert build("compile_full_torch", 4, 8, 1, {"rank": 3, "compile_mode": "max-autotune"}
                 ).mode == "max-autotune"
    assert isinstance(build("fused_torch", 4, 8, 1, {"rank": 3}), MODELS["fused_torch"])


# the stream variants' CUDA path (streams, events, record_stream) and the whole-model
# compile with CUDA graphs; a CPU runs their calls in order (the tests above)
GPU_VARIANTS = ["streams_torch", "wavefront_torch", "transposed_torch", "compile_full_torch",
                "graph_torch"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_VARIANTS)
@pytest.mark.parametrize("train", [False, True])
def test_variant_matches_nn_lstm_on_cuda(name, train):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = torch.nn.LSTM(6, 8, 3).cuda()
    x = torch.randn(7, 3, 6, device="cuda")
    model = build(name, 6, 8, 3).cuda()
    model.load_lstm(ref)
    with torch.set_grad_enabled(train):
        for _ in range(3):  # graph capture and CUDA graph trees warm up over calls
            # one training step each, as the runner's: compile_full_torch marks the step
            # (torch.compiler.cudagraph_mark_step_begin) in its forward; the gradients
            # start anew (a .grad made by one replay is overwritten by the next, so it
            # cannot be accumulated into); what is compared is cloned before the next
            # replay overwrites the graphs' outputs
            model.zero_grad(set_to_none=True)
            x_var = x.clone().requires_grad_(train)
            out, (h, c) = model(x_var)
            out, h, c = out.clone(), h.clone(), c.clone()
            if train:
                (out.pow(2).sum() + c.sum()).backward()
                grad = x_var.grad.clone()
        x_ref = x.clone().requires_grad_(train)
        out_ref, (h_ref, c_ref) = ref(x_ref)
        if train:
            (out_ref.pow(2).sum() + c_ref.sum()).backward()
    torch.cuda.synchronize()
    assert torch.allclose(out, out_ref, atol=1e-4)
    assert torch.allclose(h, h_ref, atol=1e-4) and torch.allclose(c, c_ref, atol=1e-4)
    if train:
        assert torch.allclose(grad, x_ref.grad, atol=1e-4)
    streams = getattr(model, "streams", None) or getattr(
        getattr(model, "layers", [None])[0], "streams", None)
    if name in ("streams_torch", "wavefront_torch"):
        assert streams is not None and streams.cuda and streams.streams
