"""Parity gate: the SavedModel must give the PyTorch model's probabilities on the whole eval split.

Both sides see the same raw tf.Examples: the SavedModel through ``serving_default`` (parse ->
transform -> converted network), PyTorch on the same rows through ``transform_features``, so
the comparison covers the full serving path and not just the network.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import tensorflow as tf
import torch

from torchtfx.components.torch_trainer.export.convert import EXAMPLES_INPUT, SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from torchtfx.components.torch_trainer.features import PROBABILITIES_OUTPUT, FeatureLayout
from torchtfx.components.torch_trainer.materialize import split_files
from torchtfx.components.torch_trainer.modeling.heads import ExportHead

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

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance


def _torch_probabilities(net: ExportHead, transformed: dict, layout: FeatureLayout) -> np.ndarray:
    dense = np.stack([transformed[k].numpy().reshape(-1) for k in layout.dense], axis=1).astype(np.float32)
    categorical = np.stack([transformed[k].numpy().reshape(-1) for k in layout.embedded], axis=1).astype(np.int64)
    with torch.no_grad():
        return net(torch.from_numpy(dense), torch.from_numpy(categorical)).numpy()


def measure_parity(
    saved_model_dir: str, raw_split_uri: str, model: torch.nn.Module, layout: FeatureLayout, tolerance: float
) -> ParityReport:
    """Max |p_savedmodel - p_torch| over every raw example of the split."""
    loaded = tf.saved_model.load(saved_model_dir)
    serve, transform = loaded.signatures[SERVING_SIGNATURE], loaded.signatures[TRANSFORM_SIGNATURE]
    net = ExportHead(model, layout.model_spec().task).eval()
    max_diff, sum_diff, count = 0.0, 0.0, 0
    dataset = tf.data.TFRecordDataset(split_files(raw_split_uri), compression_type="GZIP").batch(_BATCH)
    for batch in dataset:
        p_tf = serve(**{EXAMPLES_INPUT: batch})[PROBABILITIES_OUTPUT].numpy().reshape(-1)
        p_torch = _torch_probabilities(net, transform(**{EXAMPLES_INPUT: batch}), layout)
        diff = np.abs(p_tf.astype(np.float64) - p_torch.astype(np.float64))
        max_diff, sum_diff, count = max(max_diff, float(diff.max())), sum_diff + float(diff.sum()), count + len(diff)
    if count == 0:
        raise ParityError(f"no raw examples in {raw_split_uri} to measure parity on")
    return ParityReport(max_diff, sum_diff / count, count, tolerance)


def enforce(report: ParityReport) -> None:
    logger.info(
        "Parity over %s eval examples: max |SavedModel - PyTorch| = %.3g (mean %.3g, tolerance %.1g)",
        report.examples, report.max_abs_diff, report.mean_abs_diff, report.tolerance,
    )  # fmt: skip
    if not report.passed:
        raise ParityError(
            f"parity gate failed: the converted SavedModel differs from PyTorch by up to "
            f"{report.max_abs_diff:.3g} (mean {report.mean_abs_diff:.3g}) over {report.examples} eval examples, "
            f"above the tolerance {report.tolerance:.1g}; the model was not handed to the Evaluator. "
            "Check the conversion strategy and repairs in the Trainer's log (and ops whose TF kernels differ "
            "numerically, e.g. approximations) before retrying."
        )
