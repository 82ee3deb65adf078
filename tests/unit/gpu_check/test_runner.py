"""make gpu-check's runner: on this CPU machine every item is skipped with its reason and the script exits 0; an
item that fails, hangs or dies fails the run (exit 1). The GPU items themselves need a GPU (make gpu-check)."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from tests.gpu_check import runner
from torchtfx.components.torch_trainer.handoff.devices import CudaStatus


@pytest.mark.skipif(torch.cuda.is_available(), reason="a usable GPU: make gpu-check runs the items")
def test_without_a_gpu_every_item_is_skipped_with_torchs_or_tensorflows_reason(capsys):
    assert runner.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("gpu-check: torch ") and "TensorFlow " in lines[0] and "driver" in lines[0]
    reported = {line.split(":")[0]: line for line in lines if line.split(" ")[0] in ("PASS", "FAIL", "SKIP")}
    assert list(reported) == [f"SKIP {item.name}" for item in runner.ITEMS]
    for item in runner.ITEMS:
        reason = reported[f"SKIP {item.name}"].split(": ", 1)[1]
        expected = "torch cannot use CUDA: " if item.needs == runner.TORCH else "tf.config.list_physical_devices"
        assert reason.startswith(expected), reason
    assert lines[-1].startswith(f"gpu-check: 0 passed, 0 failed, {len(runner.ITEMS)} skipped in ")


def test_every_item_names_a_check_function():
    for item in runner.ITEMS:
        module, function = item.target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), item


def _gpu_machine(devices: int = 1) -> runner.Machine:
    cuda = CudaStatus(True, devices, "", "2.14.1", "13.0", "580.65.06")
    return runner.Machine(cuda, "2.16.2", "CUDA 12.3, cuDNN 8", ("/physical_device:GPU:0",), "no TensorRT", ())


def test_on_a_gpu_machine_a_failed_item_fails_the_run_and_an_unmet_need_is_skipped(monkeypatch, capsys, tmp_path):
    ran = []

    def run_child(argv, timeout_s, log_path):
        name = argv[argv.index("--item") + 1]
        ran.append(name)
        return (runner.FAIL, "loss is nan") if name == "ddp-amp-mlp" else (runner.PASS, "ok")

    monkeypatch.setattr(runner, "probe", _gpu_machine)
    monkeypatch.setattr(runner, "run_child", run_child)
    assert runner.main(["--work", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL ddp-amp-mlp: loss is nan" in out and "PASS ddp-amp-text-transformer: ok" in out
    assert "SKIP ddp-amp-mlp-2-ranks: needs 2 GPUs, torch sees 1" in out
    assert "SKIP tf-trt-fp16-drift-gate: no TensorRT" in out
    assert "gpu-check: 5 passed, 1 failed, 3 skipped" in out and "-2-ranks" not in " ".join(ran)
    monkeypatch.setattr(runner, "probe", lambda: _gpu_machine(devices=2))
    assert runner.main(["--work", str(tmp_path), "--only", "ddp-amp-mlp-2-ranks", "--budget-s", "5"]) == 1
    assert "FAIL ddp-amp-mlp-2-ranks: not started: 5 s left of the 5 s budget" in capsys.readouterr().out


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_child_that_hangs_dies_or_reports_is_judged(tmp_path):
    log = tmp_path / "item.log"
    status, detail = runner.run_child(_child("import time; time.sleep(60)"), 1, log)
    assert (status, detail) == (runner.FAIL, f"timed out after 1 s (killed; log: {log})")
    status, detail = runner.run_child(_child("raise SystemExit('CUDA error: out of memory')"), 30, log)
    assert status == runner.FAIL and "exited with code 1 and no result: CUDA error: out of memory" in detail
    report = f'print(\'noise\'); print({runner.RESULT_MARK!r} + \'{{"status": "PASS", "detail": "fine"}}\')'
    assert runner.run_child(_child(report), 30, log) == (runner.PASS, "fine")
    failing = runner.Item("x", "json:loads", runner.TORCH, 1)  # loads(Path) raises TypeError
    status, detail = runner.run_item(failing, tmp_path / "x")
    assert status == runner.FAIL and detail.startswith("TypeError: ")
