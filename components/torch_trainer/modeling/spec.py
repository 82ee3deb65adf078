"""What a model factory is given: :class:`ModelSpec`, the model's view of the transformed features.

A factory is called as ``factory(spec, **hparams)`` and returns an ``nn.Module`` whose
``forward(dense, categorical)`` takes float32 ``[batch, len(spec.dense_features)]`` and int64
``[batch, len(spec.categorical_features)]`` and returns raw scores: logits ``[batch]`` (binary),
logits ``[batch, num_outputs]`` (multiclass) or predictions ``[batch]`` (regression).

A dataset with text features adds one argument per :class:`SequenceInput` (``spec.sequences``), in order:
``forward(dense, categorical, *sequences)``, each int64 ``[batch, seq]`` token ids with ``1 <= seq <= max_length``,
padded per batch at the end with ``padding_id`` (the mask is ``ids != padding_id``). A row may be all padding (an
empty text); the model must still give finite outputs for it.
"""

from __future__ import annotations

import dataclasses

from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION, TASKS
from torchtfx.data.config.text import PADDING_ID  # Transform's padding id: the one definition

__all__ = ["BINARY", "MULTICLASS", "REGRESSION", "TASKS", "ModelSpec", "SequenceInput", "embedding_dims"]


@dataclasses.dataclass(frozen=True)
class SequenceInput:
    """One token-id input: the transformed text feature (also the ONNX input's name) and its id range."""

    name: str
    vocab_size: int  # ids are in [0, vocab_size): padding, unknown, the vocabulary, then OOV buckets
    max_length: int
    padding_id: int = PADDING_ID  # the text feature's (data/config/text.py padding_id): a checkpoint's own, if any
    # ``tokenizer: pretrained``: the checkpoint as the dataset YAML names it (a folder or package:<module>/<folder>),
    # resolved again in each process that builds the model (DDP workers, Kubeflow replicas: data/pretrained/)
    checkpoint: str | None = None

    def __post_init__(self) -> None:
        if self.max_length < 1 or self.vocab_size <= self.padding_id:
            raise ValueError(f"sequence input {self.name!r} needs max_length >= 1 and vocab_size > padding_id")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    dense_features: tuple[str, ...]
    # Categorical and bucketized features, in the order of the ``categorical`` input's columns.
    categorical_features: tuple[str, ...]
    # Vocabulary size including OOV buckets (or bucket count), one per categorical feature.
    cardinalities: tuple[int, ...]
    task: str = BINARY
    num_outputs: int = 1
    sequences: tuple[SequenceInput, ...] = ()

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(TASKS)}")
        if len(self.cardinalities) != len(self.categorical_features):
            raise ValueError("one cardinality per categorical feature is needed")
        if self.task == MULTICLASS and self.num_outputs < 2:
            raise ValueError("a multiclass model needs num_outputs >= 2 (the number of classes)")
        if self.task != MULTICLASS and self.num_outputs != 1:
            raise ValueError(f"a {self.task} model has num_outputs 1, got {self.num_outputs}")

    @classmethod
    def from_dict(cls, raw: dict) -> ModelSpec:
        """The spec from ``dataclasses.asdict`` (or its JSON)."""
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        fields["sequences"] = tuple(SequenceInput(**s) for s in raw.get("sequences", ()))
        return cls(**fields)

    def output_shape(self, batch: int) -> tuple[int, ...]:
        """The shape ``forward`` must return for ``batch`` rows."""
        return (batch, self.num_outputs) if self.task == MULTICLASS else (batch,)


def embedding_dims(cardinalities: tuple[int, ...], max_dim: int) -> tuple[int, ...]:
    """A common rule of thumb for embedding widths: about 1.6 * cardinality^0.56, capped at ``max_dim``."""
    return tuple(max(2, min(max_dim, round(1.6 * c**0.56))) for c in cardinalities)
