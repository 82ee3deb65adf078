"""Test helpers: tiny raw tf.Example files and a real TFT analyze+transform over them (Beam
DirectRunner in-process), so unit tests get a genuine transform graph without a TFX pipeline."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import re
from pathlib import Path

import numpy as np
import psutil
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.utils import io_utils
from tfx_bsl.public import tfxio

from torchtfx.components.torch_trainer.handoff.constants import WORKER_PROCESS_NAME
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout, layout_from_transform
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.model import ModelConfig
from torchtfx.pipeline.reporting.summary import RunSummary, latest_run
from torchtfx.pipeline.transform.preprocessing import transform

# Two executions of the same float32 network, or of two graphs that compute the same thing (a rebuilt
# SavedModel, fused lookups), are not bit-identical across machines: oneDNN picks its kernels (and so the
# order of a sum) by the CPU's instruction set. Measured on the project's machines: 0.0 on Intel with
# AVX-512, 5.96e-8 on AMD EPYC without it. Outputs here are probabilities or logits of order 1, so a few
# float32 ulps (1.19e-7 each at 1.0) bound a rerun; any real change (float16, a wrong row) is 1e-4 or more.
FLOAT32_RERUN_TOLERANCE = 1e-6


def read_schema(path: Path) -> schema_pb2.Schema:
    return io_utils.SchemaReader().read(str(path))


def row_to_example(row: dict[str, str], schema: schema_pb2.Schema) -> tf.train.Example:
    """Like CsvExampleGen: typed by the schema, empty cells become empty value lists."""
    types = {f.name: f.type for f in schema.feature}
    feature = {}
    for name, text in row.items():
        kind = types.get(name, schema_pb2.BYTES)
        values = [] if text == "" else [text]
        if kind == schema_pb2.INT:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(float(v)) for v in values]))
        elif kind == schema_pb2.FLOAT:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def csv_rows(path: Path, limit: int | None = None) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return rows[:limit] if limit else rows


def write_examples(rows: list[dict[str, str]], schema: schema_pb2.Schema, directory: Path) -> Path:
    """Gzipped TFRecord of raw examples in ``directory`` (the layout of an ExampleGen split)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "data_tfrecord-00000-of-00001.gz"
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for row in rows:
            writer.write(row_to_example(row, schema).SerializeToString())
    return path


def run_transform(cfg: DatasetConfig, examples_dir: Path, out_dir: Path) -> tft.TFTransformOutput:
    """Analyze + transform with the real preprocessing_fn; returns the written transform output."""
    schema = read_schema(cfg.schema_path)
    source = tfxio.TFExampleRecord(file_pattern=str(examples_dir / "*.gz"), schema=schema)
    import apache_beam as beam

    with beam.Pipeline() as pipeline, tft_beam.Context(temp_dir=str(out_dir / "tmp")):
        raw = pipeline | source.BeamSource()
        transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(lambda x: transform(x, cfg))
        _ = transform_fn | tft_beam.WriteTransformFn(str(out_dir / "transform_graph"))
    # TFX's Transform also records the raw schema beside the graph; serving specs are read from it.
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io

    raw_metadata_dir = out_dir / "transform_graph" / tft.TFTransformOutput.RAW_METADATA_DIR
    metadata_io.write_metadata(dataset_metadata.DatasetMetadata(schema), str(raw_metadata_dir))
    return tft.TFTransformOutput(str(out_dir / "transform_graph"))


def transform_examples(tft_output: tft.TFTransformOutput, examples_path: Path) -> dict[str, np.ndarray]:
    """Transformed features of every raw example, through the saved transform graph."""
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(str(examples_path), compression_type="GZIP")]
    parsed = tf.io.parse_example(tf.constant(serialized), tft_output.raw_feature_spec())
    out = tft_output.transform_features_layer()(parsed)
    return {k: v.numpy() for k, v in out.items()}


def tiny_train_job(tmp_path: Path, tiny_taxi, repeat_train: int = 1, **hparams) -> TrainJob:
    """A training job over the tiny_taxi fixture's arrays (3/4 train, 1/4 eval) under ``tmp_path``;
    ``repeat_train`` tiles the train rows, for epochs long enough to interrupt."""
    arrays = tiny_taxi.arrays
    half = len(arrays) * 3 // 4
    train = [np.concatenate([a[:half]] * repeat_train) for a in (arrays.dense, arrays.categorical, arrays.label)]
    ArraySplit(*train).save(tmp_path / "data" / "train")
    ArraySplit(arrays.dense[half:], arrays.categorical[half:], arrays.label[half:]).save(tmp_path / "data" / "eval")
    hp = TrainerHParams(**{"epochs": 3, "batch_size": 64, "num_workers": 2, "device": "cpu", **hparams})
    return TrainJob(
        data_dir=str(tmp_path / "data"),
        model_dir=str(tmp_path / "model"),
        run_dir=str(tmp_path / "run"),
        layout=tiny_taxi.layout,
        hparams=hp,
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        mlflow_experiment="test-ddp",
        mlflow_run_name="ddp-test",
        mlflow_tags={"pipeline_run_id": "test"},
    )


TEXT_VOCAB, TEXT_MAX_LENGTH, TEXT_SIGNAL = 40, 12, 7


