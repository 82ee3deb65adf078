"""The local DDP agent: torch's elastic agent, as ``torchrun --standalone`` runs it, with the workers forked.

``python -u -m <AGENT_MODULE> --nproc-per-node N --max-restarts R --fatal-marker PATH --job JOB``
(cluster/launch.py:agent_command).

torchrun starts every worker as a new interpreter, and each interpreter that imports torch holds its own private
copy of what the import writes (torch's libraries' relocations, its operator registry): measured with torch
2.14.1, an agent and two workers that each imported torch and the worker module summed 1,210 MiB of PSS (873 MiB
of it private); the same two workers forked from the agent after it imported them, 632 MiB (297 MiB private).
That difference is what took the 5M-row run over its 4 GiB target while the workers trained (stop 38).

Forking is safe because this process only imports: it runs no torch operation (so no OpenMP thread pool exists
to be inherited half-alive) and never touches CUDA (a forked child could not use a context made here); each
worker sets its threads and device after the fork (worker/distributed.py). Everything else is torchrun's:
the c10d rendezvous on a local store, the restarts, the monitoring; a restart forks fresh workers from this
same clean process.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import uuid
from pathlib import Path

# Imported before any fork, so that every worker shares these pages with the agent instead of importing its own.
import torch  # noqa: F401
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from torchtfx.components.torch_trainer.cluster import lifeline
from torchtfx.components.torch_trainer.handoff.constants import WORKER_PROCESS_NAME
from torchtfx.components.torch_trainer.worker import train

_PR_SET_NAME = 15  # linux/prctl.h
# torchrun's default (torch/distributed/run.py: --monitor-interval)
_MONITOR_INTERVAL = 0.1


def launch_config(nproc: int, max_restarts: int) -> LaunchConfig:
    """``torchrun --standalone --nnodes=1``'s configuration (torch/distributed/run.py:config_from_args), with the
    workers forked."""
    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=max_restarts,
        monitor_interval=_MONITOR_INTERVAL,
        start_method="fork",
    )


def name_process(name: str) -> None:
    """The name ``ps``/``top`` show (a forked worker keeps the agent's command line); best effort, Linux only."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (AttributeError, OSError):
        pass


def worker(job_path: str, fatal_marker: str) -> None:
    """One forked DDP worker: stop at once after a failure a restart would only repeat (worker/fatal.py), die
    with the agent, then train."""
    lifeline.exit_if_exists(Path(fatal_marker))
    lifeline.die_with_parent(int(os.environ.get(lifeline.PARENT_PID_ENV) or 0) or None)
    name_process(f"{WORKER_PROCESS_NAME}{os.environ.get('RANK', '?')}")
    try:
        train.main(["--job", job_path])
    except Exception:
        # The worker's own traceback, as a worker torchrun started prints it (through sys.excepthook, which
        # init_process_group makes prefix each line with "[rank<N>]: "); raised out of here, torch's
        # multiprocessing would log it again under its own prefix, and the agent's summary would not show it.
        sys.excepthook(*sys.exc_info())
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--max-restarts", type=int, required=True)
    parser.add_argument("--fatal-marker", type=Path, required=True)
    parser.add_argument("--job", type=Path, required=True)
    args = parser.parse_args(argv)
    os.environ[lifeline.PARENT_PID_ENV] = str(os.getpid())  # what each forked worker checks its parent against
    launch = elastic_launch(launch_config(args.nproc_per_node, args.max_restarts), worker)
    try:
        launch(str(args.job), str(args.fatal_marker))
    except ChildFailedError as err:  # torchrun's own report (each failed rank, its exit code and error), no traceback
        print(err.format_msg(), file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
