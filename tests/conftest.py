"""Shared fixtures: the taxi config, a small real sample of the packaged CSV, and a real TFT
transform graph over it (session-scoped: built once, a few seconds)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import helpers
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout, layout_from_transform
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import default_data_dir


@dataclasses.dataclass
class TinyTaxi:
    cfg: object
    examples_dir: Path
    examples_path: Path
    tft_output: object
    layout: FeatureLayout
    arrays: ArraySplit


@pytest.fixture(scope="session")
def taxi_cfg():
    return load_dataset_config("taxi")


@pytest.fixture(scope="session")
def taxi_csv(taxi_cfg) -> Path:
    return default_data_dir(taxi_cfg) / "data.csv"


def _tiny(tmp_path_factory, cfg, csv: Path, rows: int = 800) -> TinyTaxi:
    """``rows`` rows of the CSV as raw examples, a real TFT graph over them, and their model arrays (rows
    whose label is refused left out, as the Trainer's materialize step does)."""
    root = tmp_path_factory.mktemp(f"tiny_{cfg.name}")
    schema = helpers.read_schema(cfg.schema_path)
    examples_path = helpers.write_examples(helpers.csv_rows(csv, rows), schema, root / "Split-eval")
    tft_output = helpers.run_transform(cfg, examples_path.parent, root)
    layout = layout_from_transform(cfg, tft_output)
    xf = helpers.transform_examples(tft_output, examples_path)
    keep = xf[layout.label_weight].reshape(-1) > 0 if layout.label_weight else slice(None)
    arrays = ArraySplit(
        dense=np.stack([xf[k].reshape(-1) for k in layout.dense], axis=1).astype(np.float32)[keep],
        categorical=np.stack([xf[k].reshape(-1) for k in layout.embedded], axis=1).astype(np.int64)[keep],
        label=xf[layout.label].reshape(-1).astype(np.float32)[keep],
    )
    return TinyTaxi(cfg, examples_path.parent, examples_path, tft_output, layout, arrays)


@pytest.fixture(scope="session")
def tiny_taxi(tmp_path_factory, taxi_cfg, taxi_csv) -> TinyTaxi:
    return _tiny(tmp_path_factory, taxi_cfg, taxi_csv)


@pytest.fixture(scope="session")
def tiny_payment(tmp_path_factory, taxi_csv) -> TinyTaxi:
    """Multiclass: the taxi payment type (3 classes)."""
    return _tiny(tmp_path_factory, load_dataset_config("taxi_payment"), taxi_csv, rows=1500)


@pytest.fixture(scope="session")
def tiny_tips(tmp_path_factory, taxi_csv) -> TinyTaxi:
    """Regression: the tip in dollars, trained on log1p."""
    return _tiny(tmp_path_factory, load_dataset_config("taxi_tips"), taxi_csv)


@pytest.fixture
def taxi_pipeline(tmp_path, taxi_cfg):
    """The pipeline ``create_pipeline`` builds for the taxi dataset with default hyperparameters (not run)."""
    from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
    from torchtfx.pipeline.pipeline import create_pipeline
    from torchtfx.pipeline.settings.bound import PipelineSettings

    return create_pipeline(
        PipelineSettings(
            dataset=taxi_cfg,
            hparams=TrainerHParams(),
            pipeline_root=str(tmp_path / "root"),
            data_root=str(tmp_path),
            serving_model_dir=str(tmp_path / "serving"),
            mlflow_tracking_uri="sqlite:///x.db",
        )
    )
