"""A multiclass label's ``num_classes`` against the label column's distinct values in the train split, read from
StatisticsGen's output before Transform: Transform's vocabulary of the label holds at most the values it sees, and
a ``num_classes`` above that count stopped the run only after Transform, in the Trainer, as an unexpected error.

The count is TFDV's: a string column's ``unique`` (exact; the empty string, which the label rule treats as missing,
is left out where TFDV lists it among the top values); an integer column (no ``unique`` without a schema that marks
it categorical) is bounded by ``max - min + 1``. Only a ``num_classes`` above what the statistics prove is refused;
a float column or an integer range wide enough is left to the Trainer's check on Transform's vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from tensorflow_metadata.proto.v0 import statistics_pb2

from torchtfx.components.stage_failure import StageFailure

LABEL_SPLIT = "train"  # the split Transform analyzes, whose values become the label's classes


class LabelClassesError(StageFailure):
    """``label.num_classes`` asks for more classes than the label column has values; Transform was not run."""


@dataclass(frozen=True)
class LabelClasses:
    """What the gate checks: the label column, the classes the dataset config asks for, and where that is set."""

    column: str
    num_classes: int
    config: str  # the dataset config, as the message names it

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LabelClasses:
        return cls(**json.loads(text))


def _feature(statistics: statistics_pb2.DatasetFeatureStatisticsList, column: str):
    for dataset in statistics.datasets:
        for feature in dataset.features:
            if feature.path.step == [column] or feature.name == column:
                return feature
    return None


def distinct_at_most(feature: statistics_pb2.FeatureNameStatistics) -> tuple[int, tuple[str, ...]] | None:
    """(the most distinct label values the column can hold, the values TFDV names), or None where the statistics
    give no bound (a float column, an empty one)."""
    if feature.HasField("string_stats"):
        stats = feature.string_stats
        values = tuple(v.value for v in stats.top_values)
        # a missing label, not a class (pipeline/transform/preprocessing.py:label_strings)
        empty = 1 if "" in values else 0
        return stats.unique - empty, tuple(v for v in values if v)
    if feature.type == statistics_pb2.FeatureNameStatistics.INT and feature.HasField("num_stats"):
        stats = feature.num_stats
        if stats.common_stats.num_non_missing == 0:
            return 0, ()
        low, high = int(stats.min), int(stats.max)
        return high - low + 1, ((str(low), str(high)) if high > low else (str(low),))
    return None


def problem(statistics: statistics_pb2.DatasetFeatureStatisticsList, label: LabelClasses) -> str | None:
    """The error line when ``label.num_classes`` exceeds the distinct values the train split can hold, else None."""
    feature = _feature(statistics, label.column)
    bound = None if feature is None else distinct_at_most(feature)
    if bound is None:
        return None
    most, values = bound
    if label.num_classes <= most:
        return None
    is_range = feature.HasField("num_stats") and not feature.HasField("string_stats")
    if is_range:
        seen = f"integer values only from {values[0]} to {values[-1]}, so at most {most} distinct" if values else "none"
    else:
        named = ", ".join(repr(v) for v in values[:10]) + (", ..." if len(values) > 10 else "")
        seen = f"{most} distinct value{'s' if most != 1 else ''}" + (f" ({named})" if named else "")
    fix = (
        f"set label.num_classes to at most {most}"
        if most >= 2
        else "a multiclass label needs 2 classes: check label.column"
    )
    return (
        f"label.num_classes is {label.num_classes} in {label.config}, but the label column {label.column!r} has "
        f"{seen} in the {LABEL_SPLIT} split (StatisticsGen); the classes are the column's most frequent values, so "
        f"there cannot be {label.num_classes}. Fix: {fix}, or give the pipeline data with every class. Transform "
        "and training were not started; nothing was pushed."
    )


def check(statistics: statistics_pb2.DatasetFeatureStatisticsList, label: LabelClasses) -> None:
    """Raise :class:`LabelClassesError` when ``label.num_classes`` cannot be met by the train split."""
    found = problem(statistics, label)
    if found:
        raise LabelClassesError(found)
