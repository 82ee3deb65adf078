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


@dataclasses.dataclass(frozen=True)
class ScoredRows:
    """Consecutive records of one input file and what ``serving_default`` returned for them."""

    path: str  # the input file, as given
    lines: list[int]  # the line each record starts on
    key_cells: list[tuple[str, ...]]  # each record's --key-column cells (empty tuples without key columns)
    outputs: Mapping[str, np.ndarray]  # the signature's outputs, by name, one row per record


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

    def cells(self, rows: ScoredRows) -> list[list[object]]:
        """The written columns of ``rows``, in :attr:`columns` order: str, int and float32 values."""
        count = len(rows.lines)
        keys = (
            [[cells[i] for cells in rows.key_cells] for i in range(len(self.keys))]
            if self.keys
            else [[rows.path] * count, list(rows.lines)]
        )
        scores = np.asarray(rows.outputs[self.output], np.float32)
        if not self.classes:
            return [*keys, list(scores.reshape(count))]
        best = [self.classes[i] for i in np.argmax(scores, axis=1)]
        return [*keys, best, *(list(scores[:, i]) for i in range(len(self.classes)))]

    def csv_text(self, rows: ScoredRows) -> str:
        """``rows`` as CSV lines, quoted where a cell needs it, floats as the shortest decimal that reads back as
        the same float32; no line end after the last (the text sink adds it)."""
        columns = [
            [_float32_text(v) for v in column] if kind == FLOAT32 else column
            for column, (_name, kind) in zip(self.cells(rows), self.columns, strict=True)
        ]
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(zip(*columns, strict=True))
        return buffer.getvalue()[:-1]

    def table(self, rows: ScoredRows):
        """``rows`` as an Arrow table of :meth:`arrow_schema` (Parquet)."""
        import pyarrow as pa

        schema = self.arrow_schema()
        arrays = [pa.array(column, type=field.type) for column, field in zip(self.cells(rows), schema, strict=True)]
        return pa.Table.from_arrays(arrays, schema=schema)

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


def _float32_text(value: np.float32) -> str:
    """The shortest decimal that reads back as the same float32 (``0.7319``, not ``0.7318999767303467``)."""
    return str(value)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
