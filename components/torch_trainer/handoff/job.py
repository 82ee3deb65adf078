"""The contract between the executor and the DDP worker processes: one JSON file per training job.

The file is on a shared volume for multi-node jobs: its tracking URI is redacted, and each worker gets the real
one back from ``MLFLOW_TRACKING_URI`` in its environment (where the executor found it)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from torchtfx.components.shared.mlflow_client import redact, unredact
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout


@dataclasses.dataclass(frozen=True)
class TrainJob:
    data_dir: str  # holds train/ and eval/ array splits
    model_dir: str  # torch state_dict + ONNX go here (inside the Model artifact)
    run_dir: str  # checkpoints, history, curves, result (inside the ModelRun artifact)
    layout: FeatureLayout
    hparams: TrainerHParams
    mlflow_tracking_uri: str  # the real URI, in memory only: the file holds it redacted
    mlflow_experiment: str
    mlflow_run_name: str
    mlflow_tags: dict[str, str]

    def save(self, path: Path) -> None:
        payload = {
            **dataclasses.asdict(self),
            "hparams": self.hparams.model_dump(mode="json"),
            "mlflow_tracking_uri": redact(self.mlflow_tracking_uri),
        }
        path.write_text(json.dumps(payload, indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> TrainJob:
        raw = json.loads(Path(path).read_text())
        raw["layout"] = FeatureLayout.from_json(json.dumps(raw["layout"]))
        raw["hparams"] = TrainerHParams.parse(raw["hparams"], f"{path}: hparams", written_by_torchtfx=True)
        raw["mlflow_tracking_uri"] = unredact(raw["mlflow_tracking_uri"])
        return cls(**raw)


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What rank 0 reports back after training and export."""

    best_epoch: int
    epochs_run: int
    eval_loss: float
    eval_metrics: dict[str, float]  # the task's: auc (binary), accuracy (multiclass), rmse and mae (regression)
    train_examples: int
    eval_examples: int
    world_size: int
    device: str
    seconds: float
    examples_per_second: float
    onnx_max_abs_diff: float
    mlflow_run_id: str | None
    export_repairs: list[str] = dataclasses.field(default_factory=list)  # repairs the ONNX export needed
    exporter: str = "legacy"  # "dynamo" where the legacy exporter failed
    export_symbolics: list[str] = dataclasses.field(default_factory=list)  # torchtfx symbolics the export used

    @property
    def eval_auc(self) -> float | None:
        return self.eval_metrics.get("auc")

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> TrainResult:
        return cls(**json.loads(Path(path).read_text()))
