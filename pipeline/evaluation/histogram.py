"""TFMA's calibration histogram, filled without TFMA's general per-example conversion where the example is one
scalar label and one scalar prediction (every binary task's example).

TFMA adds each (slice, example) pair to each histogram in Python, and each call first converts the example with
``metric_util.to_label_prediction_example_weight``, a generator written for every task kind (dict lookups, top-k,
class ids, label vocabularies, flattening, fractional labels): 35.6 us a call, measured on 20,000 binary
examples, where the bucket update itself is about 2 us. Our binary metrics fill two histograms (AUC, AUC-PR,
calibration, accuracy, precision and recall share the 10,000-bucket one; the calibration plot has 100 buckets) on
3 slices: six calls per example.

``ScalarHistogramCombiner`` is TFMA's combiner (its buckets and output unchanged) with one shortcut in
``add_input``: when TFMA's conversion would yield exactly one (label, prediction, weight) for the example and the
label is 0 or 1, it updates the bucket from those three numbers, in TFMA's arithmetic, so the histogram is equal
bit for bit. Anything else (a fractional or out-of-range label, a dict TFMA would search, sub-keys, class
weights, strings) goes through TFMA's own ``add_input``, with its own errors.

Its accumulators also travel packed (``compact``: bucket ids and sums as two numpy arrays, ``PackedHistogram``)
and merge as arrays. TFMA's accumulator is a dict of one ``Bucket`` object per bucket: 10,000 buckets for each
slice, and at 5M taxi rows (35 slices) Beam's local runner decoded every worker's accumulators into such objects
in the pipeline process to group them: that process grew by 370 MiB at the end of the evaluation, and this was
the 5M run's peak (measured, 2026-12-06). The merge adds the same float64 sums in the same order as TFMA's, so
the histogram stays equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
from tensorflow_model_analysis.metrics import calibration_histogram, metric_types

_NUMERIC_KINDS = frozenset("iuf")


def _scalar(value: Any) -> float | None:
    """A one-element numeric array as a float; None for anything TFMA's own conversion has to handle."""
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in _NUMERIC_KINDS:
        return float(value.reshape(-1)[0])
    return None


def _select(value: Any, *keys: str) -> Any:
    """TFMA's ``optionally_get_by_keys`` for one level of plain keys: a dict holding the key gives its value."""
    for key in keys:
        if key and isinstance(value, Mapping) and key in value:
            value = value[key]
    return value


class PackedHistogram(NamedTuple):
    """A calibration histogram's accumulator as arrays: the ids of the buckets TFMA would hold, ascending, and
    their weighted labels, predictions and examples (float64 [n, 3])."""

    ids: np.ndarray
    sums: np.ndarray


Accumulator = dict[int, Any] | PackedHistogram


def pack(accumulator: Accumulator) -> PackedHistogram:
    if isinstance(accumulator, PackedHistogram):
        return accumulator
    buckets = sorted(accumulator.values(), key=lambda b: b.bucket_id)
    ids = np.array([b.bucket_id for b in buckets], np.int64)
    sums = np.array([(b.weighted_labels, b.weighted_predictions, b.weighted_examples) for b in buckets], np.float64)
    return PackedHistogram(ids, sums.reshape(-1, 3))


def unpack(accumulator: Accumulator) -> dict[int, Any]:
    """TFMA's own accumulator: a ``Bucket`` per id."""
    if not isinstance(accumulator, PackedHistogram):
        return accumulator
    return {
        int(i): calibration_histogram.Bucket(int(i), *map(float, row))
        for i, row in zip(accumulator.ids, accumulator.sums, strict=True)
    }


def merge_packed(accumulators: Iterable[Accumulator], size: int) -> PackedHistogram:
    """TFMA's merge (the first accumulator, then each next one's buckets added to it) on arrays of ``size``
    buckets: the same float64 additions in the same order; a bucket no accumulator holds stays out."""
    sums, held = np.zeros((size, 3), np.float64), np.zeros(size, bool)
    for accumulator in map(pack, accumulators):
        sums[accumulator.ids] += accumulator.sums
        held[accumulator.ids] = True
    ids = np.flatnonzero(held)
    return PackedHistogram(ids, sums[ids])


