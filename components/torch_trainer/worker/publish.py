"""Rank 0's side effects: MLflow run, state_dict, ONNX export + onnxruntime check, curves, result."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import torch
from torch import nn

from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import MlflowRun
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.torch_to_onnx.dynamo_export import ModelRecipe
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import check_onnx, export_onnx
from torchtfx.components.torch_trainer.worker.metrics import plot_training_curves
from torchtfx.components.torch_trainer.worker.outcomes import Evaluation, TrainingRun

logger = logging.getLogger("torchtfx.train")


def start_tracking(job: TrainJob) -> MlflowRun:
    """Start the MLflow run, or reopen it after an elastic restart (its id is kept in run_dir)."""
    id_file = Path(job.run_dir) / contracts.MLFLOW_RUN_ID_FILE
    if id_file.exists():
        return MlflowRun(job.mlflow_tracking_uri, id_file.read_text().strip())
    run = MlflowRun.start(job.mlflow_tracking_uri, job.mlflow_experiment, job.mlflow_run_name, job.mlflow_tags)
    # The id first: a worker killed from here on is restarted into this run, never into a second one.
    id_file.parent.mkdir(parents=True, exist_ok=True)
    id_file.write_text(run.run_id)
    params = {k: v for k, v in json.loads(job.hparams.to_json()).items() if k != "model"}
    model = job.hparams.model
    params.update(
        model_factory=model.factory,
        model_hparams=json.dumps(model.hparams, sort_keys=True),
        # The source itself would exceed MLflow's parameter size; its digest names the exact file.
        model_source_sha256=hashlib.sha256(model.source.encode()).hexdigest() if model.source else "",
        dense_features=",".join(job.layout.dense),
        embedded_features=",".join(job.layout.embedded),
        cardinalities=",".join(map(str, job.layout.cardinalities)),
    )
    run.log_params(params)
    return run


def log_epoch(tracker: MlflowRun, record: dict[str, float]) -> None:
    """One epoch's history record as MLflow metrics at step = the epoch (1-based)."""
    tracker.log_metrics({k: v for k, v in record.items() if k != "epoch"}, step=int(record["epoch"]))


def log_missing_epochs(tracker: MlflowRun, history: list[dict[str, float]]) -> None:
    """After a restart: log the checkpointed epochs that the killed worker had not logged yet."""
    logged = {m.step for m in tracker.client.get_metric_history(tracker.run_id, "eval_loss")}
    for record in history:
        if int(record["epoch"]) not in logged:
            log_epoch(tracker, record)


def publish(
    job: TrainJob, net: nn.Module, training: TrainingRun, final: Evaluation, tracker: MlflowRun | None
) -> TrainResult:
    """Save the best weights ``net``, export and check ONNX, plot curves, log artifacts, write the result."""
    model_dir, run_dir = Path(job.model_dir), Path(job.run_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    net = net.cpu().eval()
    state_path = model_dir / contracts.STATE_DICT_FILE
    torch.save(net.state_dict(), state_path)
    eval_split = ArraySplit.load(Path(job.data_dir) / "eval")
    onnx_path = model_dir / contracts.ONNX_FILE
    head = ExportHead.for_layout(net, job.layout).eval()
    recipe = ModelRecipe(job.hparams.model, job.layout.model_spec(), job.layout.task, job.layout.log1p_target)
    export = export_onnx(head, eval_split, onnx_path, recipe)
    onnx_diff = check_onnx(head, onnx_path, eval_split)
    history_path = run_dir / contracts.HISTORY_FILE
    history_path.write_text(json.dumps(training.history, indent=2))
    curves_path = run_dir / contracts.CURVES_FILE
    plot_training_curves(training.history, curves_path, job.layout.task)
    best_epoch = min(training.history, key=lambda h: h["eval_loss"])["epoch"] if training.history else 0
    result = TrainResult(
        best_epoch=int(best_epoch),
        epochs_run=training.epochs_run,
        eval_loss=float(final.loss),
        eval_metrics={name: float(value) for name, value in final.metrics.items()},
        train_examples=training.train_examples,
        eval_examples=len(eval_split),
        world_size=training.world_size,
        device=training.device,
        seconds=training.seconds,
        examples_per_second=training.examples_per_second,
        onnx_max_abs_diff=onnx_diff,
        export_repairs=list(export.repairs),
        exporter=export.exporter,
        export_symbolics=list(export.symbolics),
        mlflow_run_id=tracker.run_id if tracker else None,
    )
    if tracker is not None:
        best = {"best_eval_loss": final.loss, "onnx_max_abs_diff": onnx_diff}
        best.update({f"best_eval_{name}": value for name, value in final.metrics.items()})
        tracker.log_metrics(best, step=training.epochs_run)
        for path, folder in ((state_path, "torch"), (onnx_path, "onnx"), (curves_path, "plots"), (history_path, None)):
            tracker.log_artifact(path, folder)
    result.save(run_dir / contracts.RESULT_FILE)
    logger.info(
        "Training done: best epoch %s of %s, eval %s, eval loss %.4f, %s workers on %s",
        result.best_epoch,
        result.epochs_run,
        ", ".join(f"{k} {v:.4f}" for k, v in sorted(result.eval_metrics.items())),
        result.eval_loss,
        result.world_size,
        result.device,
    )
    return result
