"""The training loop's eval metrics per task, and the curves plot (numpy + matplotlib only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchtfx.components.torch_trainer.modeling.spec import BINARY, MULTICLASS

# The metric each task's epoch line, curves and Model artifact lead with.
HEADLINE = {BINARY: "auc", MULTICLASS: "accuracy"}
REGRESSION_HEADLINE = "rmse"


def headline(task: str) -> str:
    return HEADLINE.get(task, REGRESSION_HEADLINE)


def task_metrics(task: str, scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Eval metrics from the network's raw scores: binary AUC; multiclass accuracy; regression RMSE and MAE
    (in the training target's units: log1p(y) when the target is log-transformed)."""
    if task == BINARY:
        return {"auc": roc_auc(labels, scores)}
    if task == MULTICLASS:
        hits = np.argmax(scores, axis=1) == labels.astype(np.int64) if len(labels) else np.zeros(0)
        return {"accuracy": float(hits.mean()) if len(hits) else float("nan")}
    errors = np.asarray(scores, np.float64).reshape(-1) - np.asarray(labels, np.float64)
    if not len(errors):
        return {"rmse": float("nan"), "mae": float("nan")}
    return {"rmse": float(np.sqrt(np.mean(errors**2))), "mae": float(np.mean(np.abs(errors)))}


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve via the rank-sum (Mann-Whitney U) statistic, ties averaged."""
    labels = np.asarray(labels).reshape(-1) > 0.5
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # average ranks over runs of equal scores
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate([[0], boundaries])
    stops = np.concatenate([boundaries, [len(scores)]])
    for start, stop in zip(starts, stops, strict=True):
        ranks[order[start:stop]] = (start + stop + 1) / 2.0
    rank_sum = ranks[labels].sum()
    return float((rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives))


def plot_training_curves(history: list[dict[str, float]], path: Path, task: str = BINARY) -> None:
    """Train/eval loss and the task's headline eval metric per epoch, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [h["epoch"] for h in history]
    fig, (ax_loss, ax_auc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [h["train_loss"] for h in history], marker="o", label="train")
    ax_loss.plot(epochs, [h["eval_loss"] for h in history], marker="o", label="eval")
    ax_loss.set(xlabel="epoch", ylabel="loss", title="Loss")
    ax_loss.legend()
    metric = headline(task)
    ax_auc.plot(epochs, [h[f"eval_{metric}"] for h in history], marker="o", color="tab:green")
    ax_auc.set(xlabel="epoch", ylabel=metric, title=f"Eval {metric}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
