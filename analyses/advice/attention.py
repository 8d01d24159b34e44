"""Advice on attention (theme ``attention``): an unfused attention that writes its S×S
scores to memory and reads them back (``analyses/efficiency/attention_fusion.py``). ``rules.py``
registers it; ``whatif``'s ``fuse_attention`` prices it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceviz.analyses.advice.actions import remedy
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.efficiency.attention_fusion import attention as find_attention
from traceviz.units import fmt_bytes, fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

# share of kernel time in unfused attention worth a finding
ATTENTION_SHARE = 0.10


def attention(ctx: Context) -> Finding | None:
    """Unfused attention (softmax over [..., S, S] between batched matmuls) >= 10% of the
    kernel time."""
    if ctx.summary.cpu_trace:
        return None
    a = find_attention(ctx.trace, peak=ctx.device_peak)
    if not a.groups or a.share < ATTENTION_SHARE:
        return None
    top = max(a.groups, key=lambda g: g.kernel_ns)
    softmax = sum(g.softmax_ns for g in a.groups)
    moved = sum(g.sxs_bytes for g in a.groups)
    evidence = [
        f"unfused attention holds {fmt_ns(a.unfused_ns)}, {fmt_pct(a.share)} of kernel "
        f"time: the softmax {fmt_ns(softmax)}, the batched matmuls around it "
        f"{fmt_ns(sum(g.matmul_ns for g in a.groups))}",
        f"S = {top.seq:,} ({top.batch_heads:,} batch x heads, head dim {top.head_dim}, "
        f"{top.softmax_calls:,} calls): each call writes and reads {top.seq:,}x{top.seq:,} "
        f"scores; {fmt_bytes(moved)} of S×S tensors moved in all"]
    if top.fused_ns is None:
        evidence.append("no saving: the device's peaks are not known (--peak gives them)")
    if a.fused_kernels:
        evidence.append(f"{a.fused_kernels:,} fused attention kernels already run "
                        f"({fmt_ns(a.fused_kernel_ns)}) elsewhere in the trace")
    saving = ctx.saving_of("fuse_attention") if top.fused_ns is not None else None
    return Finding(
        "attention", "Attention runs unfused: the S×S scores go through memory", evidence,
        remedy(ctx, torch="use a fused attention kernel: torch.nn.functional."
                          "scaled_dot_product_attention (FlashAttention / memory-efficient "
                          "backends), flash_attn, or the model's attn_implementation="
                          "'sdpa'/'flash_attention_2' (Hugging Face)",
               tf="use a fused attention kernel: keras.layers.MultiHeadAttention with "
                  "flash attention (keras.config.enable_flash_attention()), or XLA's "
                  "cuDNN fused attention",
               jax="use a fused attention kernel: jax.nn.dot_product_attention("
                   "implementation='cudnn'), or a Pallas/FlashAttention kernel"),
        saving, "fuse_attention" if saving is not None else None,
        {"attention_ns": a.unfused_ns, "softmax_ns": softmax, "share": a.share,
         "seq": top.seq, "sxs_bytes": moved,
         "fused_ns": sum(g.fused_ns or 0 for g in a.groups) or None})
