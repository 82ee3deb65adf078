"""Typed hyperparameters of the TorchTrainer, validated before any work starts."""

from __future__ import annotations

from typing import Literal

import pydantic

from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving import ServingConfig
from torchtfx.data.config.strict import ConfigError, StrictConfig


class HParamsError(ConfigError):
    """A trainer hyperparameter is unknown or out of range."""


PositiveInt = pydantic.PositiveInt


class TrainerHParams(StrictConfig):
    """Everything that shapes training; passed to the component as an execution parameter (JSON)."""

    config_error = HParamsError

    epochs: PositiveInt = 12
    batch_size: PositiveInt = 256
    learning_rate: pydantic.PositiveFloat = 3e-3
    weight_decay: pydantic.NonNegativeFloat = 1e-5
    # The network: a zoo name or the user's factory, and its own hyperparameters (hidden units, dropout, ...).
    model: ModelConfig = ModelConfig()
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    # "cosine" decays the learning rate to 0 over all planned steps (epochs * steps per epoch).
    lr_schedule: Literal["constant", "cosine"] = "constant"
    grad_clip_norm: pydantic.PositiveFloat = 1.0
    early_stopping_patience: PositiveInt = 3
    seed: int = 42
    num_workers: PositiveInt = 2
    threads_per_worker: PositiveInt = 1
    # torchrun restarts all workers after a worker dies (the OOM killer, a preempted node, kill -9), up to this
    # many times; they resume from rank 0's last checkpoint. A failure a worker raises itself is not retried
    # (worker/fatal.py). --max-restarts.
    max_restarts: pydantic.NonNegativeInt = 3
    use_gpu: bool = True
    # 1: plain DDP, gradients all-reduced every step. N > 1: local SGD, each rank steps on its own gradients
    # and the ranks average their parameters every N steps and at every epoch end. For CPU/gloo, where one
    # all-reduce costs about as much as a step's compute (make bench: DDP scaling); not bit-exact on resume.
    sync_every: PositiveInt = 1
    # torch.autograd anomaly detection on every rank: names the op and step where a NaN appeared (slow).
    detect_anomaly: bool = False
    # multiclass: "balanced" weighs class k by n / (K * n_k) in the training loss (rare classes count more)
    class_weights: Literal["none", "balanced"] = "none"
    # regression: "huber" is less swayed by outlier targets than "mse"
    regression_loss: Literal["mse", "huber"] = "mse"
    huber_delta: pydantic.PositiveFloat = 1.0
    # The precision of the served network (fp16 only behind the drift gate); --serving-precision.
    serving: ServingConfig = ServingConfig()
