"""``models.config``, the model config file TF Serving reads, written and read through TF Serving's own proto.

It is a ``tensorflow.serving.ModelServerConfig`` (from the pinned tensorflow-serving-api), in text format, read
back by parsing, never by matching lines (``batching.py`` holds the other file, ``batching_parameters.txt``).

``models.config`` is edited, never rebuilt: a write sets this project's model entry (its versions and the labels
it is given) and keeps every other model, field and label; a copy of what torchtfx wrote last
(``.models.config.torchtfx``) tells the versions an operator pinned by hand from those torchtfx listed. A file
that does not parse stops every command with the way out (:func:`read_models_config`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.components.tf_serving.layout import write_text_atomic

MODELS_CONFIG = "models.config"
LAST_WRITTEN = ".models.config.torchtfx"  # a copy of the models.config torchtfx wrote last
STABLE, CANARY = "stable", "canary"
OWN_LABELS = (STABLE, CANARY)  # the labels torchtfx moves; any other label is the operator's and is kept
_HEADER = (
    "# torchtfx edits this model's versions and its stable/canary labels on every promotion or rollback;\n"
    "# other models, other labels and other fields are kept as they are.\n"
)


@dataclasses.dataclass(frozen=True)
class ServedState:
    """What one model's entry in models.config asks of the server: the versions to keep loaded
    (``model_version_policy.specific``) and the labels pointing at some of them."""

    versions: frozenset[int]
    labels: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def label_versions(self) -> frozenset[int]:
        return frozenset(self.labels.values())

    def describe(self) -> str:
        labels = ", ".join(f"{k}->{v}" for k, v in sorted(self.labels.items())) or "no labels"
        return f"versions {sorted(self.versions)}, {labels}"


def _fill(model, model_name: str, base_path: Path, state: ServedState) -> None:
    """Set one model entry's versions and labels; its other fields (logging, platform config) stay."""
    model.name = model_name
    model.base_path = model.base_path or str(base_path)
    model.model_platform = model.model_platform or "tensorflow"
    model.model_version_policy.specific.versions[:] = sorted(state.versions)
    model.version_labels.clear()
    for label, version in sorted(state.labels.items()):
        model.version_labels[label] = version


def to_proto(model_name: str, base_path: Path, state: ServedState) -> model_server_config_pb2.ModelServerConfig:
    return edited(None, model_name, base_path, state)


def edited(
    config: model_server_config_pb2.ModelServerConfig | None,
    model_name: str,
    base_path: Path,
    state: ServedState | None,
) -> model_server_config_pb2.ModelServerConfig:
    """A copy of ``config`` with ``model_name``'s entry set to ``state`` (added if missing, removed for None);
    every other model and field is left as it was."""
    result = model_server_config_pb2.ModelServerConfig()
    if config is not None:
        result.CopyFrom(config)
    entries = result.model_config_list.config
    found = next((m for m in entries if m.name == model_name), None)
    if state is None:
        if found is not None:
            entries.remove(found)
        return result
    _fill(found if found is not None else entries.add(), model_name, base_path, state)
    return result


def state_of(config: model_server_config_pb2.ModelServerConfig, model_name: str) -> ServedState | None:
    for model in config.model_config_list.config:
        if model.name == model_name:
            return ServedState(frozenset(model.model_version_policy.specific.versions), dict(model.version_labels))
    return None


def write_models_config(serving_dir: Path, model_name: str, state: ServedState | None) -> None:
    """Edit ``model_name``'s entry of ``<serving_dir>/models.config`` (the file is removed once it lists no
    model); keeps a copy of what was written, the baseline that tells hand edits apart."""
    config = edited(read_models_config(serving_dir), model_name, serving_dir, state)
    path = serving_dir / MODELS_CONFIG
    if not config.model_config_list.config:
        path.unlink(missing_ok=True)
        (serving_dir / LAST_WRITTEN).unlink(missing_ok=True)
        return
    text = _HEADER + text_format.MessageToString(config)
    write_text_atomic(serving_dir / LAST_WRITTEN, text)  # first: a version listed by us is never taken as pinned
    write_text_atomic(path, text)


def _parse(path: Path) -> model_server_config_pb2.ModelServerConfig:
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(path.read_text(), config)
    return config


def _unparseable(path: Path, err: Exception) -> ServingConfigError:
    last = path.parent / LAST_WRITTEN
    restore = (
        f"put back the config torchtfx wrote last: `cp {last} {path}` (hand edits made since are lost); or "
        if last.is_file() and last.read_text() != path.read_text()
        else ""
    )
    return ServingConfigError(
        f"{path} is not a ModelServerConfig text proto ({err}); TF Serving cannot read it either, and nothing was "
        f"changed. Fix that line by hand; or {restore}remove it and run `torchtfx promote --finish`, which writes "
        "this model's entry from the registry (other models and hand edits in the file are lost)"
    )


def read_models_config(serving_dir: Path) -> model_server_config_pb2.ModelServerConfig | None:
    path = serving_dir / MODELS_CONFIG
    if not path.is_file():
        return None
    try:
        return _parse(path)
    except text_format.ParseError as err:
        raise _unparseable(path, err) from None


def read_state(serving_dir: Path, model_name: str | None = None) -> ServedState | None:
    """The served state of ``model_name`` (or of the file's only model) in ``<serving_dir>/models.config``."""
    config = read_models_config(serving_dir)
    if config is None or not config.model_config_list.config:
        return None
    return state_of(config, model_name or config.model_config_list.config[0].name)


def pinned_by_hand(serving_dir: Path, model_name: str, current: ServedState | None) -> frozenset[int]:
    """Versions of ``model_name`` listed in models.config that torchtfx did not list when it last wrote it."""
    last = serving_dir / LAST_WRITTEN
    if current is None or not last.is_file():
        return frozenset()
    try:
        written = state_of(_parse(last), model_name)
    except text_format.ParseError:
        return frozenset()
    return current.versions - (written.versions if written else frozenset())


def read_stable_version(serving_dir: Path, model_name: str | None = None) -> int | None:
    """The ``stable`` label of models.config, if there is one."""
    state = read_state(serving_dir, model_name)
    return None if state is None else state.labels.get(STABLE)
