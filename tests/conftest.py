"""Shared fixtures: the taxi config, a small real sample of the packaged CSV, and a real TFT
transform graph over it (session-scoped: built once, a few seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import helpers
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.data.csv_reader.sources import default_data_dir


@pytest.fixture(scope="session")
def taxi_cfg():
    return load_dataset_config("taxi")


@pytest.fixture(scope="session")
def taxi_csv(taxi_cfg) -> Path:
    return default_data_dir(taxi_cfg) / "data.csv"


@pytest.fixture(scope="session")
def tiny_taxi(tmp_path_factory, taxi_cfg, taxi_csv) -> helpers.TinyTaxi:
    return helpers.tiny_dataset(tmp_path_factory.mktemp("tiny_taxi"), taxi_cfg, taxi_csv)


@pytest.fixture(scope="session")
def tiny_payment(tmp_path_factory, taxi_csv) -> helpers.TinyTaxi:
    """Multiclass: the taxi payment type (3 classes)."""
    return helpers.tiny_dataset(
        tmp_path_factory.mktemp("tiny_taxi_payment"), load_dataset_config("taxi_payment"), taxi_csv, rows=1500
    )


@pytest.fixture(scope="session")
def tiny_tips(tmp_path_factory, taxi_csv) -> helpers.TinyTaxi:
    """Regression: the tip in dollars, trained on log1p."""
    return helpers.tiny_dataset(tmp_path_factory.mktemp("tiny_taxi_tips"), load_dataset_config("taxi_tips"), taxi_csv)


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
