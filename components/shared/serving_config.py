"""TF Serving's configuration files, written and read through TF Serving's own protos.

``models.config`` is a ``tensorflow.serving.ModelServerConfig`` (from the pinned tensorflow-serving-api), in
text format. ``batching_parameters.txt`` is a ``tensorflow.serving.BatchingParameters``: that message lives
in ``session_bundle_config.proto``, which the pip package does not ship, so the message is built here
(:func:`batching_message_class`) from that file's field names, numbers and types (tensorflow/serving
2.16.1), and a test checks it against them. Both files are read back by parsing, never by matching lines.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from torchtfx.components.shared.serving_layout import BatchingParams, write_text_atomic

MODELS_CONFIG = "models.config"
BATCHING_CONFIG = "batching_parameters.txt"
STABLE, CANARY = "stable", "canary"
_HEADER = "# Written by torchtfx on every promotion or rollback; do not edit by hand.\n"


class ServingConfigError(ValueError):
    """A serving configuration file cannot be parsed."""


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


def to_proto(model_name: str, base_path: Path, state: ServedState) -> model_server_config_pb2.ModelServerConfig:
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = str(base_path)
    model.model_platform = "tensorflow"
    model.model_version_policy.specific.versions.extend(sorted(state.versions))
    for label, version in sorted(state.labels.items()):
        model.version_labels[label] = version
    return config


def state_of(config: model_server_config_pb2.ModelServerConfig, model_name: str) -> ServedState | None:
    for model in config.model_config_list.config:
        if model.name == model_name:
            return ServedState(frozenset(model.model_version_policy.specific.versions), dict(model.version_labels))
    return None


def write_models_config(serving_dir: Path, model_name: str, state: ServedState) -> None:
    config = to_proto(model_name, serving_dir, state)
    write_text_atomic(serving_dir / MODELS_CONFIG, _HEADER + text_format.MessageToString(config))


def read_models_config(serving_dir: Path) -> model_server_config_pb2.ModelServerConfig | None:
    path = serving_dir / MODELS_CONFIG
    if not path.is_file():
        return None
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(path.read_text(), config)
    except text_format.ParseError as err:
        raise ServingConfigError(
            f"{path} is not a ModelServerConfig text proto ({err}); restore it from the registry with "
            "`torchtfx promote --finish`, or remove it and rerun"
        ) from None
    return config


def read_state(serving_dir: Path, model_name: str | None = None) -> ServedState | None:
    """The served state of ``model_name`` (or of the file's only model) in ``<serving_dir>/models.config``."""
    config = read_models_config(serving_dir)
    if config is None or not config.model_config_list.config:
        return None
    return state_of(config, model_name or config.model_config_list.config[0].name)


def read_stable_version(serving_dir: Path) -> int | None:
    """The ``stable`` label of models.config, if there is one."""
    state = read_state(serving_dir)
    return None if state is None else state.labels.get(STABLE)


# -- batching_parameters.txt ------------------------------------------------------------------------
# (name, number, type): session_bundle_config.proto's BatchingParameters.
BATCHING_FIELDS = (
    ("max_batch_size", 1, ".google.protobuf.Int64Value"),
    ("batch_timeout_micros", 2, ".google.protobuf.Int64Value"),
    ("max_enqueued_batches", 3, ".google.protobuf.Int64Value"),
    ("num_batch_threads", 4, ".google.protobuf.Int64Value"),
    ("thread_pool_name", 5, ".google.protobuf.StringValue"),
    ("allowed_batch_sizes", 6, "TYPE_INT64"),
    ("pad_variable_length_inputs", 7, "TYPE_BOOL"),
    ("enable_large_batch_splitting", 8, ".google.protobuf.BoolValue"),
    ("max_execution_batch_size", 9, ".google.protobuf.Int64Value"),
)


@functools.cache
def batching_message_class() -> type:
    """``tensorflow.serving.BatchingParameters``, field for field as in session_bundle_config.proto, in a
    private descriptor pool (so it never clashes with a tensorflow-serving-api that ships the file)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = file.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for name, number, kind in BATCHING_FIELDS:
        repeated = name == "allowed_batch_sizes"
        entry = message.field.add(name=name, number=number,
                                  label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)  # fmt: skip
        if kind.startswith("."):
            entry.type, entry.type_name = field.TYPE_MESSAGE, kind
        else:
            entry.type = getattr(field, kind)
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def batching_proto(params: BatchingParams):
    message = batching_message_class()()
    message.max_batch_size.value = params.max_batch_size
    message.batch_timeout_micros.value = params.batch_timeout_micros
    message.max_enqueued_batches.value = params.max_enqueued_batches
    message.num_batch_threads.value = params.num_batch_threads
    return message


def write_batching(serving_dir: Path, params: BatchingParams) -> None:
    write_text_atomic(serving_dir / BATCHING_CONFIG, text_format.MessageToString(batching_proto(params)))


def read_batching(serving_dir: Path):
    message = batching_message_class()()
    text_format.Parse((serving_dir / BATCHING_CONFIG).read_text(), message)
    return message
