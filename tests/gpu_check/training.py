"""The torch items: AMP + GradScaler DDP training on CUDA (nccl) through the real launcher, and ``torchtfx run
--device cuda`` end to end. Each returns (status, detail) for tests/gpu_check/runner.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from tests import helpers
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.constants import MODEL_RUN_KEY
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import default_data_dir

PASS, FAIL = "PASS", "FAIL"
SAMPLE_ROWS = 3000  # the e2e tests' taxi sample (tests/e2e/test_pipeline.py)


def tiny_taxi(work: Path) -> helpers.TinyTaxi:
    """The unit tests' ``tiny_taxi`` fixture: 800 taxi rows, a real TFT graph, their model arrays."""
    cfg = load_dataset_config("taxi")
    return helpers.tiny_dataset(
        Path(tempfile.mkdtemp(prefix="tiny_taxi-", dir=work)), cfg, default_data_dir(cfg) / "data.csv"
    )


def _ddp_verdict(job: TrainJob, work: Path, ranks: int) -> tuple[str, str]:
    """Launch ``job`` (torchrun's agent, ``ranks`` workers) and judge it: trained on cuda by every rank, AMP on (the
    checkpoint's GradScaler state is empty when the scaler is disabled), every loss finite."""
    launch(job, work / "job.json", work / "train.log")
    run = Path(job.run_dir)
    result = TrainResult.load(run / contracts.RESULT_FILE)
    scaler = torch.load(run / contracts.CHECKPOINT_FILE, weights_only=True)["scaler"]
    history = json.loads((run / contracts.HISTORY_FILE).read_text())
    losses = [result.eval_loss] + [h["train_loss"] for h in history] + [h["eval_loss"] for h in history]
    problems = []
    if result.device != "cuda":
        problems.append(f"trained on {result.device}, not cuda")
    if result.world_size != ranks:
        problems.append(f"{result.world_size} rank(s), not {ranks}")
    if not scaler:
        problems.append("AMP was off (the checkpoint's GradScaler state is empty: the scaler was disabled)")
    if not all(math.isfinite(x) for x in losses):
        problems.append(f"a loss is not finite: {losses}")
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in sorted(result.eval_metrics.items()))
    detail = (
        f"{result.world_size} rank(s) on {result.device} (nccl), fp16 autocast + GradScaler (scale "
        f"{scaler.get('scale', 'none')}), {result.epochs_run} epochs, eval loss {result.eval_loss:.4f}, {metrics}, "
        f"ONNX parity {result.onnx_max_abs_diff:.2g}, {result.seconds:.1f} s"
    )
    return (FAIL, "; ".join(problems) + f" ({detail})") if problems else (PASS, detail)


def _mlp(work: Path, ranks: int) -> tuple[str, str]:
    job = helpers.tiny_train_job(work, tiny_taxi(work), num_workers=ranks, device="cuda", epochs=2)
    return _ddp_verdict(job, work, ranks)


def _text(work: Path, ranks: int) -> tuple[str, str]:
    """The zoo's text_transformer (small) on texts whose label is a token's presence (tests/unit: test_ddp_text)."""
    job = helpers.text_train_job(work, "text_transformer", epochs=3, num_workers=ranks, device="cuda")
    return _ddp_verdict(job, work, ranks)


def ddp_mlp_one_rank(work: Path) -> tuple[str, str]:
    return _mlp(work, 1)


def ddp_mlp_two_ranks(work: Path) -> tuple[str, str]:
    return _mlp(work, 2)


def ddp_text_one_rank(work: Path) -> tuple[str, str]:
    return _text(work, 1)


def ddp_text_two_ranks(work: Path) -> tuple[str, str]:
    return _text(work, 2)


def torchtfx_run_cuda(work: Path) -> tuple[str, str]:
    """``torchtfx run --device cuda`` on the e2e tests' taxi sample, as a user runs it: every stage, trained on
    cuda (the Trainer's result.json in its ModelRun artifact), blessed and promoted."""
    cfg = load_dataset_config("taxi")
    rows = helpers.csv_rows(default_data_dir(cfg) / "data.csv", SAMPLE_ROWS)
    data = helpers.write_sample(rows, work / "data", list(rows[0]))
    root = work / "pipeline"
    command = [sys.executable, "-m", "torchtfx.pipeline.cli.main", "run", "--data-dir", str(data)]
    command += ["--pipeline-root", str(root), "--serving-dir", str(work / "serving")]
    command += ["--confirm-labels", "immediate", "--device", "cuda", "--epochs", "6"]
    proc = subprocess.run(command, capture_output=True, text=True)
    (work / "torchtfx-run.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.strip()), "")
        return FAIL, f"torchtfx run exited with code {proc.returncode}: {last} (log: {work / 'torchtfx-run.log'})"
    summary = helpers.metadata(root)
    model_run = summary.output(contracts.TRAINER_ID, MODEL_RUN_KEY) if summary else None
    if model_run is None:
        return FAIL, f"no {MODEL_RUN_KEY} artifact of {contracts.TRAINER_ID} in {root / 'metadata.sqlite'}"
    result = TrainResult.load(Path(model_run.uri) / contracts.RESULT_FILE)
    detail = (
        f"trained on {result.device} ({result.world_size} worker(s), eval loss {result.eval_loss:.4f}, "
        f"auc {result.eval_auc}), parity {summary.parity}, blessed {summary.blessed}, pushed to {summary.pushed_to}"
    )
    problems = [] if result.device == "cuda" else [f"trained on {result.device}, not cuda"]
    problems += [] if summary.blessed else ["not blessed by the Evaluator"]
    problems += [] if summary.pushed_to else ["not promoted (nothing pushed)"]
    problems += [] if math.isfinite(result.eval_loss) else ["the eval loss is not finite"]
    return (FAIL, "; ".join(problems) + f" ({detail})") if problems else (PASS, detail)
