"""Ray as the cluster engine for sweeps and rank imports (``--ray [ADDRESS]``).

Imported only with ``--ray``: nothing else needs Ray. Each job is one Ray task with no
retries (a capture is not idempotent: a retried point would be measured twice); a task
lost with its worker or node comes back as the exception that lost it, and the caller
records it (a sweep point marked failed with the reason).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from traceviz.errors import RunFailed, TraceVizError
from traceviz.system.install_hint import pip_install


def connect(address: str | None) -> Any:
    """Join the cluster at ``address`` (``auto``: the one this machine belongs to; none:
    $RAY_ADDRESS, else a local one started for this run)."""
    missing = TraceVizError(f"--ray needs Ray: {pip_install('dist')}")
    try:
        import ray
    except ImportError:
        raise missing from None
    # a folder named ray (Ray's own /tmp/ray, beside `python -m`) imports as an empty
    # namespace package
    if not hasattr(ray, "init"):
        raise missing
    if not ray.is_initialized():
        # a local cluster started for this run needs no dashboard; a running one has its own
        local: dict[str, Any] = {"include_dashboard": False} if address is None else {}
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False,
                     **local)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise RunFailed(f"cannot reach the Ray cluster at {address or 'RAY_ADDRESS'}: "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return ray


def ray_map(fn: Callable[..., Any], address: str | None,
            resources: Callable[[tuple], dict[str, float]] = lambda job: {"num_cpus": 1},
            ) -> Callable[[list[tuple]], Iterator[tuple[int, Any]]]:
    """A map over jobs (argument tuples of ``fn``) as Ray tasks: yields (job index, result
    or the Ray exception that lost it) as tasks finish, several at once across nodes."""
    def run(jobs: list[tuple]) -> Iterator[tuple[int, Any]]:
        ray = connect(address)
        remote = ray.remote(fn)
        refs = {remote.options(max_retries=0, **resources(job)).remote(*job): i
                for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    yield refs[ref], ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # fn raised: re-raise its error
                    cause = e.as_instanceof_cause()
                    if isinstance(cause, TraceVizError):
                        raise cause from None
                    yield refs[ref], cause
                except ray.exceptions.RayError as e:  # worker or node lost
                    yield refs[ref], e
    return run


def point_resources(job: tuple) -> dict[str, float]:
    """A sweep point takes one GPU when it runs on CUDA, else one CPU."""
    spec = job[1]
    return {"num_gpus": 1, "num_cpus": 1} if spec.device == "cuda" else {"num_cpus": 1}
