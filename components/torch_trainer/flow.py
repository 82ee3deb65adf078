"""The TorchTrainer's steps, free of TFX glue: materialize -> DDP train -> convert -> parity -> batch-size sweep."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from pathlib import Path

import tensorflow_transform as tft
import torch

from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import MlflowRun
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.cluster.multinode import Staging, cluster_job_name, run_on_cluster, staging_for
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.devices import CUDA, chosen_device
from torchtfx.components.torch_trainer.handoff.hparams import IN_PROCESS_MAX_TRAIN_ROWS, TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult
from torchtfx.components.torch_trainer.handoff.materialize import materialize, through_transform_graph
from torchtfx.components.torch_trainer.label_health import check_materialized_labels
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout, layout_from_transform
from torchtfx.components.torch_trainer.run_logs import RunLogs
from torchtfx.components.torch_trainer.savedmodel.batch_sweep import SweepReport, enforce_sweep, sweep_batch_sizes
from torchtfx.components.torch_trainer.savedmodel.convert import build_serving_model, convert_onnx
from torchtfx.components.torch_trainer.savedmodel.parity import ParityReport, enforce, measure_parity
from torchtfx.components.torch_trainer.savedmodel.precision import (
    DriftReport,
    PrecisionVariantError,
    build_reduced_precision_variant,
    measure_drift,
    routes,
    routing_drift,
)
from torchtfx.components.torch_trainer.savedmodel.routing import RoutingReport
from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model
from torchtfx.components.torch_trainer.savedmodel.warmup import raw_examples, write_warmup_requests
from torchtfx.components.torch_trainer.worker.in_process import run_in_process
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    dataset: DatasetConfig
    hparams: TrainerHParams
    split_uris: dict[str, str]  # split name ("train", "eval") -> ExampleGen's raw tf.Examples of the split
    transform_graph_uri: str
    model_uri: str
    serving_dir: str  # the Model artifact's Format-Serving directory
    run_uri: str
    work_dir: str  # scratch space, deleted by TFX after the execution
    mlflow_tracking_uri: str
    mlflow_experiment: str
    mlflow_run_name: str
    mlflow_tags: dict[str, str]
    parity_tolerance: float
    # Set: train on several nodes as a Kubeflow PyTorchJob named after ``unique_id``; None: torchrun here.
    pytorchjob: PyTorchJobSettings | None = None
    unique_id: str = ""
    # Where a failed run leaves its training log and last checkpoint summary (<pipeline root>/logs/<run id>;
    # run_logs.py); "": only in the ModelRun artifact, which TFX deletes when the execution fails.
    log_dir: str = ""
    # TF Serving's max_batch_size (the batching settings): one of the batch sizes the served model is run at.
    serving_batch_size: int = BatchingParams().max_batch_size

    @property
    def raw_eval_uri(self) -> str:
        """The eval split's raw tf.Examples: parity, drift, warmup requests and the MLflow input example."""
        return self.split_uris["eval"]


@dataclasses.dataclass(frozen=True)
class PrecisionOutcome:
    """Which precision ``Format-Serving`` holds, and why: the drift gate's figures, or why no variant exists."""

    requested: str
    served: str
    drift: DriftReport | None = None
    reason: str = ""

    def to_json(self) -> str:
        figures = json.loads(self.drift.to_json()) if self.drift else None
        return json.dumps(
            {"requested": self.requested, "served": self.served, "reason": self.reason, "drift": figures},
            sort_keys=True,
        )


FP32 = PrecisionOutcome("fp32", "fp32")


@dataclasses.dataclass(frozen=True)
class TrainOutcome:
    result: TrainResult
    parity: ParityReport
    layout: FeatureLayout
    seconds: dict[str, float]
    conversion: str = ""  # "<strategy>; repairs: <names>"
    precision: PrecisionOutcome = FP32
    # Rows refused for their label, by split; empty where no row can be (DatasetConfig.label_weight_key is None).
    refused: dict[str, int] = dataclasses.field(default_factory=dict)


def _staging(request: TrainRequest) -> Staging | None:
    if request.pytorchjob is None:
        return None
    return staging_for(request.pytorchjob, cluster_job_name(request.unique_id))


def local_gpus(device: str) -> int:
    """The GPUs this node trains on for ``trainer.device``: the console says which device and, on a GPU node
    whose GPU torch cannot use, why (a small run trains in this process, so its workers never say it);
    ``cuda`` without a usable GPU stops here, before any training (handoff/devices.py)."""
    return torch.cuda.device_count() if chosen_device(device) == CUDA else 0


