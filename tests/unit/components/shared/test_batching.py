"""Rows per call of a network outside training: every tabular batch as asked, token inputs capped by their ids,
the same rule for the Trainer's gates and ``torchtfx predict`` (tests/unit/pipeline/predict/test_run.py)."""

from __future__ import annotations

from torchtfx.components.shared.batching import rows_per_call


def test_token_inputs_get_at_most_65536_ids_per_call_and_never_fewer_than_64_rows():
    assert rows_per_call(0, 4096) == 4096  # tabular: as asked
    assert rows_per_call(128, 4096) == 512  # all-MiniLM-L6-v2 at max_length 128 (the parity step's 4,096 ran out)
    assert rows_per_call(8, 4096) == 4096
    assert rows_per_call(100_000, 4096) == 64
    assert rows_per_call(0) == 8192
