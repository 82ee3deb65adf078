"""Which model the Trainer builds: the command line over the Kubeflow/trainer settings over the dataset YAML.

The result is checked before anything runs (import, hyperparameters, output shape on a provisional spec),
and a file factory is embedded as its source text, so that the compiled spec and every training process
carry the code the user named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from torchtfx.components.torch_trainer.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.factory import build_model, embed_source, provisional_spec
from torchtfx.components.torch_trainer.modeling.spec import SequenceInput
from torchtfx.data.config.dataset import DatasetConfig, transformed_name
from torchtfx.data.config.model import ModelConfig, ModelConfigError
from torchtfx.data.config.serving import ServingConfig
from torchtfx.data.config.task import MULTICLASS
from torchtfx.data.config.text import RESERVED_IDS


def parse_model_hparams(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, each value read as YAML (``3``, ``0.1``, ``[64, 32]``, ``true``, ``reglu``)."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ModelConfigError(f"--model-hparam {pair!r} is not KEY=VALUE (e.g. --model-hparam dropout=0.2)")
        try:
            parsed[key.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ModelConfigError(f"--model-hparam {pair!r}: the value is not valid YAML ({err})") from None
    return parsed


def configured_model(dataset: DatasetConfig, hparams: TrainerHParams) -> ModelConfig:
    """The trainer section's model; one left at the default defers to the dataset YAML's choice."""
    return dataset.model if hparams.model == ModelConfig() else hparams.model


def configured_serving(dataset: DatasetConfig, hparams: TrainerHParams) -> ServingConfig:
    """The trainer section's serving precision; one left at the default defers to the dataset YAML's."""
    return dataset.serving if hparams.serving == ServingConfig() else hparams.serving


def choose_model(
    dataset: DatasetConfig,
    hparams: TrainerHParams,
    factory: str | None = None,
    overrides: dict[str, Any] | None = None,
    base_dir: Path | None = None,
    serving_precision: str | None = None,
) -> TrainerHParams:
    """``hparams`` with the model resolved, embedded and checked (for the dataset's task), and the serving
    precision resolved: the command line over the trainer section over the dataset YAML."""
    model = embed_source(configured_model(dataset, hparams).with_overrides(factory, overrides or {}), base_dir)
    classes = dataset.label.num_classes if dataset.task == MULTICLASS else 1
    sequences = tuple(
        SequenceInput(transformed_name(key), RESERVED_IDS + text.top_k + text.num_oov_buckets, text.max_length)
        for key, text in sorted(dataset.text.items())
    )
    spec = provisional_spec(tuple(dataset.dense), tuple(dataset.embedded_features), dataset.task, classes, sequences)
    build_model(model, spec)
    serving = configured_serving(dataset, hparams).with_overrides(serving_precision)
    return hparams.replace(model=model, serving=serving)
