"""Which device the Trainer trains on, and why a GPU it was asked for cannot be used.

``trainer.device`` (``--device``): ``auto`` (the default) trains on CUDA when torch can use it, else on the CPU;
``cuda`` requires it and stops the run at once, before any stage, where torch cannot (a Kubeflow step placed on a
GPU pool is compiled with ``cuda``); ``cpu`` never uses a GPU.

The failure this prevents (issue #44): torch 2.14.1's wheels are built for CUDA 13, which needs NVIDIA driver 580
or newer. On a node with an older driver ``torch.cuda.is_available()`` is False without a word, and the run
trained on the CPU while the GPU it was billed for stayed idle. :func:`cuda_status` keeps torch's own reason
(``torch.cuda.init()``'s message: "Found no NVIDIA driver on your system", "The NVIDIA driver on your system is too
old (found version 12020)", ...) and the driver the kernel reports, so the error and the console can say why.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Literal

from torchtfx.components.stage_failure import StageFailure

logger = logging.getLogger(__name__)

Device = Literal["auto", "cuda", "cpu"]
DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")
AUTO, CUDA, CPU = DEVICES
# The oldest NVIDIA driver each CUDA major release runs on (NVIDIA's CUDA Toolkit release notes, "minor version
# compatibility"): the floor of a torch build is its CUDA major's.
DRIVER_FLOOR = {"13": "580", "12": "525.60.13", "11": "450.80.02"}
_DRIVER_FILE = Path("/proc/driver/nvidia/version")
# What a GPU node shows even when torch cannot use it: a GPU was expected there.
_GPU_SIGNS = ("/dev/nvidia0", "/dev/nvidiactl")


class CudaUnavailableError(StageFailure):
    """The run requires CUDA (``trainer.device: cuda``, or a Kubeflow GPU pool) and torch cannot use it here."""


@dataclasses.dataclass(frozen=True)
class CudaStatus:
    usable: bool
    devices: int
    reason: str  # torch's own, when not usable
    torch_version: str
    torch_cuda: str | None  # the CUDA the torch build targets; None for a CPU-only build
    driver: str | None  # the NVIDIA kernel driver's version, where the node reports one

    @property
    def driver_floor(self) -> str | None:
        return DRIVER_FLOOR.get(self.torch_cuda.split(".")[0]) if self.torch_cuda else None

    @property
    def gpu_expected(self) -> bool:
        """Whether this machine looks like a GPU node (a driver or NVIDIA device files), usable or not."""
        return self.driver is not None or any(os.path.exists(sign) for sign in _GPU_SIGNS)

    def describe(self) -> str:
        build = (
            f"torch {self.torch_version} built for CUDA {self.torch_cuda}"
            if self.torch_cuda
            else (f"torch {self.torch_version} built without CUDA (a CPU-only wheel)")
        )
        floor = f", which needs NVIDIA driver >= {self.driver_floor}" if self.driver_floor else ""
        driver = f"NVIDIA driver {self.driver}" if self.driver else "no NVIDIA driver reported by the kernel"
        return f"{self.reason} ({build}{floor}; {driver})"


def _driver_version() -> str | None:
    try:
        text = _DRIVER_FILE.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..."
    for word in text.split():
        if word[:1].isdigit() and "." in word:
            return word
    return None


def cuda_status() -> CudaStatus:
    """What torch can do with CUDA here, and torch's reason where it cannot."""
    import torch

    usable = torch.cuda.is_available()
    reason = ""
    if not usable:
        if torch.version.cuda is None:
            reason = "torch was built without CUDA"
        else:
            try:
                torch.cuda.init()
                reason = "torch sees no CUDA device (CUDA_VISIBLE_DEVICES may hide them)"
            except (RuntimeError, AssertionError) as err:
                reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    devices = torch.cuda.device_count() if usable else 0
    return CudaStatus(usable, devices, reason, torch.__version__, torch.version.cuda, _driver_version())


def require_cuda(what: str, status: CudaStatus | None = None) -> CudaStatus:
    """``status`` when CUDA is usable; :class:`CudaUnavailableError` naming torch's reason and the fixes."""
    status = status or cuda_status()
    if status.usable:
        return status
    raise CudaUnavailableError(
        f"{what} requires a GPU (trainer.device: cuda, or a Kubeflow step on a GPU pool), but torch cannot use "
        f"CUDA here: {status.describe()}. Fix: run on a node whose NVIDIA driver is >= "
        f"{status.driver_floor or 'what your torch build needs'}, or build the step image with torch for CUDA 12.x "
        "for older drivers (docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126, "
        "kubeflow/Dockerfile), or set --device auto (train on the CPU where no GPU is usable) or --device cpu"
    )


def chosen_device(device: str, status: CudaStatus | None = None) -> str:
    """``cuda`` or ``cpu`` for a ``trainer.device`` setting, saying which on the console; ``cuda`` without a
    usable GPU raises :class:`CudaUnavailableError`."""
    if device == CPU:
        logger.info("Training on the CPU (trainer.device: cpu)")
        return CPU
    status = status or cuda_status()
    if device == CUDA:
        require_cuda("This run", status)
    if status.usable:
        logger.info(
            "Training on CUDA: %d GPU(s), torch %s, CUDA %s", status.devices, status.torch_version, status.torch_cuda
        )
        return CUDA
    if status.gpu_expected:
        logger.warning("Training on the CPU: this node has an NVIDIA GPU, but %s", status.describe())
    else:
        logger.info("Training on the CPU (no GPU here; trainer.device: auto)")
    return CPU
