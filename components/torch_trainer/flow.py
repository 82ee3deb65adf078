"""The TorchTrainer's steps, free of TFX glue: materialize -> DDP train -> convert -> parity gate."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import tensorflow_transform as tft
import torch
from torch import nn

from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import MlflowRun
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.cluster.multinode import Staging, cluster_job_name, run_on_cluster, staging_for
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.export.convert import build_serving_model, convert_onnx
from torchtfx.components.torch_trainer.export.parity import ParityReport, enforce, measure_parity
from torchtfx.components.torch_trainer.features import FeatureLayout, layout_from_transform
from torchtfx.components.torch_trainer.hparams import TrainerHParams
from torchtfx.components.torch_trainer.materialize import materialize
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.worker.job import TrainJob, TrainResult
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    dataset: DatasetConfig
    hparams: TrainerHParams
    raw_eval_uri: str  # raw tf.Examples of the eval split (parity runs on these)
    transformed_uris: dict[str, str]  # split name -> Transform output directory
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


@dataclasses.dataclass(frozen=True)
class TrainOutcome:
    result: TrainResult
    parity: ParityReport
    layout: FeatureLayout
    seconds: dict[str, float]
    conversion: str = ""  # "<strategy>; repairs: <names>"


def load_torch_model(export_dir: Path, layout: FeatureLayout, hparams: TrainerHParams) -> nn.Module:
    """The trained network, rebuilt by its factory and loaded with the saved weights."""
    model = build_model(hparams.model, layout.model_spec())
    state = torch.load(export_dir / contracts.STATE_DICT_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.eval()


def _staging(request: TrainRequest) -> Staging | None:
    if request.pytorchjob is None:
        return None
    return staging_for(request.pytorchjob, cluster_job_name(request.unique_id))


def _train(
    request: TrainRequest, layout: FeatureLayout, export_dir: Path, data_dir: Path, staging: Staging | None
) -> TrainResult:
    job = TrainJob(
        data_dir=str(data_dir),
        model_dir=str(export_dir),
        run_dir=request.run_uri,
        layout=layout,
        hparams=request.hparams,
        mlflow_tracking_uri=request.mlflow_tracking_uri,
        mlflow_experiment=request.mlflow_experiment,
        mlflow_run_name=request.mlflow_run_name,
        mlflow_tags=request.mlflow_tags,
    )
    Path(request.run_uri).mkdir(parents=True, exist_ok=True)
    if staging is not None:
        run_on_cluster(request.pytorchjob, job, staging, staging.root.name)
    else:
        launch(job, Path(request.work_dir) / "job.json", Path(request.run_uri) / contracts.TRAIN_LOG_FILE)
    return TrainResult.load(Path(request.run_uri) / contracts.RESULT_FILE)


def run(request: TrainRequest) -> TrainOutcome:
    seconds: dict[str, float] = {}
    tick = time.perf_counter()
    tft_output = tft.TFTransformOutput(request.transform_graph_uri)
    layout = layout_from_transform(request.dataset, tft_output)
    # Fail before any training when the factory cannot be loaded or its output has the wrong shape.
    build_model(request.hparams.model, layout.model_spec())
    export_dir = contracts.export_dir(request.model_uri)
    export_dir.mkdir(parents=True, exist_ok=True)
    (export_dir / contracts.LAYOUT_FILE).write_text(layout.to_json())
    staging = _staging(request)
    # Multi-node replicas read the arrays from the shared volume; a local run keeps them in scratch space.
    data_dir = staging.data_dir if staging else Path(request.work_dir) / "arrays"
    materialize(request.transformed_uris, layout, tft_output.transformed_feature_spec(), data_dir)
    seconds["materialize"] = time.perf_counter() - tick

    tick = time.perf_counter()
    result = _train(request, layout, export_dir, data_dir, staging)
    seconds["train"] = time.perf_counter() - tick

    tick = time.perf_counter()
    conversion = convert_onnx(export_dir / contracts.ONNX_FILE, Path(request.work_dir) / "onnx2tf")
    repaired = (*result.export_repairs, *conversion.repairs)
    converted = f"{conversion.strategy}; repairs: {', '.join(repaired) or 'none'}"
    logger.info("ONNX -> TF: %s", converted)
    build_serving_model(conversion.network, tft_output, request.dataset, layout, Path(request.serving_dir))
    seconds["convert"] = time.perf_counter() - tick

    tick = time.perf_counter()
    model = load_torch_model(export_dir, layout, request.hparams)
    parity = measure_parity(request.serving_dir, request.raw_eval_uri, model, layout, request.parity_tolerance)
    seconds["parity"] = time.perf_counter() - tick
    if result.mlflow_run_id:
        tracker = MlflowRun(request.mlflow_tracking_uri, result.mlflow_run_id)
        tracker.log_metrics({contracts.PARITY_PROPERTY: parity.max_abs_diff}, step=result.epochs_run)
        tracker.finish("FINISHED" if parity.passed else "FAILED")
    enforce(parity)
    return TrainOutcome(result, parity, layout, seconds, converted)
