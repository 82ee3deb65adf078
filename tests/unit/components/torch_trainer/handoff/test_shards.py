"""Rows per forward call outside training: every tabular row batch as asked, token inputs capped by their ids."""

from __future__ import annotations

import numpy as np

from torchtfx.components.torch_trainer.handoff.shards import ArraySplit, eval_batch_size, rows_per_call


def test_token_inputs_get_at_most_65536_ids_per_call_and_never_fewer_than_64_rows():
    assert rows_per_call(0, 4096) == 4096  # tabular: as asked
    assert rows_per_call(128, 4096) == 512  # all-MiniLM-L6-v2 at max_length 128 (the parity step's 4,096 ran out)
    assert rows_per_call(8, 4096) == 4096
    assert rows_per_call(100_000, 4096) == 64
    assert rows_per_call(0) == 8192


def test_an_eval_split_counts_the_ids_of_all_its_text_features():
    split = ArraySplit(
        np.zeros((4, 0), np.float32),
        np.zeros((4, 1), np.int64),
        np.zeros(4, np.float32),
        (np.zeros((4, 256), np.int64), np.zeros((4, 256), np.int64)),
        ("a_xf", "b_xf"),
    )
    assert eval_batch_size(split) == 128