def signal_texts(rows: int, seed: int) -> ArraySplit:
    """Texts of 0 to TEXT_MAX_LENGTH tokens; the label is whether token TEXT_SIGNAL occurs."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, TEXT_MAX_LENGTH + 1, rows)
    ids = rng.integers(2, TEXT_VOCAB, (rows, TEXT_MAX_LENGTH))
    ids[np.arange(TEXT_MAX_LENGTH)[None, :] >= lengths[:, None]] = 0
    label = (ids == TEXT_SIGNAL).any(axis=1).astype(np.float32)
    categorical = rng.integers(0, 3, (rows, 1))
    return ArraySplit(np.zeros((rows, 0), np.float32), categorical, label, (ids,), ("text_xf",))


def text_train_job(work: Path, factory: str, **hparams) -> TrainJob:
    """A training job of the zoo's small ``factory`` (text_transformer, text_moe) on :func:`signal_texts` under
    ``work``: 1,024 train and 256 eval rows."""
    signal_texts(1024, 0).save(work / "data" / "train")
    signal_texts(256, 1).save(work / "data" / "eval")
    layout = FeatureLayout(
        dense=(),
        embedded=("source_xf",),
        cardinalities=(3,),
        label="positive_xf",
        sequences=("text_xf",),
        sequence_vocab_sizes=(TEXT_VOCAB,),
        sequence_max_lengths=(TEXT_MAX_LENGTH,),
    )
    model = ModelConfig(factory=factory, hparams={"d_model": 16, "n_heads": 2, "d_ffn": 32, "n_layers": 1})
    hp = TrainerHParams(**{"batch_size": 64, "num_workers": 2, "device": "cpu", "model": model, **hparams})
    return TrainJob(
        data_dir=str(work / "data"),
        model_dir=str(work / "model"),
        run_dir=str(work / "run"),
        layout=layout,
        hparams=hp,
        mlflow_tracking_uri=f"sqlite:///{work / 'mlflow.db'}",
        mlflow_experiment=f"test-ddp-{factory}",
        mlflow_run_name="ddp-text",
        mlflow_tags={},
    )


# Values that are credentials: user:password@ in a URI, a bearer token, an AWS access key id, a private key,
# or key=value / "key": value pairs whose key names a secret and whose value is literal.
_CREDENTIAL_VALUE = re.compile(
    r"://[^/\s@:]+:[^/\s@]+@|Bearer\s+\S{8,}|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|(password|passwd|secret[_-]?access[_-]?key|api[_-]?key|client[_-]?secret)[\"']?\s*[=:]\s*[\"']?[^\s\"',}]+",
    re.IGNORECASE,
)


def find_credentials(text: str) -> list[str]:
    """Credential-looking snippets in ``text`` (a compiled spec, a log); references to secrets by name are fine."""
    return [match.group(0) for match in _CREDENTIAL_VALUE.finditer(text)]


def metadata(root: Path) -> RunSummary | None:
    """The latest run recorded in ``<root>/metadata.sqlite``."""
    from tfx.orchestration import metadata as tfx_metadata

    return latest_run(tfx_metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``: equal digests mean a byte-identical tree."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def write_sample(rows: list[dict[str, str]], directory: Path, fieldnames: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "data.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return directory


def diverging_model_source(finite_steps: int) -> str:
    """A model file's source: finite for ``finite_steps`` training steps of its process, then the sqrt of a
    negative number, NaN in forward, as research code produces. The factory is ``build``."""
    return f"""
import torch
from torch import nn


class Diverging(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.lin = nn.Linear(len(spec.dense_features), 1)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, dense, categorical):
        if self.training:
            self.calls += 1
        shift = -1.0 if self.calls > {finite_steps} else 1.0
        return torch.sqrt(self.lin(dense).squeeze(1) ** 2 + shift) + 0 * categorical[:, 0]


def build(spec):
    return Diverging(spec)
"""


def is_ddp_worker(proc: psutil.Process) -> bool:
    """A DDP worker the local agent forked (it names each one; its command line is the agent's)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return proc.name().startswith(WORKER_PROCESS_NAME)
    return False


@dataclasses.dataclass
class TinyTaxi:
    cfg: object
    examples_dir: Path
    examples_path: Path
    tft_output: object
    layout: FeatureLayout
    arrays: ArraySplit


def tiny_dataset(root: Path, cfg, csv_path: Path, rows: int = 800) -> TinyTaxi:
    """``rows`` rows of the CSV as raw examples under ``root``, a real TFT graph over them, and their model arrays
    (rows whose label is refused left out, as the Trainer's materialize step does)."""
    schema = read_schema(cfg.schema_path)
    examples_path = write_examples(csv_rows(csv_path, rows), schema, root / "Split-eval")
    tft_output = run_transform(cfg, examples_path.parent, root)
    layout = layout_from_transform(cfg, tft_output)
    xf = transform_examples(tft_output, examples_path)
    keep = xf[layout.label_weight].reshape(-1) > 0 if layout.label_weight else slice(None)
    arrays = ArraySplit(
        dense=np.stack([xf[k].reshape(-1) for k in layout.dense], axis=1).astype(np.float32)[keep],
        categorical=np.stack([xf[k].reshape(-1) for k in layout.embedded], axis=1).astype(np.int64)[keep],
        label=xf[layout.label].reshape(-1).astype(np.float32)[keep],
    )
    return TinyTaxi(cfg, examples_path.parent, examples_path, tft_output, layout, arrays)
