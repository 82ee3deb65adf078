"""What the layer above (pipeline/) uses of the DataGate: the component, and the label classes it records.

Each name is imported from its module when first used (components/shared/public_names.py: the CLI starts
without TFX or torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchtfx.components.shared.public_names import lazy_names

if TYPE_CHECKING:  # the names' types, for mypy
    from torchtfx.components.data_gate.component import DataGate
    from torchtfx.components.data_gate.drift import DRIFT_TYPES, load_split_statistics
    from torchtfx.components.data_gate.label_classes import LabelClasses

__all__ = [
    "DRIFT_TYPES",
    "DataGate",
    "LabelClasses",
    "load_split_statistics",
]
__getattr__ = lazy_names(
    __name__,
    {
        "DataGate": "torchtfx.components.data_gate.component",
        "LabelClasses": "torchtfx.components.data_gate.label_classes",
        "DRIFT_TYPES": "torchtfx.components.data_gate.drift",
        "load_split_statistics": "torchtfx.components.data_gate.drift",
    },
)
