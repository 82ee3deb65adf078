"""ONNX export of the trained network (legacy TorchScript exporter) and its onnxruntime check."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from components.torch_trainer.features import CATEGORICAL_INPUT, DENSE_INPUT, PROBABILITIES_OUTPUT
from components.torch_trainer.model import ProbabilityModel, TabularModel
from components.torch_trainer.shards import ArraySplit

logger = logging.getLogger(__name__)

ONNX_OPSET = 17


def export_onnx(model: TabularModel, sample: ArraySplit, path: Path) -> None:
    """Export probabilities(dense, categorical) with a dynamic batch axis.

    ``dynamo=False``: the dynamo exporter needs onnxscript, whose ml_dtypes conflicts with TF 2.16.
    """
    wrapped = ProbabilityModel(model).eval().cpu()
    dense = torch.from_numpy(np.array(sample.dense[:8]))
    categorical = torch.from_numpy(np.array(sample.categorical[:8]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            wrapped,
            (dense, categorical),
            str(path),
            input_names=[DENSE_INPUT, CATEGORICAL_INPUT],
            output_names=[PROBABILITIES_OUTPUT],
            dynamic_axes={
                DENSE_INPUT: {0: "batch"},
                CATEGORICAL_INPUT: {0: "batch"},
                PROBABILITIES_OUTPUT: {0: "batch"},
            },
            opset_version=ONNX_OPSET,
            dynamo=False,
        )


def torch_probabilities(model: TabularModel, split: ArraySplit, batch_size: int = 65536) -> np.ndarray:
    wrapped = ProbabilityModel(model).eval().cpu()
    out = []
    with torch.no_grad():
        for start in range(0, len(split), batch_size):
            stop = start + batch_size
            dense = torch.from_numpy(np.array(split.dense[start:stop]))
            categorical = torch.from_numpy(np.array(split.categorical[start:stop]))
            out.append(wrapped(dense, categorical).numpy())
    return np.concatenate(out)


def onnxruntime_probabilities(path: Path, split: ArraySplit) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (output,) = session.run(
        None,
        {DENSE_INPUT: np.asarray(split.dense, np.float32), CATEGORICAL_INPUT: np.asarray(split.categorical, np.int64)},
    )
    return output.reshape(-1)


def check_onnx(model: TabularModel, path: Path, split: ArraySplit) -> float:
    """Max |p_torch - p_onnxruntime| over ``split``."""
    diff = float(np.max(np.abs(torch_probabilities(model, split) - onnxruntime_probabilities(path, split))))
    logger.info("ONNX export %s: max |torch - onnxruntime| = %.3g over %s rows", path, diff, len(split))
    return diff
