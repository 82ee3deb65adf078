"""The prediction tasks a dataset can declare (``task:`` in its YAML), defined once for every layer."""

from __future__ import annotations

BINARY = "binary"
MULTICLASS = "multiclass"
REGRESSION = "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
