"""The ``model:`` section: which factory builds the network and with which hyperparameters.

``factory`` is a zoo name (``mlp``, ``resnet``, ``dcn``, ``ft_transformer``; with text features also
``text_transformer``, ``text_moe``, ``text_cnn``, and ``hf_sequence_classifier`` for a ``tokenizer: pretrained``
feature's checkpoint), ``package.module:function`` for a factory in an installed
package, or ``path/to/file.py:function`` for a file of the user's. The factory is resolved and loaded by
:mod:`torchtfx.components.torch_trainer.modeling.factory`; this module only parses.
"""

from __future__ import annotations

from typing import Any

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig, set_by_torchtfx

DEFAULT_MODEL = "mlp"


class ModelConfigError(ConfigError):
    """The model section (factory or its hyperparameters) is malformed or cannot be loaded."""


class ModelConfig(StrictConfig):
    config_error = ModelConfigError

    factory: str = DEFAULT_MODEL
    hparams: dict[str, Any] = {}
    # A file factory travels as its source text, so that every process that trains or checks the model
    # (torchrun workers, PyTorchJob replicas, the Kubeflow Trainer step) loads the code that was named when
    # the pipeline was built, and so that TFX's cache key changes when the file does. Set by
    # ``modeling.factory.embed_source``; a config file's is refused: that text would run instead of the factory.
    source: str | None = None

    _source_set_by_torchtfx = set_by_torchtfx(
        "source",
        "remove it and name the file in model.factory ('path/to/file.py:function'): torchtfx reads that file "
        "when the pipeline is built and carries its text to every training process",
    )

    @pydantic.field_validator("factory")
    @classmethod
    def _well_formed(cls, factory: str) -> str:
        factory = factory.strip()
        if not factory:
            raise ValueError("model factory is empty; name a zoo model (mlp) or 'module:function'")
        if ":" not in factory and (factory.endswith(".py") or "." in factory or "/" in factory):
            raise ValueError(
                f"model factory {factory!r} names no function; write 'path/to/file.py:build' or 'package.module:build'"
            )
        return factory
