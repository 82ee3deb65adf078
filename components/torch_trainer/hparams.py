"""Typed hyperparameters of the TorchTrainer, validated before any work starts."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


class HParamsError(ValueError):
    """A trainer hyperparameter is out of range."""


@dataclasses.dataclass(frozen=True)
class TrainerHParams:
    """Everything that shapes training; passed to the component as execution parameters."""

    epochs: int = 12
    batch_size: int = 256
    learning_rate: float = 3e-3
    weight_decay: float = 1e-5
    hidden_units: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    max_embedding_dim: int = 16
    grad_clip_norm: float = 1.0
    early_stopping_patience: int = 3
    seed: int = 42
    num_workers: int = 2
    threads_per_worker: int = 1
    max_restarts: int = 0
    use_gpu: bool = True
    # 1: plain DDP, gradients all-reduced every step. N > 1: local SGD, each rank steps on its own gradients
    # and the ranks average their parameters every N steps and at every epoch end. For CPU/gloo, where one
    # all-reduce costs about as much as a step's compute (make bench: DDP scaling); not bit-exact on resume.
    sync_every: int = 1

    def validate(self) -> TrainerHParams:
        checks = {
            "epochs": self.epochs >= 1,
            "batch_size": self.batch_size >= 1,
            "learning_rate": self.learning_rate > 0,
            "weight_decay": self.weight_decay >= 0,
            "hidden_units": bool(self.hidden_units) and all(h >= 1 for h in self.hidden_units),
            "dropout": 0.0 <= self.dropout < 1.0,
            "max_embedding_dim": self.max_embedding_dim >= 1,
            "grad_clip_norm": self.grad_clip_norm > 0,
            "early_stopping_patience": self.early_stopping_patience >= 1,
            "num_workers": self.num_workers >= 1,
            "threads_per_worker": self.threads_per_worker >= 1,
            "max_restarts": self.max_restarts >= 0,
            "sync_every": self.sync_every >= 1,
        }
        bad = [f"{name}={getattr(self, name)!r}" for name, ok in checks.items() if not ok]
        if bad:
            raise HParamsError(f"invalid trainer hyperparameters: {', '.join(bad)}")
        return self

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainerHParams:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise HParamsError(f"unknown trainer hyperparameters: {', '.join(unknown)}")
        if "hidden_units" in raw:
            raw = {**raw, "hidden_units": tuple(int(h) for h in raw["hidden_units"])}
        return cls(**raw).validate()

    @classmethod
    def from_json(cls, text: str) -> TrainerHParams:
        return cls.from_dict(json.loads(text))
