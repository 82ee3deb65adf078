"""Parity gate: the SavedModel must give the PyTorch model's outputs on the whole eval split.

Both sides see the same raw tf.Examples: the SavedModel through ``serving_default`` (parse ->
transform -> converted network), PyTorch on the same rows through ``transform_features``, so
the comparison covers the full serving path and not just the network. Classification compares every
probability (all K of a multiclass row) absolutely; regression compares predictions relative to their
scale, max(|y|, mean |y| over the split), since a target in its own units can be in the thousands.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf
import torch

from torchtfx.components.torch_trainer.export.convert import EXAMPLES_INPUT, SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from torchtfx.components.torch_trainer.features import FeatureLayout, prediction_output
from torchtfx.components.torch_trainer.materialize import example_batches
from torchtfx.components.torch_trainer.modeling.heads import ExportHead
from torchtfx.components.torch_trainer.modeling.spec import REGRESSION

logger = logging.getLogger(__name__)

_BATCH = 4096


class ParityError(RuntimeError):
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


def _torch_outputs(net: ExportHead, transformed: dict, layout: FeatureLayout) -> np.ndarray:
    dense = np.stack([transformed[k].numpy().reshape(-1) for k in layout.dense], axis=1).astype(np.float32)
    categorical = np.stack([transformed[k].numpy().reshape(-1) for k in layout.embedded], axis=1).astype(np.int64)
    with torch.no_grad():
        return net(torch.from_numpy(dense), torch.from_numpy(categorical)).numpy()


def relative_to_scale(abs_diff: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|Δ| / max(|y|, mean |y|): relative error where the floor keeps near-zero targets from dominating.
    The regression parity gate and the FP16 drift gate both judge predictions by it."""
    scale = np.abs(reference)
    return abs_diff / np.maximum(scale, max(float(scale.mean()), 1e-12))


def measure_parity(
    saved_model_dir: str, raw_split_uri: str, model: torch.nn.Module, layout: FeatureLayout, tolerance: float
) -> ParityReport:
    """Max |y_savedmodel - y_torch| over every raw example of the split (relative for regression)."""
    loaded = tf.saved_model.load(saved_model_dir)
    serve, transform = loaded.signatures[SERVING_SIGNATURE], loaded.signatures[TRANSFORM_SIGNATURE]
    net = ExportHead.for_layout(model, layout).eval()
    output = prediction_output(layout.task)
    diffs, references = [], []
    for batch in example_batches(raw_split_uri, _BATCH):
        y_tf = serve(**{EXAMPLES_INPUT: batch})[output].numpy().reshape(-1).astype(np.float64)
        y_torch = _torch_outputs(net, transform(**{EXAMPLES_INPUT: batch}), layout).reshape(-1).astype(np.float64)
        diffs.append(np.abs(y_tf - y_torch))
        references.append(np.abs(y_torch))
    if not diffs:
        raise ParityError(f"no raw examples in {raw_split_uri} to measure parity on")
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
