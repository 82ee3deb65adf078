"""How many Beam DirectRunner workers a step starts: one per CPU of its own pod, never of the node.

``--direct_num_workers=0`` makes the DirectRunner start ``multiprocessing.cpu_count()`` workers
(apache_beam/runners/portability/fn_api_runner/fn_runner.py:163-168, Beam 2.60.0; the default is 1,
options/pipeline_options.py:749-753), which in a container is the node's CPU count: 32-96 worker processes,
each importing TF/TFX, inside a pod limited to a few CPUs and 16-32 GiB.
The compiled spec therefore carries no worker count (``compile`` refuses ``--direct_num_workers=0``), and each
step's entry point asks :func:`beam_worker_args` for its own pod's count at run time, read from the CPU limit that
the kubelet writes into the container's cgroup: cgroup v2 ``cpu.max`` (``"<quota> <period>"`` or
``"max <period>"``), cgroup v1 ``cpu/cpu.cfs_quota_us`` / ``cpu/cpu.cfs_period_us`` (quota ``-1``: none), and
the CPUs the process may run on (``os.sched_getaffinity``), whichever is smaller."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
WORKERS_FLAG = "--direct_num_workers"
_RUNNER_FLAG = "--runner"
_MODE_FLAG = "--direct_running_mode"
# The modes in which the DirectRunner starts direct_num_workers workers; in_memory (Beam's default) runs one and
# warns about any other count (fn_runner.py:183-190, Beam 2.60.0).
_PARALLEL_MODES = ("multi_processing", "multi_threading")
_DIRECT_RUNNERS = ("", "DirectRunner", "direct", "SwitchingDirectRunner", "BundleBasedDirectRunner")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cgroup_v2_limit(root: Path) -> float | None:
    text = _read(root / "cpu.max")
    if not text:
        return None
    quota, _, period = text.partition(" ")
    return None if quota == "max" else int(quota) / int(period or 100000)


def _cgroup_v1_limit(root: Path) -> float | None:
    for controller in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        quota, period = _read(root / controller / "cpu.cfs_quota_us"), _read(root / controller / "cpu.cfs_period_us")
        if quota is not None and period:
            return None if int(quota) < 0 else int(quota) / int(period)
    return None


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


def pod_cpu_count(cgroup_root: Path = CGROUP_ROOT, affinity: Callable[[], int] | None = None) -> int:
    """The CPUs this container may use: its cgroup CPU limit (rounded down, at least 1), capped by the CPUs the
    process may run on. Without a limit (none set, or no cgroup file), the CPUs it may run on."""
    limit = _cgroup_v2_limit(cgroup_root)
    if limit is None:
        limit = _cgroup_v1_limit(cgroup_root)
    cpus = (affinity or _affinity)()
    return cpus if limit is None else max(1, min(cpus, int(limit)))


def _flag(beam_args: list[str], name: str) -> tuple[int, str] | None:
    """(index, value) of the last ``--name=value`` or ``--name value`` in ``beam_args``."""
    found = None
    for i, arg in enumerate(beam_args):
        if arg.startswith(name + "="):
            found = (i, arg.split("=", 1)[1])
        elif arg == name and i + 1 < len(beam_args):
            found = (i, beam_args[i + 1])
    return found


def is_node_wide_worker_count(beam_args: list[str] | tuple[str, ...]) -> bool:
    """Whether ``beam_args`` ask the DirectRunner for one worker per CPU of the node (``--direct_num_workers=0``)."""
    workers = _flag(list(beam_args), WORKERS_FLAG)
    return workers is not None and workers[1].strip() == "0"


def beam_worker_args(beam_args: list[str], cgroup_root: Path = CGROUP_ROOT) -> list[str]:
    """``beam_args`` with ``--direct_num_workers`` set to this pod's CPU count, where the DirectRunner starts
    several workers (``--direct_running_mode`` multi_processing or multi_threading) and the args give no positive
    count of their own; unchanged for another runner (Dataflow, Flink) or in_memory mode."""
    args = list(beam_args)
    runner = _flag(args, _RUNNER_FLAG)
    mode = _flag(args, _MODE_FLAG)
    if (runner and runner[1] not in _DIRECT_RUNNERS) or not mode or mode[1] not in _PARALLEL_MODES:
        return args
    workers = _flag(args, WORKERS_FLAG)
    if workers and not is_node_wide_worker_count(args):
        return args  # an explicit count the user chose
    count = f"{WORKERS_FLAG}={pod_cpu_count(cgroup_root)}"
    if workers is None:
        return [*args, count]
    index = workers[0]
    return [*args[:index], count, *args[index + (1 if args[index].startswith(WORKERS_FLAG + "=") else 2) :]]
