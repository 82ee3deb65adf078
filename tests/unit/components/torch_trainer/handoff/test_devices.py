"""trainer.device: which device the Trainer trains on, and a required GPU that torch cannot use named with torch's
reason, the driver it needs and the fixes (issue #44: a GPU run trained on the CPU without a word)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from torchtfx.components.torch_trainer.handoff.devices import (
    CudaStatus,
    CudaUnavailableError,
    chosen_device,
    cuda_status,
    require_cuda,
)
from torchtfx.components.torch_trainer.handoff.hparams import HParamsError, TrainerHParams

OLD_DRIVER = CudaStatus(
    usable=False,
    devices=0,
    reason="The NVIDIA driver on your system is too old (found version 12020)",
    torch_version="2.14.1+cu130",
    torch_cuda="13.0",
    driver="535.104.05",
)
A_GPU = CudaStatus(True, 1, "", "2.14.1+cu130", "13.0", "580.65.06")


def test_an_old_driver_is_named_with_the_floor_torch_needs_and_every_fix():
    with pytest.raises(CudaUnavailableError) as raised:
        require_cuda("This run", OLD_DRIVER)
    message = str(raised.value)
    for part in (
        "too old (found version 12020)",
        "built for CUDA 13.0, which needs NVIDIA driver >= 580",
        "NVIDIA driver 535.104.05",
        "--build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126",
        "--device auto",
    ):
        assert part in message


def test_a_hidden_device_stops_a_cuda_run_with_torchs_own_reason():
    """CUDA_VISIBLE_DEVICES="" hides every GPU, on a GPU node as on this one; torch's reason is kept."""
    script = (
        "from torchtfx.components.torch_trainer.handoff.devices import cuda_status, require_cuda\n"
        "status = cuda_status()\n"
        "assert not status.usable and status.reason, status\n"
        "require_cuda('This run', status)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    # torch's reason: "Found no NVIDIA driver on your system" here, "No CUDA GPUs are available" on a GPU node
    assert last.startswith("torchtfx.components.torch_trainer.handoff.devices.CudaUnavailableError: This run requires")
    assert "torch cannot use CUDA here: " in last and "Fix: run on a node whose NVIDIA driver is >=" in last


def test_auto_trains_on_the_gpu_when_usable_and_says_why_not_on_a_gpu_node(caplog, monkeypatch):
    caplog.set_level(logging.INFO)
    assert chosen_device("auto", A_GPU) == "cuda"
    assert chosen_device("cuda", A_GPU) == "cuda"
    assert chosen_device("cpu", A_GPU) == "cpu"
    assert chosen_device("auto", OLD_DRIVER) == "cpu"  # the driver is reported: a GPU node
    warning = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning and "has an NVIDIA GPU, but The NVIDIA driver on your system is too old" in warning[0].getMessage()
    with pytest.raises(CudaUnavailableError):
        chosen_device("cuda", OLD_DRIVER)


def test_this_machine_without_a_gpu_trains_on_the_cpu_under_auto():
    status = cuda_status()
    if status.usable:
        pytest.skip("a usable GPU here")
    assert chosen_device("auto", status) == "cpu"


def test_the_setting_is_auto_by_default_and_use_gpu_still_reads():
    assert TrainerHParams().device == "auto"
    assert TrainerHParams(use_gpu=False).device == "cpu"
    assert TrainerHParams(use_gpu=True).device == "auto"
    assert TrainerHParams.from_json('{"use_gpu": false, "epochs": 2}').device == "cpu"  # an older hparams.json
    with pytest.raises(HParamsError, match="device"):
        TrainerHParams(device="gpu")


def test_the_trainer_step_says_its_device_and_refuses_a_required_gpu_before_training(caplog):
    from torchtfx.components.torch_trainer.flow import local_gpus

    caplog.set_level(logging.INFO)
    assert local_gpus("cpu") == 0
    assert "Training on the CPU (trainer.device: cpu)" in caplog.text
    if cuda_status().usable:
        pytest.skip("a usable GPU here")
    assert local_gpus("auto") == 0
    with pytest.raises(CudaUnavailableError, match="requires a GPU"):
        local_gpus("cuda")
