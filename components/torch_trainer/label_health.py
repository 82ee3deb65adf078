"""Label health, checked on the materialized label arrays before any training.

A label that cannot be learned or evaluated used to train every epoch at ``eval_auc=nan`` and then fail far
from its cause (ML Metadata refused the NaN property with an SQL error). Typical cause: a broken upstream join
or filter that sets every label to one value. The check names the split, the counts and the fix.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
from torchtfx.components.torch_trainer.handoff.shards import LABEL_FILE
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION

logger = logging.getLogger(__name__)

# Below this many eval examples of a class, its metrics (AUC, per-class recall) are computed but noisy: a warning.
NOISY_CLASS_EXAMPLES = 10
# Below this share of the train split, a multiclass class gets a hint to set ``class_weights: balanced``. Under the
# unweighted cross-entropy a class with 5% of the rows carries a twentieth of the loss, and a model that never
# predicts it loses at most that; ``balanced`` (n / (K n_k)) gives every class the same total weight. 5% is the
# share at which the usual imbalance guidance (e.g. scikit-learn's class_weight="balanced" examples) starts to
# call a class rare; the hint costs nothing where it does not apply.
RARE_CLASS_SHARE = 0.05


class LabelHealthError(TrainingFailedError):
    """The label of a split cannot be trained on or evaluated (one class, a missing class, a constant target)."""


def class_counts(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Examples per class id; a binary label is 1 where it is above 0.5."""
    ids = (labels > 0.5) if num_classes == 2 else labels
    return np.bincount(np.asarray(ids, np.int64).reshape(-1), minlength=num_classes)[:num_classes]


def _class_names(layout: FeatureLayout, label_name: str) -> tuple[str, ...]:
    if layout.task == MULTICLASS:
        return tuple(f"{i} ({name})" for i, name in enumerate(layout.classes))
    return (f"0 (not {label_name})", f"1 ({label_name})")


def _classes_problem(split: str, counts: np.ndarray, names: tuple[str, ...]) -> str | None:
    empty = [name for name, count in zip(names, counts, strict=True) if count == 0]
    if not empty:
        return None
    listed = ", ".join(f"class {name}: {int(count)}" for name, count in zip(names, counts, strict=True))
    present = int((counts > 0).sum())
    what = "one class" if present == 1 else f"no examples of class {', '.join(empty)}"
    return f"split '{split}' has {what} ({int(counts.sum())} examples: {listed})"


def rare_class_hint(counts: np.ndarray, names: tuple[str, ...], label_name: str) -> str | None:
    """The hint for a train split with classes under ``RARE_CLASS_SHARE`` of its rows (None where none is)."""
    total = int(counts.sum())
    rare = [(n, int(c)) for n, c in zip(names, counts, strict=True) if total and 0 < c < RARE_CLASS_SHARE * total]
    if not rare:
        return None
    listed = ", ".join(f"class {n}: {c} of {total} ({c / total:.1%})" for n, c in rare)
    return (
        f"Label '{label_name}': rare in the train split: {listed}. The unweighted loss barely rewards predicting "
        "them; set `class_weights: balanced` (--class-weights balanced, or "
        "trainer.hyperparameters.class_weights in pools.yaml) to weigh each class by n / (K n_k)."
    )


def _regression_problem(split: str, target: np.ndarray) -> str | None:
    if len(target) >= 2 and float(np.ptp(target)) > 0:
        return None
    value = f"every one is {float(target[0]):g}" if len(target) else "none"
    return f"split '{split}' has a constant target ({len(target)} examples, {value})"


def _rule(dataset: DatasetConfig) -> str:
    rule = dataset.label
    if dataset.task == MULTICLASS:
        return f"the {rule.num_classes} most frequent values of column '{rule.column}' in the train split"
    if dataset.task == BINARY:
        if rule.op == "in":
            return f"column '{rule.column}' in {list(rule.positive_values)}"
        scale = f" x {rule.relative_to}" if rule.relative_to else ""
        return f"column '{rule.column}' {rule.op} {rule.threshold:g}{scale}"
    return f"column '{rule.column}'" + (" (trained on log1p)" if rule.log1p else "")


def _why(task: str) -> str:
    if task == BINARY:
        return "A binary model needs both classes in every split: it learns nothing from one, and AUC is undefined"
    if task == MULTICLASS:
        return "Every class must be in every split: a missing class is not learned, its AUC and recall are undefined"
    return "A constant target teaches nothing, and the squared-correlation gate is undefined on it"


def check_label_health(
    labels: dict[str, np.ndarray], layout: FeatureLayout, dataset: DatasetConfig, class_weights: str = "none"
) -> None:
    """Raise :class:`LabelHealthError` naming every unhealthy split with its counts and the fix; warn about
    eval classes with fewer than ``NOISY_CLASS_EXAMPLES`` examples, and about rare train classes of a multiclass
    label trained without ``class_weights`` (:func:`rare_class_hint`)."""
    name = dataset.label.name
    problems = []
    for split, values in labels.items():
        if layout.task == REGRESSION:
            problems.append(_regression_problem(split, np.asarray(values, np.float64)))
            continue
        names = _class_names(layout, name)
        counts = class_counts(values, len(names))
        problems.append(_classes_problem(split, counts, names))
        few = [f"{n}: {int(c)}" for n, c in zip(names, counts, strict=True) if 0 < c < NOISY_CLASS_EXAMPLES]
        if split == "eval" and few:
            logger.warning("Label '%s': few eval examples of class %s; its metrics will be noisy", name, ", ".join(few))
        hint = rare_class_hint(counts, names, name) if layout.task == MULTICLASS and split == "train" else None
        if hint and class_weights == "none":
            logger.warning("%s", hint)
    problems = [p for p in problems if p]
    if problems:
        raise LabelHealthError(
            f"Label '{name}' of dataset '{dataset.name}' cannot be trained on or evaluated: {'; '.join(problems)}. "
            f"{_why(layout.task)}. The label is {_rule(dataset)} (the label: section of the dataset config). "
            f"Fix: check the data that fills column '{dataset.label.column}' (a broken upstream join or filter can "
            "set every label to one value), or change the label rule; then rerun."
        )


def check_materialized_labels(
    data_dir: Path, splits: list[str], layout: FeatureLayout, dataset: DatasetConfig, class_weights: str = "none"
) -> None:
    """:func:`check_label_health` on the label arrays materialized under ``data_dir/<split>/``."""
    labels = {split: np.load(data_dir / split / LABEL_FILE, mmap_mode="r") for split in splits}
    check_label_health(labels, layout, dataset, class_weights)
