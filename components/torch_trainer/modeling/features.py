"""The model's view of the transformed features: which columns are dense, which are embedded ids.

A :class:`FeatureLayout` is the contract between Transform's output, the PyTorch model, the ONNX
graph (inputs ``dense`` float32 [batch, D] and ``categorical`` int64 [batch, C], then one int64 [batch, length]
input per text feature, named by its transformed feature) and the serving signature, which stacks the
transformed features in exactly this order.
"""

from __future__ import annotations

import dataclasses
import json
import math

from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.modeling.spec import BINARY, MULTICLASS, REGRESSION, ModelSpec, SequenceInput
from torchtfx.data.config.dataset import DatasetConfig, transformed_name
from torchtfx.data.config.text import PADDING_ID, model_vocab_size, padding_id

DENSE_INPUT = "dense"
CATEGORICAL_INPUT = "categorical"


@dataclasses.dataclass(frozen=True)
class FeatureLayout:
    dense: tuple[str, ...]  # transformed names, in input column order
    embedded: tuple[str, ...]
    cardinalities: tuple[int, ...]  # one per embedded feature, OOV buckets included
    label: str
    task: str = BINARY
    classes: tuple[str, ...] = ()  # multiclass: the class strings, by class id
    label_weight: str | None = None  # multiclass and regression: 0.0 marks a refused row
    log1p_target: bool = False  # regression trained on log1p(y): the export head serves expm1 of the output
    sequences: tuple[str, ...] = ()  # text features' transformed names: token ids [batch, length] each
    sequence_vocab_sizes: tuple[int, ...] = ()  # padding, unknown, vocabulary and OOV buckets
    sequence_max_lengths: tuple[int, ...] = ()
    # Empty in a layout written before checkpoints existed: PADDING_ID and no checkpoint for every sequence.
    sequence_padding_ids: tuple[int, ...] = ()
    sequence_checkpoints: tuple[str | None, ...] = ()  # tokenizer: pretrained: the checkpoint, as the YAML names it

    def model_spec(self) -> ModelSpec:
        """What the model factory is given."""
        num_outputs = len(self.classes) if self.task == MULTICLASS else 1
        count = len(self.sequences)
        sequences = tuple(
            SequenceInput(*fields)
            for fields in zip(
                self.sequences,
                self.sequence_vocab_sizes,
                self.sequence_max_lengths,
                self.sequence_padding_ids or (PADDING_ID,) * count,
                self.sequence_checkpoints or (None,) * count,
                strict=True,
            )
        )
        return ModelSpec(
            self.dense, self.embedded, self.cardinalities, task=self.task, num_outputs=num_outputs, sequences=sequences
        )

    @property
    def input_names(self) -> tuple[str, ...]:
        """The network's inputs, in ``forward``'s order: the ONNX graph's and the translated network's."""
        return (DENSE_INPUT, CATEGORICAL_INPUT, *self.sequences)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FeatureLayout:
        raw = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


def layout_from_transform(cfg: DatasetConfig, tft_output) -> FeatureLayout:
    """Read embedding cardinalities from Transform's output metadata (vocab + OOV, or buckets)."""
    embedded = tuple(transformed_name(k) for k in cfg.embedded_features)
    missing = [k for k in embedded if k not in tft_output.transformed_feature_spec()]
    if missing:
        raise ValueError(f"Transform output lacks features {missing}; was it built from another dataset config?")
    cardinalities = tuple(int(tft_output.num_buckets_for_transformed_feature(k)) for k in embedded)
    if any(c < 1 or math.isnan(c) for c in cardinalities):
        raise ValueError(f"Transform output has empty vocabularies: {dict(zip(embedded, cardinalities, strict=True))}")
    return FeatureLayout(
        dense=tuple(transformed_name(k) for k in cfg.dense),
        embedded=embedded,
        cardinalities=cardinalities,
        label=cfg.label_key,
        task=cfg.task,
        classes=label_classes(cfg, tft_output),
        label_weight=cfg.label_weight_key,
        log1p_target=cfg.task == REGRESSION and cfg.label.log1p,
        **sequence_layout(cfg, tft_output),
    )


def sequence_layout(cfg: DatasetConfig, tft_output) -> dict[str, tuple]:
    """The text features' names, id ranges (reserved ids, Transform's vocabulary, OOV buckets; or a pretrained
    tokenizer's ids), lengths, padding ids and checkpoints."""
    keys = sorted(cfg.text)
    sizes = []
    for key in keys:
        try:
            sizes.append(model_vocab_size(tft_output, key, cfg.text[key]))
        except Exception as err:  # TFT raises several types for a missing vocabulary file
            raise ValueError(
                f"Transform output has no vocabulary for text feature {key!r} ({err}); was it built "
                "from another dataset config?"
            ) from None
    return {
        "sequences": tuple(transformed_name(k) for k in keys),
        "sequence_vocab_sizes": tuple(sizes),
        "sequence_max_lengths": tuple(cfg.text[k].max_length for k in keys),
        "sequence_padding_ids": tuple(padding_id(cfg.text[k]) for k in keys),
        "sequence_checkpoints": tuple(cfg.text[k].checkpoint for k in keys),
    }


class LabelClassesError(StageFailure):
    """Transform's vocabulary of a multiclass label holds fewer values than ``label.num_classes``. The DataGate
    refuses this before Transform where the statistics prove it (components/data_gate/label_classes.py); an
    integer label with gaps in its range is only found here."""


def label_classes(cfg: DatasetConfig, tft_output) -> tuple[str, ...]:
    """A multiclass label's classes from Transform's vocabulary; all ``num_classes`` must have been seen."""
    if cfg.task != MULTICLASS:
        return ()
    classes = tuple(
        v.decode() if isinstance(v, bytes) else str(v) for v in tft_output.vocabulary_by_name(cfg.label_vocabulary)
    )
    if len(classes) < cfg.label.num_classes:
        raise LabelClassesError(
            f"label column {cfg.label.column!r} has only {len(classes)} distinct values in the analyzed data "
            f"({', '.join(classes) or 'none'}), but label.num_classes is {cfg.label.num_classes}; lower "
            "num_classes in the dataset config or give the pipeline data with every class"
        )
    return classes
