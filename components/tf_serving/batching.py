"""TF Serving's batching settings and the file that carries them, ``batching_parameters.txt`` (the server's
``--batching_parameters_file``, beside models.config, read at the server's start only).

The file is a ``tensorflow.serving.BatchingParameters``: that message lives in ``session_bundle_config.proto``,
which the pip package does not ship, so the message is built here (:func:`batching_message_class`) from that
file's field names, numbers and types (tensorflow/serving 2.16.1), and a test checks it against them. The file
is read back by parsing, never by matching lines.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pydantic
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, wrappers_pb2

from torchtfx.components.tf_serving.layout import write_text_atomic
from torchtfx.data.config.strict import ConfigError, StrictConfig

BATCHING_CONFIG = "batching_parameters.txt"


class BatchingConfigError(ConfigError):
    """A batching parameter is unknown or not positive."""


class BatchingParams(StrictConfig):
    """TF Serving's --batching_parameters_file, written beside models.config."""

    config_error = BatchingConfigError

    max_batch_size: pydantic.PositiveInt = 1024
    batch_timeout_micros: pydantic.PositiveInt = 2000
    num_batch_threads: pydantic.PositiveInt = 4
    max_enqueued_batches: pydantic.PositiveInt = 100


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
        entry = message.field.add(
            name=name, number=number, label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
        )
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
