"""Rows per call of a network outside training (evaluation, the parity and drift gates, ``torchtfx predict``): one
rule for the torch model and the served SavedModel alike. No torch or TensorFlow here: the predict process
imports it."""

from __future__ import annotations

EVAL_ROWS = 8192
EVAL_TOKENS = 65536


def rows_per_call(tokens: int, most: int = EVAL_ROWS) -> int:
    """Rows per forward call outside training (evaluation, parity, drift): ``most`` without token inputs; with
    ``tokens`` ids per row at most ``EVAL_TOKENS`` ids, since activations grow with the length (a Transformer's
    attention scores with its square: 8192 rows of 128 tokens, 4 heads, 2.2 GB). Measured: the parity step's
    4,096-row calls took all-MiniLM-L6-v2 (12 heads, 128 tokens) past 22 GB of RSS on every review, and the
    Trainer was killed by the kernel."""
    return most if not tokens else max(64, min(most, EVAL_TOKENS // tokens))
