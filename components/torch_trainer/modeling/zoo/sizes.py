"""The zoo's check of its size hyperparameters (layer widths, layer, head and expert counts), made before any
layer is built, so the model check (pipeline/settings/model_choice.py) refuses a bad one by name before any stage
runs."""

from __future__ import annotations

from collections.abc import Sequence


def check_sizes(**sizes: int | Sequence[int]) -> None:
    """Refuse a size below 1 by its hyperparameter's name: a width of 0 built a layer that passes nothing on
    (``hidden_units: [0]`` built a model whose output was its last bias alone), and -1 failed inside torch as
    "Trying to create tensor with negative dimension -1" (issue #41)."""
    for name, value in sizes.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise ValueError(
                f"hparam {name}={value!r}: sizes must be whole numbers >= 1 (layer widths, layer, head and "
                "expert counts)"
            )