class ScalarHistogramCombiner(calibration_histogram._CalibrationHistogramCombiner):
    """TFMA's calibration histogram combiner, with the scalar binary example added directly (module docstring)."""

    @classmethod
    def from_tfma(cls, combiner: calibration_histogram._CalibrationHistogramCombiner) -> ScalarHistogramCombiner:
        fast = cls.__new__(cls)
        fast.__dict__.update(combiner.__dict__)
        fast._label_key = _label_key(combiner._eval_config, combiner._key.model_name)
        # Settings that rule the shortcut out for every example of this histogram.
        fast._shortcut = combiner._key.sub_key is None and not combiner._class_weights and combiner._fractional_labels
        return fast

    def _scalar_example(self, element: metric_types.StandardMetricInputs) -> tuple[float, float, float] | None:
        """(label, prediction, weight) where TFMA's conversion yields exactly these and the label is 0 or 1."""
        if not self._shortcut:
            return None
        key = self._key
        prediction = element.prediction
        for name in (key.model_name, key.output_name):  # TFMA's lookup of the prediction: required keys
            if name:
                if not isinstance(prediction, Mapping) or name not in prediction:
                    return None
                prediction = prediction[name]
        label = _scalar(_select(element.label, self._label_key, key.model_name, key.output_name))
        score = _scalar(prediction)
        if label not in (0.0, 1.0) or score is None:
            return None
        weight = 1.0
        if self._example_weighted:
            given = _select(element.example_weight, key.model_name, key.output_name)
            if given is not None:
                given_weight = _scalar(given)
                if given_weight is None:
                    return None
                weight = given_weight
        return label, score, weight

    def compact(self, accumulator: Accumulator) -> PackedHistogram:
        return pack(accumulator)

    def merge_accumulators(self, accumulators: Iterable[Accumulator]) -> PackedHistogram:
        return merge_packed(accumulators, self._num_buckets + 2)  # TFMA's buckets: num_buckets, under and over

    def extract_output(self, accumulator: Accumulator) -> dict[metric_types.PlotKey, Any]:
        return super().extract_output(unpack(accumulator))

    def add_input(self, accumulator: Accumulator, element: metric_types.StandardMetricInputs) -> dict[int, Any]:
        accumulator = unpack(accumulator)  # Beam may add to an accumulator it compacted
        example = self._scalar_example(element)
        if example is None:
            return super().add_input(accumulator, element)
        label, prediction, weight = example
        if weight == 0.0:  # TFMA's fractional-label split yields nothing for a zero weight (math.isclose(w, 0.0))
            return accumulator
        weighted_label, weighted_prediction = label * weight, prediction * weight
        bucket_index = self._bucket_index(prediction if self._prediction_based_bucketing else label)
        bucket = accumulator.get(bucket_index)
        if bucket is None:
            accumulator[bucket_index] = calibration_histogram.Bucket(
                bucket_index, weighted_label, weighted_prediction, weight
            )
        else:
            bucket.weighted_labels += weighted_label
            bucket.weighted_predictions += weighted_prediction
            bucket.weighted_examples += weight
        return accumulator


def _label_key(eval_config: Any, model_name: str) -> str:
    """The label key TFMA's conversion looks up in a dict label for this model (to_label_prediction_example_weight)."""
    specs = list(eval_config.model_specs) if eval_config else []
    for spec in specs:
        if (spec.name if len(specs) > 1 else "") == model_name:
            return spec.label_key
    return ""


def with_scalar_histograms(computations: metric_types.MetricComputations) -> metric_types.MetricComputations:
    """The same computations, TFMA's calibration histograms filled by ``ScalarHistogramCombiner``.

    TFMA computes a histogram once for all metrics whose computations name it by key and combiner class, so every
    metric that shares one must come through here (pipeline/evaluation/metrics.py), or it is filled twice.
    """
    swapped: metric_types.MetricComputations = []
    for computation in computations:
        if type(computation) is metric_types.MetricComputation and type(computation.combiner) is (
            calibration_histogram._CalibrationHistogramCombiner
        ):
            computation = metric_types.MetricComputation(
                keys=computation.keys,
                preprocessors=computation.preprocessors,
                combiner=ScalarHistogramCombiner.from_tfma(computation.combiner),
            )
        swapped.append(computation)
    return swapped