def _train(
    request: TrainRequest,
    layout: FeatureLayout,
    export_dir: Path,
    data_dir: Path,
    staging: Staging | None,
    logs: RunLogs,
    train_rows: int,
) -> TrainResult:
    workers = request.hparams.workers_for(train_rows, local_gpus(request.hparams.device)) if staging is None else 1
    job = TrainJob(
        data_dir=str(data_dir),
        model_dir=str(export_dir),
        run_dir=request.run_uri,
        layout=layout,
        hparams=request.hparams.replace(num_workers=max(workers, 1)),
        mlflow_tracking_uri=request.mlflow_tracking_uri,
        mlflow_experiment=request.mlflow_experiment,
        mlflow_run_name=request.mlflow_run_name,
        mlflow_tags=request.mlflow_tags,
    )
    Path(request.run_uri).mkdir(parents=True, exist_ok=True)
    if staging is not None:
        run_on_cluster(request.pytorchjob, job, staging, staging.root.name)
    elif workers == 0:
        logger.info(
            "Training in this process: %s rows are below %s (num_workers: auto)", train_rows, IN_PROCESS_MAX_TRAIN_ROWS
        )
        run_in_process(job, logs.open_path(), logs.shown_log, threads=os.cpu_count())
    else:
        launch(job, Path(request.work_dir) / "job.json", logs.open_path(), logs.shown_log)
    return TrainResult.load(Path(request.run_uri) / contracts.RESULT_FILE)


def run(request: TrainRequest) -> TrainOutcome:
    """The steps; a failure (or Ctrl-C) keeps the training log and the last checkpoint's summary in
    ``request.log_dir``, since TFX deletes the failed execution's outputs."""
    staging = _staging(request)
    logs = RunLogs(request.log_dir, Path(request.run_uri))
    try:
        outcome = _run_steps(request, staging, logs)
    except BaseException:
        logs.keep_failure(staging.run_dir if staging else Path(request.run_uri))
        raise
    logs.keep_success()
    return outcome


def _run_steps(request: TrainRequest, staging: Staging | None, logs: RunLogs) -> TrainOutcome:
    seconds: dict[str, float] = {}
    tick = time.perf_counter()
    tft_output = tft.TFTransformOutput(request.transform_graph_uri)
    layout = layout_from_transform(request.dataset, tft_output)
    # Fail before any training when the factory cannot be loaded or its output has the wrong shape.
    build_model(request.hparams.model, layout.model_spec())
    export_dir = contracts.export_dir(request.model_uri)
    export_dir.mkdir(parents=True, exist_ok=True)
    (export_dir / contracts.LAYOUT_FILE).write_text(layout.to_json())
    # Multi-node replicas read the arrays from the shared volume; a local run keeps them in scratch space.
    data_dir = staging.data_dir if staging else Path(request.work_dir) / "arrays"
    materialized = materialize(request.split_uris, layout, through_transform_graph(tft_output, layout), data_dir)
    check_materialized_labels(
        data_dir, list(request.split_uris), layout, request.dataset, request.hparams.class_weights
    )
    seconds["materialize"] = time.perf_counter() - tick

    tick = time.perf_counter()
    result = _train(request, layout, export_dir, data_dir, staging, logs, materialized.rows["train"])
    seconds["train"] = time.perf_counter() - tick

    tick = time.perf_counter()
    conversion = convert_onnx(export_dir / contracts.ONNX_FILE, Path(request.work_dir) / "onnx2tf")
    repaired = (*result.export_repairs, *conversion.repairs)
    converted = f"{conversion.strategy}; repairs: {', '.join(repaired) or 'none'}; exporter: {result.exporter}"
    converted += f"; symbolics: {', '.join(result.export_symbolics)}" if result.export_symbolics else ""
    logger.info("ONNX -> TF: %s", converted)
    build_serving_model(conversion.network, tft_output, request.dataset, layout, Path(request.serving_dir))
    seconds["convert"] = time.perf_counter() - tick

    tick = time.perf_counter()
    model = load_torch_model(export_dir, layout, request.hparams)
    parity = measure_parity(request.serving_dir, request.raw_eval_uri, model, layout, request.parity_tolerance)
    seconds["parity"] = time.perf_counter() - tick
    sweep = _sweep(request, model, layout, parity, seconds)
    passed = parity.passed and sweep.passed
    precision = _finish_serving_model(request, tft_output, layout, export_dir, data_dir, passed, seconds)
    if result.mlflow_run_id:
        tracker = MlflowRun(request.mlflow_tracking_uri, result.mlflow_run_id)
        metrics = {
            contracts.PARITY_PROPERTY: parity.max_abs_diff,
            **(precision.drift.to_metrics() if precision.drift else {}),
        }
        tracker.log_metrics(metrics, step=result.epochs_run)
        tracker.finish("FINISHED" if passed else "FAILED")
    enforce(parity)
    enforce_sweep(sweep)
    refused = materialized.refused if layout.label_weight else {}
    return TrainOutcome(result, parity, layout, seconds, converted, precision, refused)


def _sweep(
    request: TrainRequest, model, layout: FeatureLayout, parity: ParityReport, seconds: dict[str, float]
) -> SweepReport:
    """After FP32 parity: ``serving_default`` at batch 1, uneven sizes and the serving batch (batch_sweep.py)."""
    if not parity.passed:
        return SweepReport(())
    tick = time.perf_counter()
    sweep = sweep_batch_sizes(
        request.serving_dir, request.raw_eval_uri, model, layout, request.parity_tolerance, request.serving_batch_size
    )
    seconds["batch_sweep"] = time.perf_counter() - tick
    return sweep


