"""What the PyTorch runner refuses before anything runs: graph replay where it cannot work.

Imports no framework: the parent side (``traceviz capture``, the ladder) asks it before it
starts a runner, and the runner asks it again in its own process.
"""

from __future__ import annotations

from traceviz.runners import VARIANTS

# compile modes whose compiled model replays CUDA graphs of its own (on a GPU)
GRAPHING_COMPILE_MODES = ("reduce-overhead", "max-autotune")


def graph_replay_refusal(model: str, device: str, mode: str,
                         options: dict | None = None) -> str | None:
    """Why ``model`` cannot run graph-replayed (``graph_replay``) here, or None."""
    if device != "cuda":
        return "captures the forward pass in a CUDA graph and needs --device cuda"
    v = VARIANTS.get(model)
    if v is not None and v.framework != "torch":
        return f"applies to the PyTorch variants; {model} is a {v.framework} variant"
    if mode != "forward":
        return ("captures the forward pass only and needs --mode forward (graph_torch "
                "replays training in CUDA graphs)")
    if model == "graph_torch":
        return "graph_torch replays its forward pass from a CUDA graph already"
    compile_mode = (options or {}).get("compile_mode") or "reduce-overhead"
    if model == "compile_full_torch" and compile_mode in GRAPHING_COMPILE_MODES:
        return (f"compile_full_torch (torch.compile, mode {compile_mode}) replays CUDA "
                "graphs of its own, which cannot be captured in another; --compile-mode "
                "default (no CUDA graphs) can be")
    return None
