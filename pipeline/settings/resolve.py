"""The one place that decides every setting: the command line over ``pools.yaml`` over the dataset YAML over
the default (:mod:`torchtfx.pipeline.settings.declared`), each value with the source it came from.

``torchtfx run`` resolves without ``pools.yaml``; ``torchtfx compile`` and ``torchtfx config show --config``
with it. The typed configs the pipeline gets (trainer hyperparameters, the model, serving precision, gates) are
built here from the resolved values and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from torchtfx.components.torch_trainer.public import TrainerHParams
from torchtfx.data.config.dataset import DatasetConfig, dataset_yaml_path, load_dataset_config
from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import ServingConfig
from torchtfx.data.config.strict import ConfigError, load_yaml
from torchtfx.data.config.text import PRETRAINED
from torchtfx.pipeline.settings.beam_args import BeamSettings
from torchtfx.pipeline.settings.declared import BY_KEY, LOCAL, settings_for
from torchtfx.pipeline.settings.layers import DEFAULT, Layer, file_layer

_MODEL_FACTORY, _MODEL_HPARAMS = "model.factory", "model.hparams"
# The model a dataset with text features gets when no layer names one: the tabular default (mlp) takes no token
# sequences and stopped the run at the model check. The zoo's text_transformer is what the shipped text dataset
# (data/datasets/movie_reviews.yaml) names.
TEXT_DEFAULT_MODEL = "text_transformer"
TEXT_DEFAULT_SOURCE = f"{DEFAULT} (the dataset has text features)"
# A text feature with tokenizer: pretrained is a checkpoint's tokens: its encoder reads them, not one from scratch.
PRETRAINED_DEFAULT_MODEL = "hf_sequence_classifier"
PRETRAINED_DEFAULT_SOURCE = f"{DEFAULT} (the dataset has a pretrained text feature)"


class SettingsError(ConfigError):
    """The resolved settings do not make a valid configuration together."""


@dataclass(frozen=True)
class Resolved:
    value: Any
    source: str  # "default", "command line: --epochs", "kubeflow/pools.yaml: trainer.hyperparameters.epochs"


@dataclass(frozen=True)
class ResolvedSettings:
    """Every setting of one run, resolved, and the typed configs made from them (each built once)."""

    run: str  # declared.LOCAL or declared.KUBEFLOW
    values: dict[str, Resolved]
    loaded_dataset: DatasetConfig  # as its YAML describes it, before the settings above are applied

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def _section(self, prefix: str) -> dict[str, Any]:
        """``{"epochs": 12, "drift_limits": {...}}`` from the keys under ``prefix.``."""
        nested: dict[str, Any] = {}
        for key, resolved in self.values.items():
            if key.startswith(prefix + "."):
                *parents, leaf = key[len(prefix) + 1 :].split(".")
                node = nested
                for parent in parents:
                    node = node.setdefault(parent, {})
                node[leaf] = resolved.value
        return nested

    def _build(self, config: type, prefix: str) -> Any:
        try:
            return config().replace(**self._section(prefix))
        except ConfigError as err:
            raise SettingsError(self._named(str(err), prefix)) from None

    def _named(self, message: str, prefix: str) -> str:
        """A config's error with each key named as a setting, with its source: ``trainer.num_workers (command
        line: --num-workers): must be ...``."""
        lines = []
        for line in message.splitlines():
            field, sep, problem = line.strip().partition(": ")
            key = f"{prefix}.{field}"
            lines.append(f"{key} ({self.values[key].source}): {problem}" if sep and key in self.values else line)
        return "\n  ".join(lines)

    def check(self) -> None:
        """Raise :class:`SettingsError` where the resolved values do not make valid configs together."""
        _ = (self.hparams, self.dataset, self.beam)

    @cached_property
    def model(self) -> ModelConfig:
        return self._build(ModelConfig, "model")

    @cached_property
    def serving(self) -> ServingConfig:
        return self._build(ServingConfig, "serving")

    @cached_property
    def beam(self) -> BeamSettings:
        """The DirectRunner's mode and worker count (a local run's; defaults for a Kubeflow one)."""
        return self._build(BeamSettings, "beam")

    @cached_property
    def gates(self) -> GateConfig:
        return self._build(GateConfig, "gates")

    @cached_property
    def hparams(self) -> TrainerHParams:
        """The trainer's hyperparameters with the resolved model and serving precision (not yet checked:
        ``model_choice.checked_hparams`` loads the model)."""
        return self._build(TrainerHParams, "trainer").replace(model=self.model, serving=self.serving)

    @cached_property
    def dataset(self) -> DatasetConfig:
        """The dataset config with the resolved gates, model and serving precision (one copy of each)."""
        try:
            return self.loaded_dataset.replace(gates=self.gates, model=self.model, serving=self.serving)
        except ConfigError as err:
            raise SettingsError(f"{err} (`torchtfx config show` lists where each value came from)") from None


def _first(key: str, layers: list[Layer]) -> Resolved:
    for layer in layers:
        if key in layer.values:
            return Resolved(layer.values[key], layer.where(key))
    return Resolved(BY_KEY[key].default, DEFAULT)


def _default_factory(dataset: DatasetConfig) -> Resolved:
    """The model when no layer names one: the declared default, or the text model for a dataset with text."""
    if any(text.tokenizer == PRETRAINED for text in dataset.text.values()):
        return Resolved(PRETRAINED_DEFAULT_MODEL, PRETRAINED_DEFAULT_SOURCE)
    if dataset.text:
        return Resolved(TEXT_DEFAULT_MODEL, TEXT_DEFAULT_SOURCE)
    return Resolved(BY_KEY[_MODEL_FACTORY].default, DEFAULT)


def _model_hparams(layers: list[Layer], default_factory: str) -> Resolved:
    """The model's hyperparameters, merged key by key from the lowest layer up; a layer that names another
    factory starts over (hyperparameters given for one model mean nothing to another)."""
    factory, merged = default_factory, dict(BY_KEY[_MODEL_HPARAMS].default)
    sources: dict[str, str] = {}
    for layer in reversed(layers):
        named = layer.values.get(_MODEL_FACTORY, factory)
        if named != factory:
            factory, merged, sources = named, {}, {}
        for name, value in layer.values.get(_MODEL_HPARAMS, {}).items():
            merged[name], sources[name] = value, layer.where(_MODEL_HPARAMS)
    distinct = set(sources.values())
    if len(distinct) <= 1:
        return Resolved(merged, distinct.pop() if distinct else DEFAULT)
    return Resolved(merged, "; ".join(f"{name} from {where}" for name, where in sorted(sources.items())))


def _dataset_layer(name_or_path: str) -> tuple[Layer, DatasetConfig]:
    path = dataset_yaml_path(name_or_path)
    dataset = load_dataset_config(path)
    return file_layer(show_path(path), load_yaml(path), dataset, "dataset"), dataset


def resolve_settings(
    run: str = LOCAL, command_line: Layer | None = None, pools: Layer | None = None
) -> ResolvedSettings:
    """Every setting of ``run``: ``command_line`` over ``pools`` (``pools.yaml``, Kubeflow runs) over the dataset
    YAML (the dataset they name, else the default one) over the default."""
    upper = [layer for layer in (command_line, pools) if layer is not None]
    dataset_name = _first("dataset", upper)
    dataset_layer, dataset = _dataset_layer(str(dataset_name.value))
    layers = [*upper, dataset_layer]
    values = {s.key: _first(s.key, layers) for s in settings_for(run)}
    values["dataset"] = dataset_name
    default_factory = _default_factory(dataset)
    if values[_MODEL_FACTORY].source == DEFAULT:
        values[_MODEL_FACTORY] = default_factory
    values[_MODEL_HPARAMS] = _model_hparams(layers, default_factory.value)
    return ResolvedSettings(run, values, dataset)


def pools_layer(source: str, raw: dict[str, Any], settings: Any) -> Layer:
    """The settings ``pools.yaml`` names (``settings``: its validated KubeflowSettings)."""
    return file_layer(source, raw, settings, "pools")


def show_path(path: Path | str) -> str:
    """A file as ``config show`` names it: relative to the working folder when it is under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
