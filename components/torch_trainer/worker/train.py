"""DDP worker: forked by the local agent (cluster/agent.py), or started by ``torchrun ... -m
torchtfx.components.torch_trainer.worker.train --job JOB`` in a PyTorchJob replica.

Layout follows pytorch/examples' ddp-tutorial-series (multigpu_torchrun.py): setup, ``load_train_objs``, a
Trainer given its model, data and optimizer, main. ``LOCAL_RANK`` picks the device; global rank 0 does every
side effect (checkpoint, MLflow, export). Workers never import TensorFlow: they read the memory-mapped arrays
the executor materialized.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import logging
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.nn.parallel import DistributedDataParallel as DDP

from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import MlflowRun, RedactCredentials
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.handoff.job import TrainJob
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, ShardBatches, eval_batch_size
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import loss_for, split_output, task_loss
from torchtfx.components.torch_trainer.modeling.spec import BINARY, ModelSpec
from torchtfx.components.torch_trainer.worker import publish
from torchtfx.components.torch_trainer.worker.checkpoint import load_checkpoint, save_checkpoint
from torchtfx.components.torch_trainer.worker.collectives import (
    CollectiveTimeout,
    describe_timeout,
    earlier_nccl_timeout,
    is_timeout,
)
from torchtfx.components.torch_trainer.worker.diagnostics import AnomalyWatch, NonFiniteGuard, anomaly_detection
from torchtfx.components.torch_trainer.worker.distributed import DistContext, setup
from torchtfx.components.torch_trainer.worker.fatal import is_peer_failure, record_fatal
from torchtfx.components.torch_trainer.worker.metrics import headline, task_metrics
from torchtfx.components.torch_trainer.worker.optimization import (
    balanced_class_weights,
    make_optimizer,
    make_schedule,
    mixed_precision,
)
from torchtfx.components.torch_trainer.worker.outcomes import Evaluation, TrainingRun, improves
from torchtfx.components.torch_trainer.worker.progress import EpochProgress
from torchtfx.components.torch_trainer.worker.unused_parameters import (
    find_unused_parameters,
    needs_unused_parameter_search,
)

logger = logging.getLogger("torchtfx.train")


def load_train_objs(
    job: TrainJob, ctx: DistContext, splits: tuple[ArraySplit, ArraySplit] | None = None
) -> tuple[ArraySplit, ArraySplit, nn.Module]:
    """This rank's train and eval shards and the model, with identical initial weights on every rank.

    ``splits`` (train, eval) already in memory replace the job's arrays (the benchmarks' limit)."""
    hp = job.hparams
    torch.manual_seed(hp.seed)
    data = Path(job.data_dir)
    train, eval_ = splits or (ArraySplit.load(data / "train"), ArraySplit.load(data / "eval"))
    model = build_model(hp.model, job.layout.model_spec())
    return train.shard(ctx.rank, ctx.world_size, equal=True), eval_.shard(ctx.rank, ctx.world_size, equal=False), model


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        train_split: ArraySplit,
        eval_split: ArraySplit,
        optimizer: torch.optim.Optimizer,
        ctx: DistContext,
        hp: TrainerHParams,
        checkpoint_path: Path,
        tracker: MlflowRun | None = None,
        spec: ModelSpec | None = None,
    ) -> None:
        """``model`` is on ``ctx.device`` and ``optimizer`` holds its parameters; the Trainer wraps it in DDP.
        ``tracker`` (rank 0 only) receives every epoch's metrics. The loss is the model's own ``loss(outputs,
        labels)`` when it defines one, else the task's (``spec``; binary when None)."""
        self.ctx, self.hp, self.tracker = ctx, hp, tracker
        self.train_split, self.eval_split = train_split, eval_split
        self.examples_per_epoch = len(train_split) * ctx.world_size  # over all ranks (equal shards)
        self.train_batches = ShardBatches(train_split, hp.batch_size, shuffle=True, seed=hp.seed)
        self.eval_batches = ShardBatches(eval_split, eval_batch_size(eval_split), shuffle=False, seed=hp.seed)
        self.optimizer = optimizer
        self.precision = mixed_precision(ctx.device)
        self.amp = self.precision.scaled  # a GradScaler, which may skip steps
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        self.schedule = make_schedule(optimizer, hp, len(self.train_batches))
        self.task = spec.task if spec else BINARY
        weights = (
            balanced_class_weights(train_split, spec, ctx.device, ctx.is_main)
            if hp.class_weights == "balanced"
            else None
        )
        self.loss_fn = loss_for(model, self.task, class_weights=weights, **self._loss_options())
        dry_run = ShardBatches(train_split, hp.batch_size, shuffle=False, seed=hp.seed)
        unused = find_unused_parameters(model, dry_run, self.loss_fn, ctx.device)
        self.model = DDP(
            model,
            device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
            find_unused_parameters=needs_unused_parameter_search(unused, ctx.device, ctx.is_main),
        )
        # Early stopping compares epochs by the task's plain loss: a model's own loss or class weights would
        # make eval losses of different runs incomparable.
        self.eval_loss_fn = task_loss(self.task, **self._loss_options())
        self.checkpoint_path = checkpoint_path
        self.start_epoch, self.best_loss, self.bad_epochs = 0, float("inf"), 0
        self.best_state: dict | None = None
        self.history: list[dict[str, float]] = []
        self.guard = NonFiniteGuard(ctx.rank, self.amp)
        self.watch = AnomalyWatch(enabled=False)  # train() opens the real one when hp.detect_anomaly

    def _loss_options(self) -> dict:
        return {"regression_loss": self.hp.regression_loss, "huber_delta": self.hp.huber_delta}

    # -- checkpoints -------------------------------------------------------------------------
    def _checkpoint(self, epoch: int) -> None:
        state = {
            "epoch": epoch,
            "model": self.model.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "schedule": self.schedule.state_dict(),
            "best_loss": self.best_loss,
            "best_state": self.best_state,
            "bad_epochs": self.bad_epochs,
            "history": self.history,
            # Every rank seeds alike and draws alike (equal shards), so rank 0's CPU generator state is the
            # state of all: restoring it makes a resumed run continue exactly where the killed one left off.
            "cpu_rng": torch.get_rng_state(),
        }
        save_checkpoint(state, self.checkpoint_path)

    def resume(self) -> None:
        """Continue from the last completed epoch when a checkpoint exists (elastic restarts)."""
        state = load_checkpoint(self.checkpoint_path, self.ctx.device)
        if state is None:
            return
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.schedule.load_state_dict(state["schedule"])
        self.best_loss, self.best_state = state["best_loss"], state["best_state"]
        self.bad_epochs, self.history = state["bad_epochs"], state["history"]
        torch.set_rng_state(state["cpu_rng"])
        self.start_epoch = state["epoch"] + 1
        if self.ctx.is_main:
            logger.info("Resumed from %s at epoch %s", self.checkpoint_path, self.start_epoch + 1)
            if self.tracker is not None:  # epochs checkpointed but not yet logged when the worker died
                publish.log_missing_epochs(self.tracker, self.history)

    # -- one epoch ---------------------------------------------------------------------------
    def _train_epoch(self, epoch: int) -> float:
        self.model.train()
        self.train_batches.set_epoch(epoch)
        total = torch.zeros(2, dtype=torch.float64, device=self.ctx.device)
        sync_every = self.hp.sync_steps(self.ctx.device.type)
        local_sgd = sync_every > 1 and self.ctx.world_size > 1
        progress = EpochProgress(epoch + 1, self.hp.epochs, len(self.train_batches), self.ctx.rank)
        for step, (inputs, label) in enumerate(self.train_batches, start=1):
            inputs = tuple(t.to(self.ctx.device, non_blocking=True) for t in inputs)
            label = label.to(self.ctx.device, non_blocking=True)
            self.optimizer.zero_grad(set_to_none=True)
            # no_sync: DDP skips its gradient all-reduce; the ranks are brought together by averaging below.
            with self.model.no_sync() if local_sgd else contextlib.nullcontext():
                with self.watch.locate(epoch + 1, step, self.ctx.rank):
                    with torch.autocast("cuda", self.precision.dtype, enabled=self.precision.enabled):
                        scores, aux_loss = split_output(self.model(*inputs))
                        loss = self.loss_fn(scores.float(), label)
                        loss = loss if aux_loss is None else loss + aux_loss
                    self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.hp.grad_clip_norm)
            scale = self.scaler.get_scale() if self.amp else 1.0
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.schedule.step()
            skipped = self.amp and self.scaler.get_scale() < scale  # GradScaler skipped this step
            self.guard.after_step(epoch + 1, step, loss, grad_norm, skipped)
            if local_sgd and step % sync_every == 0:
                average_parameters(self.model.parameters(), None)
            total += torch.stack([loss.detach().double() * len(label), torch.tensor(len(label), device=total.device)])
            progress.step(step, total)
        if local_sgd:
            # Every epoch ends with one model on every rank: evaluation, early stopping and checkpoints see it.
            average_parameters(self.model.parameters(), None)
        dist.all_reduce(total)
        return float(total[0] / total[1])

    @torch.no_grad()
    def evaluate(self) -> Evaluation:
        """Global eval loss and the task's metrics; every rank gets the same numbers (so the same stop decision)."""
        net = self.model.module.eval()
        scores = [
            split_output(net(*(t.to(self.ctx.device) for t in inputs)))[0].float().cpu()
            for inputs, _ in self.eval_batches
        ]
        gathered: list = [None] * self.ctx.world_size
        local = torch.cat(scores).numpy() if scores else np.zeros((0,), np.float32)
        dist.all_gather_object(gathered, (local, self.eval_split.label))
        all_scores = np.concatenate([g[0] for g in gathered if len(g[0])] or [local])
        all_labels = np.concatenate([g[1] for g in gathered])
        loss = float(self.eval_loss_fn(torch.from_numpy(all_scores), torch.from_numpy(all_labels)))
        return Evaluation(loss, task_metrics(self.task, all_scores, all_labels), all_scores, all_labels)

    # -- the loop ----------------------------------------------------------------------------
    def train(self) -> TrainingRun:
        """Train with early stopping on eval loss."""
        with anomaly_detection(self.model.module, self.hp.detect_anomaly) as self.watch:
            return self._train_epochs()

    def _train_epochs(self) -> TrainingRun:
        seen, started = 0, time.perf_counter()
        epoch = self.start_epoch - 1
        # Resumed after early stopping had already ended training (a worker died while exporting): no more epochs.
        stopped = self.bad_epochs >= self.hp.early_stopping_patience
        for epoch in range(self.start_epoch, self.start_epoch if stopped else self.hp.epochs):
            tick = time.perf_counter()
            train_loss = self._train_epoch(epoch)
            evaluation = self.evaluate()
            eval_loss = evaluation.loss
            seen += self.examples_per_epoch
            record = {"epoch": epoch + 1, "train_loss": train_loss, "eval_loss": eval_loss}
            record.update({f"eval_{name}": value for name, value in evaluation.metrics.items()})
            record["examples_per_second"] = self.examples_per_epoch / (time.perf_counter() - tick)
            self.history.append(record)
            if improves(eval_loss, self.best_loss, self.hp.early_stopping_min_delta):
                self.best_loss, self.bad_epochs = eval_loss, 0
                self.best_state = copy.deepcopy(self.model.module.state_dict())
            else:
                self.bad_epochs += 1
            if self.ctx.is_main:
                # Checkpoint before reporting: a worker killed in between resumes after this epoch, and resume()
                # logs it to MLflow then, so every epoch is logged once, at its own step.
                self._checkpoint(epoch)
                self._report_epoch(record)
            if self.bad_epochs >= self.hp.early_stopping_patience:
                if self.ctx.is_main:
                    logger.info("Early stopping: eval loss has not improved for %s epochs", self.bad_epochs)
                break
        seconds = time.perf_counter() - started
        return TrainingRun(
            epochs_run=epoch + 1,
            examples_per_second=seen / seconds if seconds > 0 else 0.0,
            seconds=seconds,
            train_examples=self.examples_per_epoch,
            world_size=self.ctx.world_size,
            device=self.ctx.device.type,
            history=list(self.history),
        )

    def restore_best(self) -> None:
        """Early stopping's result: the weights of the epoch with the lowest eval loss."""
        self.model.module.load_state_dict(self.best_state or self.model.module.state_dict())

    def _report_epoch(self, record: dict[str, float]) -> None:
        metric = f"eval_{headline(self.task)}"
        logger.info(
            "epoch %s/%s train_loss=%.4f eval_loss=%.4f %s=%.4f (%.0f examples/s)",
            record["epoch"],
            self.hp.epochs,
            record["train_loss"],
            record["eval_loss"],
            metric,
            record[metric],
            record["examples_per_second"],
        )
        if self.tracker is not None:
            publish.log_epoch(self.tracker, record)


