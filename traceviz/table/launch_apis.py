"""The one list of host calls that put work on a device, and how to recognise them."""

from __future__ import annotations

import functools
import re

# API name -> the kind of device row it launches.
LAUNCH_APIS: dict[str, str] = {
    **dict.fromkeys(
        (
            "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
            "cuLaunchCooperativeKernel",
            # one graph launch, many kernels
            "cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch",
            "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel",
            "hipExtModuleLaunchKernel", "hipLaunchCooperativeKernel",
        ),
        "kernel",
    ),
    **dict.fromkeys(
        (
            "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemcpy2DAsync",
            "cudaMemcpy3D", "cudaMemcpy3DAsync", "cudaMemcpyPeer", "cudaMemcpyPeerAsync",
            "cudaMemcpyToSymbol", "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbol",
            "cudaMemcpyFromSymbolAsync", "cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoD",
            "cuMemcpyHtoDAsync", "cuMemcpyDtoH", "cuMemcpyDtoHAsync", "cuMemcpyDtoD",
            "cuMemcpyDtoDAsync", "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream",
            "hipMemcpyHtoD", "hipMemcpyHtoDAsync", "hipMemcpyDtoH", "hipMemcpyDtoHAsync",
            "hipMemcpyDtoD", "hipMemcpyDtoDAsync",
        ),
        "memcpy",
    ),
    **dict.fromkeys(
        (
            "cudaMemset", "cudaMemsetAsync", "cudaMemset2DAsync", "cuMemsetD8Async",
            "cuMemsetD16Async", "cuMemsetD32Async", "cuMemsetD8", "cuMemsetD32",
            "hipMemset", "hipMemsetAsync", "hipMemsetD8Async", "hipMemsetD32Async",
        ),
        "memset",
    ),
}

GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})

# nsys appends the API version (cudaLaunchKernel_v7000); per-thread default-stream
# variants carry _ptsz/_ptds. Both name the same launch.
_SUFFIX = re.compile(r"(_v\d+)?$")
_PER_THREAD = re.compile(r"_pt(sz|ds)$")


@functools.lru_cache(maxsize=1 << 16)
def base_api_name(name: str) -> str:
    """``cudaLaunchKernel_ptsz_v7000`` -> ``cudaLaunchKernel``."""
    return _PER_THREAD.sub("", _SUFFIX.sub("", name, count=1), count=1)


@functools.lru_cache(maxsize=1 << 16)
def launch_kind(name: str) -> str | None:
    """The device-row kind a host call launches, or None if it launches nothing."""
    return LAUNCH_APIS.get(base_api_name(name))


@functools.lru_cache(maxsize=1 << 16)
def is_graph_launch(name: str) -> bool:
    """One call that runs a whole captured graph of kernels."""
    return base_api_name(name) in GRAPH_LAUNCH_APIS


# Host calls that block their thread until device work ends (advise counts them inside
# steps; whatif's replay ends them at the end of the work they waited for). A synchronous
# copy (a non-Async memcpy call, or a device-to-pageable one) blocks too: the replay sees
# that from the trace, the call ending after its copy.
SYNC_APIS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaThreadSynchronize", "cuCtxSynchronize", "cuStreamSynchronize",
    "cuEventSynchronize", "hipDeviceSynchronize", "hipStreamSynchronize",
    "hipEventSynchronize",
})


@functools.lru_cache(maxsize=1 << 16)
def is_sync_call(name: str) -> bool:
    """A call that waits for device work (``cudaStreamSynchronize_v3020`` too)."""
    return base_api_name(name) in SYNC_APIS


# Cross-stream bookkeeping: an event recorded on one stream, and another stream told to
# wait for it (the replay links the two; advise counts their host cost). Kineto and nsys
# record the runtime names, XSpace the driver's.
EVENT_RECORD_APIS = frozenset({
    "cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags",
    "hipEventRecord", "hipEventRecordWithFlags",
})
STREAM_WAIT_APIS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent",
                              "hipStreamWaitEvent"})
# polled by PyTorch's caching allocator for memory used across streams (record_stream)
EVENT_QUERY_APIS = frozenset({"cudaEventQuery", "cuEventQuery", "hipEventQuery"})


# asked by PyTorch before it records an event or makes a stream wait (is the stream being
# captured in a graph?): part of that bookkeeping where it comes right before such a call
CAPTURE_QUERY_APIS = frozenset({"cudaStreamIsCapturing", "cudaStreamGetCaptureInfo",
                                "cuStreamIsCapturing", "cuStreamGetCaptureInfo",
                                "hipStreamIsCapturing", "hipStreamGetCaptureInfo"})
# framework ops that only do cross-stream bookkeeping (a tensor marked as used on
# another stream, for the caching allocator)
STREAM_BOOKKEEPING_OPS = frozenset({"aten::record_stream"})


@functools.lru_cache(maxsize=1 << 16)
def is_capture_query(name: str) -> bool:
    return base_api_name(name) in CAPTURE_QUERY_APIS


@functools.lru_cache(maxsize=1 << 16)
def event_role(name: str) -> str | None:
    """``record``, ``wait`` or ``query`` for a cross-stream event call, else None."""
    base = base_api_name(name)
    if base in EVENT_RECORD_APIS:
        return "record"
    if base in STREAM_WAIT_APIS:
        return "wait"
    return "query" if base in EVENT_QUERY_APIS else None
