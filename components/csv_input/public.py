"""What the layer above (pipeline/) uses of ExampleGen: the component (its CSV core is data/csv_reader/).

Each name is imported from its module when first used (components/shared/public_names.py: the CLI starts
without TFX or torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchtfx.components.shared.public_names import lazy_names

if TYPE_CHECKING:  # the names' types, for mypy
    from torchtfx.components.csv_input.component import checked_csv_example_gen

__all__ = [
    "checked_csv_example_gen",
]
__getattr__ = lazy_names(
    __name__,
    {
        "checked_csv_example_gen": "torchtfx.components.csv_input.component",
    },
)