def run(job: TrainJob) -> None:
    hp = job.hparams
    stop_after_nccl_timeout(job)
    ctx = setup(hp.device, hp.threads_per_worker, hp.collective_timeout, job.run_dir)
    # force: a forked worker inherits the agent's logging handlers, which would make this call a no-op.
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s [rank {ctx.rank}] %(levelname)s %(message)s", force=True
    )
    for handler in logging.getLogger().handlers:  # torchrun tees this output into train.log: no user:password@
        handler.addFilter(RedactCredentials())
    try:
        train_and_publish(job, ctx)
    except Exception as err:
        if is_timeout(err):  # a rank never entered a collective: a restart would wait the same way
            timeout = CollectiveTimeout(describe_timeout(hp.collective_timeout, err))
            record_fatal(job.run_dir, ctx.rank, timeout)
            raise timeout from err
        if not is_peer_failure(err):  # a restart would fail the same way: stop the restarts
            record_fatal(job.run_dir, ctx.rank, err)
        raise
    finally:
        dist.destroy_process_group()


def stop_after_nccl_timeout(job: TrainJob) -> None:
    """An NCCL timeout ends its process before Python can write the marker (worker/collectives.py): the restarted
    worker finds the watchdog's dump, writes the marker, and stops before joining a group."""
    earlier = earlier_nccl_timeout(job.run_dir)
    if earlier is not None:
        rank, timeout = earlier
        record_fatal(job.run_dir, rank, timeout)
        raise timeout


def train_and_publish(job: TrainJob, ctx: DistContext) -> None:
    """Load, train with early stopping, restore the best epoch, and (rank 0) publish."""
    train_split, eval_split, model = load_train_objs(job, ctx)
    model = model.to(ctx.device)  # before the optimizer takes its parameters
    # No tracking URI: the server was unreachable and the run continues untracked (policy 'continue').
    tracker = publish.start_tracking(job) if ctx.is_main and job.mlflow_tracking_uri else None
    checkpoint = Path(job.run_dir) / contracts.CHECKPOINT_FILE
    optimizer = make_optimizer(model, job.hparams, log=ctx.is_main)
    spec = job.layout.model_spec()
    trainer = Trainer(model, train_split, eval_split, optimizer, ctx, job.hparams, checkpoint, tracker, spec)
    trainer.resume()
    training = trainer.train()
    trainer.restore_best()
    final = trainer.evaluate()  # collective: every rank takes part
    if ctx.is_main:
        publish.publish(job, trainer.model.module, training, final, tracker)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job", required=True, type=Path, help="TrainJob JSON written by the executor")
    run(TrainJob.load(parser.parse_args(argv).job))


if __name__ == "__main__":
    main()
