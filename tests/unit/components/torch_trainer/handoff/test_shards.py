"""An eval split's rows per forward call count the ids of every text feature."""

from __future__ import annotations

import numpy as np

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, eval_batch_size


def test_an_eval_split_counts_the_ids_of_all_its_text_features():
    split = ArraySplit(
        np.zeros((4, 0), np.float32),
        np.zeros((4, 1), np.int64),
        np.zeros(4, np.float32),
        (np.zeros((4, 256), np.int64), np.zeros((4, 256), np.int64)),
        ("a_xf", "b_xf"),
    )
    assert eval_batch_size(split) == 128
