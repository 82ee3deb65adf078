"""Each worker's place in the process group torchrun prepared (rank, device), joined once per restart attempt."""

from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist

from torchtfx.components.torch_trainer.handoff.devices import CUDA, chosen_device
from torchtfx.components.torch_trainer.worker.collectives import nccl_error_handling


@dataclasses.dataclass(frozen=True)
class DistContext:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _attempt_store(timeout: datetime.timedelta) -> tuple[dist.Store, int, int]:
    """torchrun's store, with keys private to this restart attempt; its waits end after ``timeout``.

    The elastic agent's store outlives a restart; without a per-attempt prefix, restarted workers can read
    the dead workers' gloo addresses left in it and fail (or hang) connecting to them.
    """
    store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"torchtfx/attempt_{attempt}", store), rank, world_size


def setup(device: str, threads: int, timeout: datetime.timedelta, run_dir: str | Path) -> DistContext:
    """Join the process group torchrun prepared: nccl on CUDA, gloo on CPU, by ``device`` (``trainer.device``:
    ``cuda`` without a usable GPU raises, naming torch's reason: handoff/devices.py). A collective (and joining)
    that waits longer than ``timeout`` for another rank fails; with NCCL, torch's watchdog ends the process and
    leaves its flight recorder in ``run_dir`` (worker/collectives.py)."""
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.set_num_threads(threads)
    store, rank, world_size = _attempt_store(timeout)
    if chosen_device(device) == CUDA:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        nccl_error_handling(run_dir)
        dist.init_process_group(
            "nccl", store=store, rank=rank, world_size=world_size, timeout=timeout, device_id=device
        )
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    return DistContext(dist.get_rank(), local_rank, dist.get_world_size(), device)
