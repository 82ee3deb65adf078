"""How a component's public module (``components/<component>/public.py``) hands out its names: each is imported
from the module that defines it when first asked for, so that importing the public module costs nothing.

Measured: the CLI starts in 0.2 s without TFX, TensorFlow, MLflow or torch; importing a component's TFX component
module (``component.py``) takes 5 s, and the Trainer's model factory imports torch. A public module that imported
its names at once would make every CLI command pay for the heaviest of them. A package ``__init__`` is no place
for them either: the DDP workers import ``torch_trainer.worker.*`` and so run ``torch_trainer/__init__.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(public: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of the public module ``public``: ``homes`` maps each public name to the dotted
    path of the module that defines it."""

    def getattr_(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {public!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    return getattr_
