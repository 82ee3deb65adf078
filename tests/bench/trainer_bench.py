"""Trainer benchmarks on what a finished pipeline run's Trainer read (ExampleGen's examples, Transform's graph).

* input path: examples/s per epoch when training reads the examples as the Trainer does (TFRecords through
  the transform graph -> columnar arrays -> memory-mapped shards), against the same model and loop on tensors
  already in memory;
* DDP scaling: 1 worker against 2 workers (one thread each), real torchrun processes, by throughput and AUC.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import torch
import torch.distributed as dist

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.launch import launch
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob, TrainResult
from torchtfx.components.torch_trainer.handoff.materialize import FeatureFn, materialize, through_transform_graph
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout, layout_from_transform
from torchtfx.components.torch_trainer.worker.optimization import make_optimizer
from torchtfx.components.torch_trainer.worker.train import DistContext, Trainer, load_train_objs
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)

V = TypeVar("V")


@dataclasses.dataclass(frozen=True)
class TrainerInputs:
    """What a finished run's Trainer read: Transform's graph and ExampleGen's raw examples of each split."""

    graph_uri: str
    split_uris: dict[str, str]

    @classmethod
    def of_run(cls, root: Path) -> TrainerInputs:
        tfx_root = root / "tfx"
        graphs = sorted((tfx_root / contracts.TRANSFORM_ID / "transform_graph").glob("*"))
        examples = sorted((tfx_root / contracts.EXAMPLE_GEN_ID / "examples").glob("*"))
        if not graphs or not examples:
            raise RuntimeError(f"no Transform graph or ExampleGen examples under {tfx_root}")
        return cls(str(graphs[-1]), {s: str(examples[-1] / f"Split-{s}") for s in ("train", "eval")})

    def layout_and_features(self, dataset: DatasetConfig) -> tuple[FeatureLayout, FeatureFn]:
        """The model's layout, and the raw examples -> transformed features function the Trainer reads with."""
        import tensorflow_transform as tft

        output = tft.TFTransformOutput(self.graph_uri)
        layout = layout_from_transform(dataset, output)
        return layout, through_transform_graph(output, layout)


def _job(data_dir: Path, work: Path, layout: FeatureLayout, hparams: TrainerHParams) -> TrainJob:
    return TrainJob(
        data_dir=str(data_dir),
        model_dir=str(work / "model"),
        run_dir=str(work / "run"),
        layout=layout,
        hparams=hparams,
        mlflow_tracking_uri="",  # untracked: the benchmark measures training, not MLflow
        mlflow_experiment="",
        mlflow_run_name="",
        mlflow_tags={},
    )


def _fixed_epochs(epochs: int, **overrides) -> TrainerHParams:
    # Early stopping off (patience = epochs), so every variant runs the same number of epochs.
    return TrainerHParams(epochs=epochs, early_stopping_patience=epochs, use_gpu=False, **overrides)


def _train_in_process(job: TrainJob, splits: tuple[ArraySplit, ArraySplit] | None) -> list[dict]:
    """One rank (gloo, world size 1) in this process, one thread: the per-epoch history."""
    torch.set_num_threads(job.hparams.threads_per_worker)
    Path(job.run_dir).mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ctx = DistContext(0, 0, 1, torch.device("cpu"))
        train_split, eval_split, model = load_train_objs(job, ctx, splits)
        optimizer = make_optimizer(model, job.hparams)
        checkpoint = Path(job.run_dir) / contracts.CHECKPOINT_FILE
        return Trainer(model, train_split, eval_split, optimizer, ctx, job.hparams, checkpoint).train().history
    finally:
        dist.destroy_process_group()


