"""TF Serving warmup requests beside the serving SavedModel: ``assets.extra/tf_serving_warmup_requests``.

TF Serving replays these at load, before the version takes traffic, so the first client requests do not pay
for lazily initialized state (graph function instantiation, lookup-table initialization, first allocations,
GPU kernel selection). The format is TF Serving's "SavedModel Warmup": an uncompressed TFRecord file of
``PredictionLog`` records (at most 1000), each a ``PredictRequest`` to ``serving_default`` whose string input
holds serialized raw tf.Examples. TFX's InfraValidator writes and reads the same file. The Promoter copies the
whole SavedModel folder, so the file travels with every pushed version.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

from torchtfx.components.shared.served_interface import SERVING_SIGNATURE
from torchtfx.components.torch_trainer.handoff.materialize import example_batches

logger = logging.getLogger(__name__)

WARMUP_DIR = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
# TF Serving refuses a warmup file with more records than this (its SavedModel Warmup docs).
MAX_WARMUP_RECORDS = 1000
# One record per batch size. TF Serving replays every record before the version serves, so each one delays
# the version's availability: a few records are enough to initialize what is lazy, and the sizes cover a
# single-row online request (1), a small client batch (8) and a batch the server's batching merges (32).
# Largest first: the fp16 variant's TF-TRT engine (trt_convert's defaults: implicit batch, one cached engine)
# is built for the first batch it sees and then serves every batch up to that size; larger ones run the TF
# segment instead.
WARMUP_BATCH_SIZES = (32, 8, 1)


def warmup_path(saved_model_dir: Path | str) -> Path:
    return Path(saved_model_dir) / WARMUP_DIR / WARMUP_FILE


def serving_input_name(saved_model_dir: Path | str, signature: str = SERVING_SIGNATURE) -> str:
    """The key of ``signature``'s one string input, read from ``saved_model.pb`` (no graph is loaded): TF
    Serving matches a PredictRequest's inputs to the signature by this key."""
    saved = saved_model_pb2.SavedModel.FromString((Path(saved_model_dir) / "saved_model.pb").read_bytes())
    signatures = [g.signature_def[signature] for g in saved.meta_graphs if signature in g.signature_def]
    if not signatures:
        raise ValueError(f"{saved_model_dir} has no {signature!r} signature")
    inputs = signatures[0].inputs
    names = [name for name, info in inputs.items() if info.dtype == types_pb2.DT_STRING]
    if len(inputs) != 1 or len(names) != 1:
        raise ValueError(
            f"{signature!r} of {saved_model_dir} takes {sorted(inputs)}; warmup needs one string input of "
            "serialized tf.Examples"
        )
    return names[0]


def raw_examples(raw_split_uri: str, count: int, drop_columns: Iterable[str]) -> list[bytes]:
    """The split's first ``count`` serialized tf.Examples, without ``drop_columns`` (a client's request
    carries no label)."""
    drop = tuple(drop_columns)
    batch = next(iter(example_batches(raw_split_uri, count)), None)
    records = [] if batch is None else [bytes(r) for r in batch.numpy()]
    if not drop:
        return records
    stripped = []
    for record in records:
        example = tf.train.Example.FromString(record)
        for column in drop:
            if column in example.features.feature:
                del example.features.feature[column]
        stripped.append(example.SerializeToString())
    return stripped


def _prediction_log(input_name: str, examples: Sequence[bytes]) -> prediction_log_pb2.PredictionLog:
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = SERVING_SIGNATURE
    request.inputs[input_name].CopyFrom(tf.make_tensor_proto(list(examples), dtype=tf.string))
    return prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))


def write_warmup_requests(
    saved_model_dir: Path | str,
    raw_split_uri: str,
    drop_columns: Iterable[str] = (),
    batch_sizes: Sequence[int] = WARMUP_BATCH_SIZES,
) -> int:
    """Write one warmup record per batch size, of the split's first raw examples, into the SavedModel's
    ``assets.extra``; a split with fewer rows gives smaller batches. Returns the number of records."""
    if not batch_sizes or len(batch_sizes) > MAX_WARMUP_RECORDS or min(batch_sizes) < 1:
        raise ValueError(f"warmup batch sizes {batch_sizes!r}: need 1 to {MAX_WARMUP_RECORDS} sizes, each >= 1")
    input_name = serving_input_name(saved_model_dir)
    examples = raw_examples(raw_split_uri, max(batch_sizes), drop_columns)
    if not examples:
        raise ValueError(f"no raw examples in {raw_split_uri} to build warmup requests from")
    sizes = list(dict.fromkeys(min(size, len(examples)) for size in batch_sizes))
    path = warmup_path(saved_model_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:  # uncompressed: TF Serving reads it without options
        for size in sizes:
            writer.write(_prediction_log(input_name, examples[:size]).SerializeToString())
    logger.info("Wrote %s warmup requests (batch sizes %s) to %s", len(sizes), sizes, path)
    return len(sizes)


def read_warmup_requests(saved_model_dir: Path | str) -> list[prediction_log_pb2.PredictionLog]:
    """The warmup file's records, parsed as TF Serving parses them."""
    path = warmup_path(saved_model_dir)
    if not path.is_file():
        raise FileNotFoundError(f"{saved_model_dir} has no warmup requests at {WARMUP_DIR}/{WARMUP_FILE}")
    return [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


@dataclasses.dataclass(frozen=True)
class Replayed:
    """One warmup request as TF Serving runs it: its inputs (as numpy) and the signature's outputs."""

    signature: str
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]


def replay_warmup(saved_model_dir: Path | str, loaded=None) -> list[Replayed]:
    """Run every warmup record through the signature it names, as TF Serving does at load; ``loaded`` is the
    already loaded SavedModel, if the caller has one."""
    loaded = loaded if loaded is not None else tf.saved_model.load(str(saved_model_dir))
    replayed = []
    for log in read_warmup_requests(saved_model_dir):
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"warmup record of type {log.WhichOneof('log_type')!r}; only predict_log is written")
        request = log.predict_log.request
        signature = loaded.signatures[request.model_spec.signature_name]
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        outputs = signature(**{name: tf.constant(value) for name, value in inputs.items()})
        replayed.append(Replayed(request.model_spec.signature_name, inputs, {k: v.numpy() for k, v in outputs.items()}))
    return replayed
