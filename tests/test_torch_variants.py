"""Every PyTorch variant computes nn.LSTM's function, forward and backward."""

from __future__ import annotations

import pytest

from tests.conftest import needs

torch = needs("torch")

from traceviz.runners.torch_models import MODELS, build  # noqa: E402

CPU_VARIANTS = [m for m in MODELS if m != "graph_torch"]
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