def _mirrored(variants: tuple[V, ...], rounds: int) -> Iterator[tuple[int, V]]:
    """(round, variant) in mirrored order, A B ... then ... B A: a drift in the machine's speed over the run
    hits every variant alike."""
    for i in range(rounds):
        for variant in variants if i % 2 == 0 else variants[::-1]:
            yield i, variant


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def input_path(inputs: TrainerInputs, dataset: DatasetConfig, work: Path, epochs: int, rounds: int = 2) -> dict:
    """Runs the two variants ``rounds`` times in mirrored order (A B B A)."""
    shutil.rmtree(work, ignore_errors=True)
    layout, features = inputs.layout_and_features(dataset)
    hparams = _fixed_epochs(epochs, num_workers=1)
    arrays = work / "arrays"
    per_epoch: dict[str, list[float]] = {"transform_output": [], "in_memory": []}
    totals: dict[str, float] = {"transform_output": 0.0, "in_memory": 0.0}
    materialize_seconds, counts = [], {}

    def from_transform_output(i: int) -> None:
        shutil.rmtree(arrays, ignore_errors=True)
        started = time.perf_counter()
        counts.update(materialize(inputs.split_uris, layout, features, arrays).rows)
        materialize_seconds.append(time.perf_counter() - started)
        history = _train_in_process(_job(arrays, work / f"from_transform_{i}", layout, hparams), None)
        totals["transform_output"] += time.perf_counter() - started
        per_epoch["transform_output"] += [h["examples_per_second"] for h in history]

    def from_memory(i: int) -> None:
        in_memory = (ArraySplit.load(arrays / "train", mmap=False), ArraySplit.load(arrays / "eval", mmap=False))
        started = time.perf_counter()
        history = _train_in_process(_job(arrays, work / f"in_memory_{i}", layout, hparams), in_memory)
        totals["in_memory"] += time.perf_counter() - started
        per_epoch["in_memory"] += [h["examples_per_second"] for h in history]

    # The first round reads the examples first because the in-memory variant loads the arrays it wrote.
    for i, variant in _mirrored((from_transform_output, from_memory), rounds):
        variant(i)

    rows = counts["train"] * epochs * rounds
    mean = {k: _mean(v) for k, v in per_epoch.items()}
    return {
        "train_rows": counts["train"],
        "eval_rows": counts["eval"],
        "epochs": epochs,
        "rounds": rounds,
        "materialize_seconds": sum(materialize_seconds) / rounds,
        "examples_per_second_per_epoch": per_epoch,
        # The whole cost of reading the examples (parse, transform graph, columnar write, load), over the epochs.
        "examples_per_second_overall": {k: rows / v for k, v in totals.items()},
        "ratio_overall": totals["in_memory"] / totals["transform_output"],
        "ratio_per_epoch": mean["transform_output"] / mean["in_memory"],
        "target": 0.9,
    }


def _torchrun(arrays: Path, work: Path, layout: FeatureLayout, hparams: TrainerHParams) -> dict:
    job = _job(arrays, work, layout, hparams)
    shutil.rmtree(work, ignore_errors=True)
    Path(job.run_dir).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    launch(job, work / "job.json", work / "train.log")
    wall = time.perf_counter() - started
    result = TrainResult.load(Path(job.run_dir) / contracts.RESULT_FILE)
    return {
        "examples_per_second": result.examples_per_second,
        "train_seconds": result.seconds,
        "wall_seconds_with_process_start": wall,
        "eval_auc": result.eval_auc,
        "epochs": result.epochs_run,
    }


# (name, DDP workers, sync_every): plain DDP all-reduces gradients every step; local SGD averages parameters
# every N steps (TrainerHParams.sync_every).
DDP_VARIANTS = (
    ("1 worker", 1, 1),
    ("2 workers, DDP", 2, 1),
    ("2 workers, local SGD every 8 steps", 2, 8),
    ("2 workers, default settings (sync_every auto: every 16 steps on CPU)", 2, "auto"),
)


