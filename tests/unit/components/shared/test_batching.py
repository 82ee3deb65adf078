"""Rows per call of a network outside training: every tabular batch as asked, token inputs capped by their ids,
the same rule for the Trainer's gates and ``torchtfx predict``."""

from __future__ import annotations

from torchtfx.components.shared.batching import rows_per_call
from torchtfx.pipeline.predict.inference import MAX_BATCH, ServingSignatureHandler


def test_token_inputs_get_at_most_65536_ids_per_call_and_never_fewer_than_64_rows():
    assert rows_per_call(0, 4096) == 4096  # tabular: as asked
    assert rows_per_call(128, 4096) == 512  # all-MiniLM-L6-v2 at max_length 128 (the parity step's 4,096 ran out)
    assert rows_per_call(8, 4096) == 4096
    assert rows_per_call(100_000, 4096) == 64
    assert rows_per_call(0) == 8192


def test_predict_calls_a_text_model_on_at_most_65536_ids():
    handler = ServingSignatureHandler("/nowhere", max_batch=rows_per_call(128, MAX_BATCH))
    assert handler.batch_elements_kwargs() == {"min_batch_size": 64, "max_batch_size": 512}
