"""Lookup tables made once per graph: inside TFT's traced preprocessing_fn they are lifted out of it and tracked
in the SavedModel (or they would be filled again at every call: every batch, every request); anywhere else (eager
code, a plain tf.function, a TF1 graph) they are made in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform.graph_context import TFGraphContext

T = TypeVar("T")


def _inside_tft_export() -> bool:
    try:
        return TFGraphContext.get_module_to_export() is not None
    except AttributeError:
        # TFT 1.16 restores the thread's state to None when a TFGraphContext exits, and get_module_to_export then
        # reads None.module_to_export: measured in make test, where a plain tf.function ran after a TFT test.
        return False


def tracked(factory: Callable[[], T], name: str) -> T:
    """``factory()``'s object, tracked by TFT when traced for its SavedModel (module docstring)."""
    if tf.inside_function() and _inside_tft_export():
        return tft.make_and_track_object(factory, name=name)
    return factory()
