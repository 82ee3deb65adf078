"""The parity step's check of a pretrained text feature's ids against the checkpoint's own tokenizer."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.fixtures.tiny_bert import save_tiny_bert
from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
from torchtfx.components.torch_trainer.savedmodel.tokenizer_check import PretrainedTokenizers, TokenizerParityError

tokenizers = pytest.importorskip("tokenizers")
TEXTS = ["A gripping film!", "", "dull, slow and far too long; I left early and never came back to see it"]
MAX_LENGTH = 8


def _layout(checkpoint) -> FeatureLayout:
    return FeatureLayout(
        dense=(),
        embedded=(),
        cardinalities=(),
        label="y",
        sequences=("review_xf",),
        sequence_vocab_sizes=(100,),
        sequence_max_lengths=(MAX_LENGTH,),
        sequence_padding_ids=(0,),
        sequence_checkpoints=(str(checkpoint),),
    )


def _examples(texts) -> tf.Tensor:
    def example(text):
        feature = (
            {} if text is None else {"review": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
        )
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    return tf.constant([example(t) for t in texts])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("bert") / "bert")


def _ids(checkpoint, texts) -> np.ndarray:
    tokenizer = tokenizers.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_LENGTH)
    tokenizer.enable_padding(pad_id=0, length=MAX_LENGTH)
    return np.array([e.ids for e in tokenizer.encode_batch(texts)], np.int64)


def test_the_served_ids_that_tokenizers_gives_pass_and_are_counted(checkpoint):
    check = PretrainedTokenizers(_layout(checkpoint))
    check.compare(_examples([*TEXTS, None]), {"review_xf": _ids(checkpoint, [*TEXTS, ""])})
    assert check.describe() == "review: 4 texts id for id"


def test_one_id_off_stops_the_run_naming_the_text_and_both_id_lists(checkpoint):
    ids = _ids(checkpoint, TEXTS)
    ids[2, 3] += 1
    with pytest.raises(
        TokenizerParityError, match=r"1 of 3 texts of 'review'.*'dull, slow.*served ids \[.*tokenizers'"
    ):
        PretrainedTokenizers(_layout(checkpoint)).compare(_examples(TEXTS), {"review_xf": ids})


def test_a_layout_without_checkpoints_checks_nothing():
    layout = FeatureLayout(dense=("a",), embedded=(), cardinalities=(), label="y")
    check = PretrainedTokenizers(layout)
    check.compare(_examples(TEXTS), {})
    assert not check.texts