def ddp_scaling(inputs: TrainerInputs, dataset: DatasetConfig, work: Path, epochs: int, rounds: int = 2) -> dict:
    """Each variant ``rounds`` times in mirrored order (A B C D D C B A); throughput and AUC are the means
    over the rounds."""
    shutil.rmtree(work, ignore_errors=True)
    layout, features = inputs.layout_and_features(dataset)
    arrays = work / "arrays"
    counts = materialize(inputs.split_uris, layout, features, arrays).rows
    measured: dict[str, list[dict]] = {name: [] for name, _, _ in DDP_VARIANTS}
    for i, (name, workers, sync_every) in _mirrored(DDP_VARIANTS, rounds):
        hparams = _fixed_epochs(epochs, num_workers=workers, sync_every=sync_every)
        measured[name].append(_torchrun(arrays, work / f"w{workers}_s{sync_every}", layout, hparams))
        logger.info("DDP %s, round %s: %.0f examples/s", name, i + 1, measured[name][-1]["examples_per_second"])
    runs = [
        {
            "name": name,
            "workers": workers,
            "sync_every": sync_every,
            "examples_per_second": _mean([m["examples_per_second"] for m in measured[name]]),
            "examples_per_second_each_round": [m["examples_per_second"] for m in measured[name]],
            "wall_seconds_with_process_start": _mean([m["wall_seconds_with_process_start"] for m in measured[name]]),
            "eval_auc": _mean([m["eval_auc"] for m in measured[name]]),
        }
        for name, workers, sync_every in DDP_VARIANTS
    ]
    one = runs[0]
    for run in runs[1:]:
        run["speedup"] = run["examples_per_second"] / one["examples_per_second"]
        run["auc_difference"] = abs(run["eval_auc"] - one["eval_auc"])
    return {
        "train_rows": counts["train"],
        "epochs": epochs,
        "rounds": rounds,
        "runs": runs,
        "target_speedup": 1.7,
        "target_auc_difference": 0.005,
    }


def launch_choice(inputs: TrainerInputs, dataset: DatasetConfig, work: Path, rounds: int = 2) -> dict:
    """Small data (a taxi run's examples): the Trainer's default settings, trained in the executor's
    process (what ``num_workers: auto`` picks below ``IN_PROCESS_MAX_TRAIN_ROWS``) against 2 DDP workers under
    torchrun; wall time with process start, in mirrored rounds."""
    from torchtfx.components.torch_trainer.worker.in_process import run_in_process

    shutil.rmtree(work, ignore_errors=True)
    layout, features = inputs.layout_and_features(dataset)
    counts = materialize(inputs.split_uris, layout, features, work / "arrays").rows
    measured: dict[str, list[dict]] = {"in_process": [], "torchrun_2_workers": []}
    for i, name in _mirrored(tuple(measured), rounds):
        job = _job(work / "arrays", work / f"{name}_{i}", layout, TrainerHParams(use_gpu=False, num_workers=1))
        if name == "torchrun_2_workers":
            measured[name].append(
                _torchrun(work / "arrays", work / f"{name}_{i}", layout, job.hparams.replace(num_workers=2))
            )
            continue
        Path(job.run_dir).mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        run_in_process(job, work / f"{name}_{i}" / "train.log", threads=os.cpu_count())
        result = TrainResult.load(Path(job.run_dir) / contracts.RESULT_FILE)
        measured[name].append(
            {
                "wall_seconds_with_process_start": time.perf_counter() - started,
                "eval_auc": result.eval_auc,
                "epochs": result.epochs_run,
            }
        )
    summary = {
        name: {key: _mean([m[key] for m in runs]) for key in ("wall_seconds_with_process_start", "eval_auc")}
        for name, runs in measured.items()
    }
    return {
        "train_rows": counts["train"],
        "rounds": rounds,
        "runs": summary,
        "wall_ratio": summary["in_process"]["wall_seconds_with_process_start"]
        / summary["torchrun_2_workers"]["wall_seconds_with_process_start"],
    }