def _finish_serving_model(
    request: TrainRequest,
    tft_output,
    layout: FeatureLayout,
    export_dir: Path,
    data_dir: Path,
    passed: bool,
    seconds: dict[str, float],
) -> PrecisionOutcome:
    """After FP32 parity and the batch-size sweep: the reduced-precision variant (if asked for and within the drift
    limits), then the warmup requests and the MLflow Model, both of the final Format-Serving. Nothing for a model
    that failed."""
    if not passed:
        return FP32
    tick = time.perf_counter()
    precision = reduced_precision(request, tft_output, layout, export_dir, data_dir)  # the gate compares with FP32
    seconds["precision"] = time.perf_counter() - tick
    tick = time.perf_counter()
    write_warmup_requests(request.serving_dir, request.raw_eval_uri, (request.dataset.label.column,))
    seconds["warmup"] = time.perf_counter() - tick
    tick = time.perf_counter()
    _save_mlflow_model(request, export_dir)
    seconds["mlflow_model"] = time.perf_counter() - tick
    return precision


def _save_mlflow_model(request: TrainRequest, export_dir: Path) -> None:
    """The registry's MLflow Model, built from the final Format-Serving (warmup and precision included)."""
    from torchtfx.components.torch_trainer.savedmodel.mlflow_model import INPUT_EXAMPLE_ROWS, save_mlflow_model

    examples = raw_examples(request.raw_eval_uri, INPUT_EXAMPLE_ROWS * 20, (request.dataset.label.column,))
    save_mlflow_model(
        contracts.mlflow_model_dir(request.model_uri),
        Path(request.serving_dir),
        export_dir,
        request.hparams.to_json(),
        examples,
        Path(request.work_dir) / "mlflow_model",
    )


def reduced_precision(
    request: TrainRequest, tft_output, layout: FeatureLayout, export_dir: Path, data_dir: Path
) -> PrecisionOutcome:
    """With ``serving.precision: fp16``, build the variant, measure it against the FP32 SavedModel on the
    eval split (raw examples; a routed model's top-k expert choices also on the materialized split,
    ``data_dir/eval``), and swap it into ``Format-Serving`` only when every drift figure is within its limit."""
    serving = request.hparams.serving
    if serving.precision == "fp32":
        return FP32
    variant_dir = Path(request.work_dir) / f"serving-{serving.precision}"
    try:
        method = build_reduced_precision_variant(
            export_dir / contracts.ONNX_FILE, tft_output, request.dataset, layout, variant_dir
        )
    except PrecisionVariantError as err:
        logger.warning("No %s variant (%s); serving the FP32 model", serving.precision, err)
        return PrecisionOutcome(serving.precision, "fp32", reason=str(err))
    routing = _routing(request, tft_output, layout, export_dir / contracts.ONNX_FILE, data_dir)
    drift = measure_drift(
        request.serving_dir,
        str(variant_dir),
        request.raw_eval_uri,
        layout.task,
        serving.drift_limits,
        method,
        routing,
        sum(layout.sequence_max_lengths),
    )
    logger.info("Precision drift of the %s variant vs FP32: %s", serving.precision, drift.summary())
    if not drift.passed:
        reason = "refused by the drift gate: " + "; ".join(drift.violations)
        logger.warning("The %s variant was %s; serving the FP32 model", serving.precision, reason)
        return PrecisionOutcome(serving.precision, "fp32", drift, reason)
    if "CPU" in method:
        # make bench (zoo and research corpus, 2026-12): the float16 network on CPU takes 0.6-1.0x the FP32 one's
        # time at batch 1, 0.6-1.6x at batch 32 and 1.3-3.4x at batch 1024; the variant is meant for GPU servers.
        logger.warning(
            "Serving the %s variant (%s): on CPU-only servers it is slower than FP32", serving.precision, method
        )
    _swap_in(variant_dir, Path(request.serving_dir))
    return PrecisionOutcome(serving.precision, serving.precision, drift, "within the drift limits")


def _routing(
    request: TrainRequest, tft_output, layout: FeatureLayout, onnx_path: Path, data_dir: Path
) -> RoutingReport | None:
    """FP32 vs FP16 top-k expert choices of a routed graph (None: no TopK) on the materialized eval split. A
    multi-node run's arrays went with its staging folder after training: they are written again to scratch."""
    if not routes(onnx_path):
        return None
    eval_dir = data_dir / "eval"
    if not eval_dir.is_dir():
        local = Path(request.work_dir) / "routing-arrays"
        materialize({"eval": request.raw_eval_uri}, layout, through_transform_graph(tft_output, layout), local)
        eval_dir = local / "eval"
    return routing_drift(onnx_path, eval_dir)


def _swap_in(variant_dir: Path, serving_dir: Path) -> None:
    """Replace the FP32 SavedModel with the variant: FP32 is renamed aside first, so at every moment one
    complete SavedModel is at one of the two paths (the artifact is not published before the step ends)."""
    aside = serving_dir.with_name(serving_dir.name + ".fp32")
    os.replace(serving_dir, aside)
    shutil.move(str(variant_dir), str(serving_dir))
    shutil.rmtree(aside)
