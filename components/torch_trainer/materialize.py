"""Turn Transform's output (gzipped TFRecords of tf.Examples) into columnar arrays, once.

Parsing is vectorized: ``tf.io.parse_example`` runs in TF's C++ kernels on batches of thousands of
records, so Python never touches a single row.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import tensorflow as tf

from components.torch_trainer.features import FeatureLayout
from components.torch_trainer.shards import ArraySplit

logger = logging.getLogger(__name__)

_PARSE_BATCH = 8192


def split_files(split_uri: str) -> list[str]:
    files = sorted(tf.io.gfile.glob(f"{split_uri}/*.gz"))
    if not files:
        raise FileNotFoundError(f"no *.gz TFRecord files in {split_uri}")
    return files


def read_split(split_uri: str, layout: FeatureLayout, feature_spec: dict) -> ArraySplit:
    """Transformed examples of one split as dense/categorical/label arrays, in file order."""
    spec = {k: feature_spec[k] for k in layout.dense + layout.embedded + (layout.label,)}
    dataset = (
        tf.data.TFRecordDataset(split_files(split_uri), compression_type="GZIP")
        .batch(_PARSE_BATCH)
        .map(lambda batch: tf.io.parse_example(batch, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(2)
    )
    dense, categorical, label = [], [], []
    for parsed in dataset:
        dense.append(np.stack([parsed[k].numpy().reshape(-1) for k in layout.dense], axis=1).astype(np.float32))
        categorical.append(np.stack([parsed[k].numpy().reshape(-1) for k in layout.embedded], axis=1).astype(np.int64))
        label.append(parsed[layout.label].numpy().reshape(-1).astype(np.float32))
    if not label:
        raise ValueError(f"split {split_uri} holds no examples")
    split = ArraySplit(np.concatenate(dense), np.concatenate(categorical), np.concatenate(label))
    _check_ids(split, layout, split_uri)
    return split


def _check_ids(split: ArraySplit, layout: FeatureLayout, where: str) -> None:
    """Ids outside an embedding table would crash a worker mid-epoch; fail here, by name."""
    if not len(layout.embedded):
        return
    high = split.categorical.max(axis=0)
    low = split.categorical.min(axis=0)
    for i, name in enumerate(layout.embedded):
        if low[i] < 0 or high[i] >= layout.cardinalities[i]:
            raise ValueError(
                f"{where}: feature {name} has ids in [{low[i]}, {high[i]}] but its vocabulary has "
                f"{layout.cardinalities[i]} entries"
            )
    if not np.isfinite(split.dense).all():
        raise ValueError(f"{where}: transformed dense features hold NaN or inf")


def materialize(split_uris: dict[str, str], layout: FeatureLayout, feature_spec: dict, out_dir: Path) -> dict:
    """Write every split under ``out_dir/<split>/``; returns the row count of each split."""
    counts = {}
    for name, uri in split_uris.items():
        split = read_split(uri, layout, feature_spec)
        split.save(out_dir / name)
        counts[name] = len(split)
        logger.info("Materialized %s rows of split %s from %s", len(split), name, uri)
    return counts
