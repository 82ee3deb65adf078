"""Typed hyperparameters of the TorchTrainer, validated before any work starts."""

from __future__ import annotations

import datetime
import math
from typing import Annotated, Literal

import pydantic

from torchtfx.components.torch_trainer.handoff.devices import AUTO, CPU, Device
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import ServingConfig
from torchtfx.data.config.strict import (
    ConfigError,
    NonNegativeFiniteFloat,
    PositiveFiniteFloat,
    StrictConfig,
    whole_number,
)


class HParamsError(ConfigError):
    """A trainer hyperparameter is unknown or out of range."""


PositiveInt = pydantic.PositiveInt

# Bounds no one can mean to exceed (issue #41: --epochs 1e30, --batch-size 1e12 and --num-workers 100000 were
# accepted or refused without the range): 10,000 epochs (the default is 12); a batch of 2**24 rows (16.8M; the
# default is 256, kubeflow/pools.yaml's 1,024); 1,024 DDP workers or threads on one node (no node has more cores).
MAX_EPOCHS = 10_000
MAX_BATCH_SIZE = 2**24
MAX_WORKERS_PER_NODE = 1024


def _auto_or_whole(high: int | None) -> object:
    """``auto`` or a whole number from 1 to ``high``: one clear error for both branches of the union, instead of
    pydantic's two."""
    bound = f"from 1 to {high:,}" if high is not None else ">= 1"

    def check(value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (high is not None and value > high):
            raise ValueError(f"must be 'auto' or a whole number {bound}, got {value!r}")
        return value

    return Annotated[Literal["auto"] | int, pydantic.BeforeValidator(check)]


AutoOrPositiveInt = _auto_or_whole(None)
AutoOrWorkers = _auto_or_whole(MAX_WORKERS_PER_NODE)
Epochs = whole_number(1, MAX_EPOCHS)
BatchSize = whole_number(1, MAX_BATCH_SIZE)
Threads = whole_number(1, MAX_WORKERS_PER_NODE)


def _as_number(value: object) -> float | None:
    """``value`` as a float (text included: YAML reads ``1e-4`` as text); None for anything else, bools too."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _optional_learning_rate(value: object) -> object:
    """None (the parameter group takes ``learning_rate``) or a finite number > 0."""
    if value is None:
        return None
    number = _as_number(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise ValueError(f"must be a finite number > 0, or null for learning_rate's value, got {value!r}")
    return number


def _warmup_fraction(value: object) -> object:
    """A fraction of the planned steps, 0 <= x < 1: one clear error naming the range and what it means."""
    number = _as_number(value)
    if number is None or not 0 <= number < 1:  # NaN fails both comparisons
        raise ValueError(
            f"must be a fraction of all planned steps from 0 to below 1 (0.1: the first 10% warm up), got {value!r}"
        )
    return number


OptionalLearningRate = Annotated[float | None, pydantic.BeforeValidator(_optional_learning_rate)]
WarmupRatio = Annotated[float, pydantic.BeforeValidator(_warmup_fraction)]

# make bench, DDP scaling (tests/bench/results/README.md, section 3: the measured speed-ups): on 2 CPU cores, local SGD
# every 16 steps beats plain DDP on gloo and local SGD every 8 steps, at the same eval AUC; the all-reduce of every
# step is the cost.
CPU_LOCAL_SGD_STEPS = 16
CPU_WORKERS = 2
# Below this, one worker in the executor's process beats two DDP workers under torchrun, whose start-up (its agent
# and every worker import torch) outweighs the training it saves: make bench, DDP scaling, small data
# (tests/bench/results/README.md, section 3). Measured with workers that each imported torch; the local agent now forks
# them after its own import (cluster/agent.py), which starts them sooner: not measured again.
IN_PROCESS_MAX_TRAIN_ROWS = 50_000


class TrainerHParams(StrictConfig):
    """Everything that shapes training; passed to the component as an execution parameter (JSON)."""

    config_error = HParamsError

    epochs: Epochs = 12
    batch_size: BatchSize = 256
    # The learning rate of every parameter inside a pretrained ``transformers.PreTrainedModel`` (the encoder a
    # zoo factory loads from a checkpoint); the other parameters (a new head, tabular embeddings) take
    # head_learning_rate. Fine-tuning gives the new head a higher rate than the pretrained body.
    learning_rate: PositiveFiniteFloat = 3e-3
    # None: learning_rate. A model with no pretrained submodule has only "head" parameters: all take this rate.
    head_learning_rate: OptionalLearningRate = None
    # AdamW's decoupled decay; biases and normalization weights are never decayed (worker/optimization.py).
    weight_decay: NonNegativeFiniteFloat = 1e-5
    # The network: a zoo name or the user's factory, and its own hyperparameters (hidden units, dropout, ...).
    model: ModelConfig = ModelConfig()
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    # "cosine" and "linear" decay the learning rate to 0 over all planned steps (epochs * steps per epoch) after
    # the warmup; "linear" is transformers' get_linear_schedule_with_warmup.
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    # The first fraction of all planned steps raises the learning rate linearly from 0 (warmup; 0: none).
    warmup_ratio: WarmupRatio = 0.0
    grad_clip_norm: PositiveFiniteFloat = 1.0
    early_stopping_patience: Epochs = 3
    # An epoch improves on the best only when its eval loss is lower by more than this fraction of the best (0:
    # any decrease counts). Measured at 1M synthetic taxi rows: eval loss 0.2415 after epoch 1, then changes of
    # 0.04% or less while 6 more epochs ran (33 s of 48 s of training) for eval AUC 0.9378 -> 0.9381
    # (tests/bench/results/README.md, section 5, what limits the run at 1M rows).
    early_stopping_min_delta: NonNegativeFiniteFloat = 1e-3
    seed: int = 42
    # "auto": below IN_PROCESS_MAX_TRAIN_ROWS training rows, one worker in the executor's own process (no torchrun,
    # whose start-up and worker processes cost more than the training on taxi: tests/bench/results/README.md, sec. 3);
    # above, DDP with one worker per GPU, or CPU_WORKERS on CPU. A number always starts that many DDP workers.
    num_workers: AutoOrWorkers = "auto"
    threads_per_worker: Threads = 1
    # torchrun restarts all workers after a worker dies (the OOM killer, a preempted node, kill -9), up to this
    # many times; they resume from rank 0's last checkpoint. A failure a worker raises itself is not retried
    # (worker/fatal.py). --max-restarts.
    max_restarts: pydantic.NonNegativeInt = 3
    # How long a rank waits in a collective (all-reduce, broadcast, gather) for the others before the run fails;
    # also bounds joining the process group. torch's defaults are 30 minutes for gloo and 10 for NCCL; a timeout
    # is not retried (worker/fatal.py), since a rank that never enters a collective does the same again after a
    # restart. 10 minutes: the legitimate waits are rank 0's side effects between two collectives (the epoch's
    # checkpoint, MLflow logging with its client's retries) and, for the first collective (DDP's parameter
    # check), the ranks' start-up skew: measured with 3 s on tiny taxi, rank 1 timed out there while rank 0 was
    # still opening its MLflow run (sqlite). Seconds on taxi, minutes at worst on a slow volume or server.
    collective_timeout_seconds: PositiveInt = 600
    # auto: CUDA when torch can use it, else the CPU; cuda: required, the run stops at once without it (torch's
    # reason and the fix named); cpu: never a GPU. A Kubeflow step on a GPU pool is compiled with cuda
    # (handoff/devices.py). --device.
    device: Device = AUTO
    # 1: plain DDP, gradients all-reduced every step. N > 1: local SGD, each rank steps on its own gradients
    # and the ranks average their parameters every N steps and at every epoch end. For CPU/gloo, where one
    # all-reduce costs a large part of a step's compute (DEVELOPMENT.md, Performance notes; make bench: DDP
    # scaling); not bit-exact on resume.
    # "auto": 1 with CUDA (NCCL all-reduces are cheap), CPU_LOCAL_SGD_STEPS with gloo on CPU.
    sync_every: AutoOrPositiveInt = "auto"
    # torch.autograd anomaly detection on every rank: names the op and step where a NaN appeared (slow).
    detect_anomaly: bool = False
    # multiclass: "balanced" weighs class k by n / (K * n_k) in the training loss (rare classes count more)
    class_weights: Literal["none", "balanced"] = "none"
    # regression: "huber" is less swayed by outlier targets than "mse"
    regression_loss: Literal["mse", "huber"] = "mse"
    huber_delta: PositiveFiniteFloat = 1.0
    # The precision of the served network (fp16 only behind the drift gate); --serving-precision.
    serving: ServingConfig = ServingConfig()

    @pydantic.model_validator(mode="before")
    @classmethod
    def _use_gpu_was_renamed(cls, data: object) -> object:
        """``use_gpu`` (before issue #44), in a pools.yaml or the hparams.json of an older model: ``false`` is
        ``device: cpu``; ``true`` meant "if present", which ``auto`` (the default) means."""
        if isinstance(data, dict) and "use_gpu" in data:
            data = dict(data)
            if data.pop("use_gpu") is False:
                data.setdefault("device", CPU)
        return data

    def workers_for(self, train_rows: int, gpus: int) -> int:
        """DDP workers for ``train_rows`` rows; 0: one worker in this process (``num_workers: auto``, small data)."""
        if self.num_workers != "auto":
            return self.num_workers
        if gpus > 0 and self.device != CPU:
            return gpus
        return 0 if train_rows < IN_PROCESS_MAX_TRAIN_ROWS else CPU_WORKERS

    @property
    def collective_timeout(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.collective_timeout_seconds)

    def sync_steps(self, device_type: str) -> int:
        """Steps between parameter averages: 1 is plain DDP (gradients all-reduced every step)."""
        if self.sync_every != "auto":
            return self.sync_every
        return 1 if device_type == "cuda" else CPU_LOCAL_SGD_STEPS
