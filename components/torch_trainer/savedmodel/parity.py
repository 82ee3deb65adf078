"""Parity gate: the SavedModel must give the PyTorch model's outputs on the whole eval split.

Both sides see the same raw tf.Examples: the SavedModel through ``serving_default`` (parse ->
transform -> converted network), PyTorch on the same rows through ``transform_features``, so
the comparison covers the full serving path and not just the network. With text features the rows go in groups
of equal token counts, so every row is served at its own length, without padding: the gate covers every length
the split has, as requests of single texts would. Classification compares every
probability (all K of a multiclass row) absolutely; regression compares predictions relative to their
scale, max(|y|, mean |y| over the split), since a target in its own units can be in the thousands.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf
import torch

from torchtfx.components.shared.batching import rows_per_call
from torchtfx.components.shared.served_interface import (
    EXAMPLES_INPUT,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
    prediction_output,
)
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.handoff.materialize import example_batches
from torchtfx.components.torch_trainer.handoff.shards import trim_padding
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import PADDING_ID, REGRESSION
from torchtfx.components.torch_trainer.savedmodel.tokenizer_check import PretrainedTokenizers

logger = logging.getLogger(__name__)

_BATCH = 4096


class ParityError(StageFailure):
    """The converted model's outputs differ from PyTorch's by more than the tolerance."""


@dataclasses.dataclass(frozen=True)
class ParityReport:
    max_abs_diff: float
    mean_abs_diff: float
    examples: int
    tolerance: float
    max_relative_diff: float | None = None  # regression: the figure the tolerance applies to

    @property
    def gated_diff(self) -> float:
        return self.max_abs_diff if self.max_relative_diff is None else self.max_relative_diff

    @property
    def passed(self) -> bool:
        return self.gated_diff <= self.tolerance

    def describe(self) -> str:
        relative = "" if self.max_relative_diff is None else f", relative {self.max_relative_diff:.3g}"
        return f"up to {self.max_abs_diff:.3g}{relative} (mean {self.mean_abs_diff:.3g}) over {self.examples} rows"


def torch_outputs(net: ExportHead, transformed: dict, layout: FeatureLayout) -> np.ndarray:
    rows = len(transformed[layout.label])
    dense = _stacked(transformed, layout.dense, rows, np.float32)
    categorical = _stacked(transformed, layout.embedded, rows, np.int64)
    sequences = [trim_padding(transformed[k].astype(np.int64)) for k in layout.sequences]
    with torch.no_grad():
        return net(*(torch.from_numpy(x) for x in (dense, categorical, *sequences))).numpy()


def _stacked(transformed: dict, keys: tuple[str, ...], rows: int, dtype: type) -> np.ndarray:
    if not keys:
        return np.zeros((rows, 0), dtype)
    return np.stack([transformed[k].reshape(-1) for k in keys], axis=1).astype(dtype)


def length_groups(transformed: dict, layout: FeatureLayout) -> list[np.ndarray]:
    """Row indices grouped by their token counts (all rows in one group for a tabular layout)."""
    rows = len(transformed[layout.label])
    if not layout.sequences:
        return [np.arange(rows)]
    counts = np.stack([(transformed[k] != PADDING_ID).sum(axis=1) for k in layout.sequences], axis=1)
    _, group = np.unique(counts, axis=0, return_inverse=True)
    return [np.flatnonzero(group.reshape(-1) == g) for g in range(int(group.max()) + 1)]


def relative_to_scale(abs_diff: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|Δ| / max(|y|, mean |y|): relative error where the floor keeps near-zero targets from dominating.
    The regression parity gate and the FP16 drift gate both judge predictions by it."""
    scale = np.abs(reference)
    return abs_diff / np.maximum(scale, max(float(scale.mean()), 1e-12))


def measure_parity(
    saved_model_dir: str, raw_split_uri: str, model: torch.nn.Module, layout: FeatureLayout, tolerance: float
) -> ParityReport:
    """Max |y_savedmodel - y_torch| over every raw example of the split (relative for regression); a pretrained text
    feature's ids are first checked against its checkpoint's own tokenizer (:mod:`.tokenizer_check`)."""
    loaded = tf.saved_model.load(saved_model_dir)
    serve, transform = loaded.signatures[SERVING_SIGNATURE], loaded.signatures[TRANSFORM_SIGNATURE]
    net = ExportHead.for_layout(model, layout).eval()
    output = prediction_output(layout.task)
    diffs, references = [], []
    tokenizers = PretrainedTokenizers(layout)
    for batch in example_batches(raw_split_uri, rows_per_call(sum(layout.sequence_max_lengths), _BATCH)):
        transformed = {k: v.numpy() for k, v in transform(**{EXAMPLES_INPUT: batch}).items()}
        tokenizers.compare(batch, transformed)
        for rows in length_groups(transformed, layout):
            examples = tf.gather(batch, rows)
            y_tf = serve(**{EXAMPLES_INPUT: examples})[output].numpy().reshape(-1).astype(np.float64)
            y_torch = torch_outputs(net, {k: v[rows] for k, v in transformed.items()}, layout)
            diffs.append(np.abs(y_tf - y_torch.reshape(-1).astype(np.float64)))
            references.append(np.abs(y_torch.reshape(-1)))
    if not diffs:
        raise ParityError(f"no raw examples in {raw_split_uri} to measure parity on")
    if tokenizers.texts:
        logger.info("The checkpoint's own tokenizer and the served graph agree: %s", tokenizers.describe())
    diff, reference = np.concatenate(diffs), np.concatenate(references)
    relative = None
    if layout.task == REGRESSION:
        relative = float(np.max(relative_to_scale(diff, reference)))
    examples = len(diff) // max(len(layout.classes), 1)
    return ParityReport(float(diff.max()), float(diff.mean()), examples, tolerance, relative)


def enforce(report: ParityReport) -> None:
    logger.info("Parity: |SavedModel - PyTorch| %s, tolerance %.1g", report.describe(), report.tolerance)
    if not report.passed:
        raise ParityError(
            f"parity gate failed: the converted SavedModel differs from PyTorch by {report.describe()} of the "
            f"eval split, above the tolerance {report.tolerance:.1g}; the model was not handed to the Evaluator. "
            "Check the conversion strategy and repairs in the Trainer's log (and ops whose TF kernels differ "
            "numerically, e.g. approximations) before retrying."
        )
