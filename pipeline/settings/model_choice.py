"""The model the settings chose (pipeline/settings/resolve.py), checked before anything runs: import,
hyperparameters, output shape on a provisional spec. A file factory is embedded as its source text, so that the
compiled spec and every training process carry the code the user named.
"""

from __future__ import annotations

from pathlib import Path

from torchtfx.components.torch_trainer.public import (
    SequenceInput,
    TrainerHParams,
    build_model,
    embed_source,
    provisional_spec,
)
from torchtfx.data.config.dataset import DatasetConfig, transformed_name
from torchtfx.data.config.model import ModelConfigError
from torchtfx.data.config.task import MULTICLASS
from torchtfx.data.config.text import padding_id, vocab_upper_bound
from torchtfx.pipeline.settings.resolve import ResolvedSettings


def checked_hparams(dataset: DatasetConfig, hparams: TrainerHParams, base_dir: Path | None = None) -> TrainerHParams:
    """``hparams`` (with the model the settings resolved: pipeline/settings/resolve.py) with a file factory's
    source embedded, once the model is known to build for the dataset's task and inputs."""
    model = embed_source(hparams.model, base_dir)
    classes = (dataset.label.num_classes or 1) if dataset.task == MULTICLASS else 1  # multiclass: never None
    sequences = tuple(
        SequenceInput(
            transformed_name(key), vocab_upper_bound(text), text.max_length, padding_id(text), text.checkpoint
        )
        for key, text in sorted(dataset.text.items())
    )
    spec = provisional_spec(tuple(dataset.dense), tuple(dataset.embedded_features), dataset.task, classes, sequences)
    build_model(model, spec)
    return hparams.replace(model=model)


def checked_model(resolved: ResolvedSettings) -> TrainerHParams:
    """:func:`checked_hparams` of the resolved settings; a refusal says where the model and its hyperparameters
    came from (``hidden_units: [-1, 0]`` in which file, or which option)."""
    try:
        return checked_hparams(resolved.dataset, resolved.hparams)
    except ModelConfigError as err:
        factory, hparams = resolved.values["model.factory"].source, resolved.values["model.hparams"].source
        raise ModelConfigError(f"{err} [model.factory from {factory}; model.hparams from {hparams}]") from None
