"""The columns a scored row is written with: its keys, then the task's outputs.

Keys: the ``--key-column`` columns, as the CSV spells them (an id column joins the scores back to the input);
without any, ``source_file`` and ``source_line`` (the input file, as given, and the line its record starts on;
unique per row, and the order of the input). Outputs (components/torch_trainer/modeling/features.py, the serving
signature's): binary ``probabilities`` (of the positive class), regression ``predictions``, multiclass
``predicted_class`` (the most probable) and ``probabilities_<class>`` per class, in the model's class order.

Numbers keep the model's float32 values: Parquet stores float32, CSV the shortest decimal that reads back as the
same float32 value exactly.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping

import numpy as np

from torchtfx.components.shared.served_interface import CLASSES_OUTPUT, PROBABILITIES_OUTPUT, prediction_output
from torchtfx.data.config.task import MULTICLASS
from torchtfx.pipeline.predict.errors import PredictError

SOURCE_FILE, SOURCE_LINE = "source_file", "source_line"
PREDICTED_CLASS = "predicted_class"
STRING, INT64, FLOAT32 = "string", "int64", "float32"

# What the Beam step keys each row by: (input file, line, the key columns' cells).
RowKey = tuple[str, int, tuple[str, ...]]


@dataclasses.dataclass(frozen=True)
class OutputPlan:
    """The columns (name, type) and how one scored row fills them."""

    keys: tuple[str, ...]  # --key-column names; empty: source_file, source_line
    output: str  # the signature output the task is scored by
    classes: tuple[str, ...] = ()  # multiclass: the class of each probability column

    @classmethod
    def from_probe(cls, keys: tuple[str, ...], task: str, outputs: Mapping[str, np.ndarray]) -> OutputPlan:
        """The plan for the outputs ``serving_default`` returned on a few rows (``outputs``, by name)."""
        output = prediction_output(task)
        if output not in outputs:
            raise PredictError(
                f"the model's serving_default returns {sorted(outputs)}, not the {task} task's {output!r}: was it "
                "trained on another dataset? Give the --dataset it was trained on"
            )
        classes: tuple[str, ...] = ()
        if task == MULTICLASS:
            names = np.asarray(outputs.get(CLASSES_OUTPUT, []))
            if names.ndim != 2 or names.shape != np.shape(outputs[PROBABILITIES_OUTPUT]):
                raise PredictError(f"the multiclass model returns no {CLASSES_OUTPUT!r} beside its probabilities")
            classes = tuple(_text(name) for name in names[0])
        elif np.ndim(outputs[output]) != 1:
            raise PredictError(f"the {task} model's {output!r} is not one number per row: {np.shape(outputs[output])}")
        return cls(keys, output, classes)

    @property
    def columns(self) -> list[tuple[str, str]]:
        keys = [(name, STRING) for name in self.keys] or [(SOURCE_FILE, STRING), (SOURCE_LINE, INT64)]
        if not self.classes:
            return [*keys, (self.output, FLOAT32)]
        probabilities = [(f"{self.output}_{name}", FLOAT32) for name in self.classes]
        return [*keys, (PREDICTED_CLASS, STRING), *probabilities]

    @property
    def names(self) -> list[str]:
        return [name for name, _kind in self.columns]

    def values(self, key: RowKey, outputs: Mapping[str, np.ndarray]) -> list[object]:
        """One row's cells, in :attr:`columns` order; ``outputs``: the signature's outputs for this row."""
        path, line, cells = key
        row: list[object] = list(cells) if self.keys else [path, line]
        scores = np.asarray(outputs[self.output])
        if not self.classes:
            return [*row, float(scores)]
        best = self.classes[int(np.argmax(scores))]
        return [*row, best, *(float(p) for p in scores)]

    def record(self, key: RowKey, outputs: Mapping[str, np.ndarray]) -> dict[str, object]:
        """One row as Parquet takes it."""
        return dict(zip(self.names, self.values(key, outputs), strict=True))

    def csv_line(self, key: RowKey, outputs: Mapping[str, np.ndarray]) -> str:
        """One row as a CSV line, quoted where a cell needs it (no line end: the text sink adds it)."""
        cells = [_float32_text(v) if isinstance(v, float) else v for v in self.values(key, outputs)]
        return _csv(cells)

    @property
    def csv_header(self) -> str:
        return _csv(self.names)

    def arrow_schema(self):
        import pyarrow as pa

        kinds = {STRING: pa.string(), INT64: pa.int64(), FLOAT32: pa.float32()}
        return pa.schema([(name, kinds[kind]) for name, kind in self.columns])


def _csv(cells: list[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(cells)
    return buffer.getvalue()


def _float32_text(value: float) -> str:
    """The shortest decimal that reads back as the same float32 (``0.7319``, not ``0.7318999767303467``)."""
    return str(np.float32(value))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
