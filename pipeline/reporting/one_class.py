"""AUCs that TFMA reports as a number where none is defined: a slice that holds one class.

Measured with TFMA 0.47 on the binary and multiclass metric specs (pipeline/evaluation/config.py), slice by slice:

- binary, a slice of negatives only: ``auc`` 0.0, ``auc_precision_recall`` 0.0, ``recall`` and ``calibration``
  NaN; of positives only: ``auc`` 0.0, ``auc_precision_recall`` 1.0. The report showed "AUC 0.0000" for both.
  Each slice's calibration histogram (TFMA's plots) holds its weighted example and label sums, so the classes a
  slice holds are read from there; without plots, a NaN recall (no positive row) says it.
- multiclass, a slice holding one class: ``auc[class_id=k]`` 0.0 for every class and ``auc(macro)`` 0.0;
  ``recall[class_id=k]`` is NaN for each class with no row in the slice. Class k's one-vs-rest AUC is undefined
  where class k has no row or every row is class k; the macro average includes each class's, so it is undefined
  where one of them is. The micro average pools every class's rows and stays defined.
"""

from __future__ import annotations

import re

from torchtfx.components.shared import evaluation_results
from torchtfx.components.shared.evaluation_results import BASELINE_MODEL_NAME, MetricValues

UNDEFINED = "undefined (one class)"
_PER_CLASS = re.compile(r"^(?P<name>[a-z_]+)\[class_id=(?P<k>\d+)\]$")


def _binary_classes(evaluation_uri: str) -> dict[str, tuple[float, float]]:
    """slice -> (weighted positives, weighted negatives), from the candidate's calibration histograms."""
    import tensorflow_model_analysis as tfma

    counts: dict[str, tuple[float, float]] = {}
    for per_slice in tfma.load_plots(evaluation_uri):  # none for multiclass and regression
        for kv in per_slice.plot_keys_and_values:
            buckets = kv.value.calibration_histogram_buckets.buckets
            if kv.key.model_name == BASELINE_MODEL_NAME or not buckets:
                continue
            weight = sum(b.num_weighted_examples.value for b in buckets)
            positives = sum(b.total_weighted_label.value for b in buckets)
            counts[evaluation_results.slice_name(per_slice.slice_key)] = (positives, weight - positives)
    return counts


def _recalls(values: MetricValues) -> dict[str, dict[int | None, float]]:
    """slice -> {class id (None: binary): the candidate's recall}."""
    found: dict[str, dict[int | None, float]] = {}
    for (slice_, metric, model, is_diff), value in values.items():
        if is_diff or model == BASELINE_MODEL_NAME:
            continue
        per_class = _PER_CLASS.match(metric)
        if metric == "recall":
            found.setdefault(slice_, {})[None] = value
        elif per_class and per_class["name"] == "recall":
            found.setdefault(slice_, {})[int(per_class["k"])] = value
    return found


def _multiclass_undefined(slice_: str, recalls: dict[int | None, float]) -> set[tuple[str, str]]:
    present = [k for k, recall in recalls.items() if recall == recall]  # NaN: class k has no row here
    absent = [k for k in recalls if k not in present]
    undefined = set(absent) | (set(present) if len(present) == 1 else set())
    found = {(slice_, f"auc[class_id={k}]") for k in undefined}
    return found | ({(slice_, "auc(macro)")} if undefined else set())


def _binary_undefined(slice_: str, positives: float, negatives: float) -> set[tuple[str, str]]:
    if positives <= 0:
        return {(slice_, "auc"), (slice_, "auc_precision_recall")}
    return {(slice_, "auc")} if negatives <= 0 else set()


def undefined_aucs(evaluation_uri: str, values: MetricValues) -> set[tuple[str, str]]:
    """(slice, metric label) of every AUC the slice's classes leave undefined (TFMA reports 0.0 for them)."""
    undefined: set[tuple[str, str]] = set()
    counts, recalls = _binary_classes(evaluation_uri), _recalls(values)
    for slice_ in {key[0] for key in values}:
        found = recalls.get(slice_, {})
        if slice_ in counts:
            undefined |= _binary_undefined(slice_, *counts[slice_])
        elif None in found:  # no histogram: a NaN recall says the slice has no positive row
            undefined |= _binary_undefined(slice_, 0.0 if found[None] != found[None] else 1.0, 1.0)
        elif found:
            undefined |= _multiclass_undefined(slice_, found)
    return undefined
