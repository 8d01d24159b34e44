"""What a host call does: the one table that sorts CUDA/HIP runtime and driver calls, and
OS runtime calls, into the kinds the host-wait split names (``analyses/summary/waits.py``).

Runtime and driver calls (``runtime`` rows), by what the host is doing in them:

- ``launch``: putting work on a device without waiting for it (kernel and graph launches,
  asynchronous copies and memsets: ``launch_apis.LAUNCH_APIS`` less the synchronous ones);
- ``sync_copy``: a synchronous copy or memset (``cudaMemcpy``, ``cuMemcpyHtoD``, ...): the
  call returns when the data has moved; from pageable memory the host stages it itself;
- ``sync``: waiting for the device (``launch_apis.SYNC_APIS``);
- ``alloc``: device or pinned host memory allocated, freed or registered;
- ``setup``: the context and modules (initialisation, device queries, module and
  function loading, kernel attributes and occupancy queries, which load a kernel's
  module on first use);
- ``create``: streams, events and graphs made or destroyed;
- ``other_api``: everything else (event records, stream waits, queries).

OS runtime calls (``os`` rows: nsys' ``OSRT_API`` table, and the stretches a thread was
scheduled out, ``[off-CPU]``, from its context-switch events), by what the thread waits
for: ``sleep``, ``io`` (files, sockets, pipes, and polls on them), ``lock`` (mutexes,
condition variables, semaphores, futexes, joins), ``offcpu`` (scheduled out, the reason
not recorded) and ``other_os``.
"""

from __future__ import annotations

import functools
import re

from traceviz.table.launch_apis import base_api_name, is_sync_call, launch_kind

# the order the host-wait split gives them priority in, for a moment two cover
API_KINDS = ("sync_copy", "sync", "launch", "alloc", "setup", "create", "other_api")
OS_KINDS = ("sleep", "io", "lock", "other_os", "offcpu")

# the name of an os row that says the thread was scheduled out (nsys SCHED_EVENTS)
OFF_CPU = "[off-CPU]"

_ALLOC = re.compile(
    r"^(cuda|hip|cu)(Malloc|Free|HostAlloc|HostMalloc|HostFree|MallocHost|FreeHost|"
    r"MallocManaged|MallocAsync|FreeAsync|MallocPitch|Malloc3D|MallocArray|FreeArray|"
    r"HostRegister|HostUnregister|MemAlloc|MemFree|MemHostAlloc|MemHostRegister|"
    r"MemHostUnregister|MemCreate|MemRelease|MemMap|MemUnmap|MemAddressReserve|"
    r"MemAddressFree|MemSetAccess|MemPool|ExtMallocWithFlags|MallocFromPool)")
_SETUP = re.compile(
    r"^(cuInit|cuDriverGetVersion|cudaDriverGetVersion|cudaRuntimeGetVersion|"
    r"(cu|cuda|hip)(Ctx|DevicePrimaryCtx|SetDevice|GetDevice|DeviceGet|DeviceSet|"
    r"DeviceCanAccessPeer|DeviceEnablePeerAccess|DeviceReset|Module|Library|Kernel|"
    r"FuncGet|FuncSet|GetFunc|Occupancy|GetSymbol|GetExportTable|GetProcAddress|"
    r"GetDriverEntryPoint|ChooseDevice|GetLastError|PeekAtLastError|DeviceFlush|"
    r"Profiler)|cuDevice|cuGetProcAddress|cuGetExportTable|cuLink|hipExtModule|"
    r"hipModule|__cuda|__hip)")
_CREATE = re.compile(
    r"^(cu|cuda|hip)(StreamCreate|StreamDestroy|EventCreate|EventDestroy|GraphCreate|"
    r"GraphInstantiate|GraphExecDestroy|GraphDestroy|GraphExecUpdate|GraphUpload|"
    r"StreamBeginCapture|StreamEndCapture|GraphAdd)")


@functools.lru_cache(maxsize=1 << 16)
def api_kind(name: str) -> str:
    """The kind of a runtime or driver call (one of ``API_KINDS``)."""
    base = base_api_name(name)
    if is_sync_call(base):
        return "sync"
    launched = launch_kind(base)
    if launched is not None:
        if launched == "kernel" or "Async" in base or base.endswith("WithStream"):
            return "launch"
        return "sync_copy"
    if _ALLOC.match(base):
        return "alloc"
    if _CREATE.match(base):
        return "create"
    if _SETUP.match(base):
        return "setup"
    return "other_api"


# OS runtime calls as nsys names them (libc and pthread functions, a few with @GLIBC
# versions or a leading underscore)
_SLEEP = re.compile(r"^_*(nanosleep|clock_nanosleep|usleep|sleep|pause)\b")
_IO = re.compile(
    r"^_*(read|write|pread|pwrite|readv|writev|preadv|pwritev|open|openat|creat|close|"
    r"fopen|fdopen|fclose|fread|fwrite|fgets|fputs|fputc|fgetc|getc|putc|fflush|fseek|"
    r"ftell|lseek|fsync|fdatasync|sync_file_range|recv|recvfrom|recvmsg|send|sendto|"
    r"sendmsg|accept|connect|stat|fstat|lstat|statx|access|unlink|rename|mkdir|rmdir|"
    r"opendir|readdir|closedir|mmap|munmap|msync|sendfile|splice|copy_file_range|"
    r"getdents|readlink|truncate|ftruncate|fcntl|dup|pipe|poll|ppoll|select|pselect|"
    r"epoll_wait|epoll_pwait)(64)?\b")
_LOCK = re.compile(
    r"^_*(pthread_(mutex|cond|rwlock|spin|barrier|join)\w*|sem_\w*|futex|flock|lockf|"
    r"mtx_\w+|cnd_\w+|thrd_join)\b")


# why a thread was scheduled out, as nsys labels it (ENUM_SCHEDULING_THREAD_BLOCK)
_OFF_CPU_REASONS = {"Nanosleep": "sleep", "DelayExecution": "sleep", "Mutex": "lock",
                    "CondVar": "lock", "Sem": "lock", "Join": "lock", "WaitPage": "io",
                    "PageIn": "io"}


@functools.lru_cache(maxsize=1 << 16)
def os_kind(name: str) -> str:
    """The kind of an OS runtime call or off-CPU stretch (one of ``OS_KINDS``)."""
    if name.startswith(OFF_CPU):  # scheduled out, with the reason where recorded
        return _OFF_CPU_REASONS.get(name[len(OFF_CPU):].strip(), "offcpu")
    if _SLEEP.match(name):
        return "sleep"
    if _IO.match(name):
        return "io"
    if _LOCK.match(name):
        return "lock"
    return "other_os"
