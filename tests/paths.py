"""Where the tests find the repository's own files (kubeflow/, tests/golden/, the sources): tests run from a
checkout, while the installed product finds what it ships through torchtfx.data.resources."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
