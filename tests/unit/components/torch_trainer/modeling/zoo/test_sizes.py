"""The zoo refuses a layer width, layer, head or expert count below 1 by its hyperparameter's name, at the model
check (build_model), before any layer is built."""

from __future__ import annotations

import re

import pytest

from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.data.config.model import ModelConfig, ModelConfigError

TABULAR = ModelSpec(dense_features=("a", "b"), categorical_features=("x",), cardinalities=(5,))
TEXT = ModelSpec(("a",), (), (), sequences=(SequenceInput("review_xf", 50, 8),))


@pytest.mark.parametrize(
    ("factory", "hparams"),
    [
        ("mlp", {"hidden_units": [-1, 0]}),
        ("mlp", {"hidden_units": [0]}),  # built a model whose output was its last bias alone
        ("mlp", {"max_embedding_dim": 0}),
        ("dcn", {"hidden_units": [64, 0]}),
        ("resnet", {"d": 0}),
        ("resnet", {"n_blocks": -2}),
        ("ft_transformer", {"n_heads": 0}),
        ("ft_transformer", {"d_token": -8}),
        ("text_cnn", {"kernel_sizes": [3, 0]}),
        ("text_cnn", {"filters": 0}),
        ("text_moe", {"experts": 0}),
        ("text_moe", {"top_k": 0}),
        ("text_transformer", {"d_ffn": 0}),
        ("text_transformer", {"head_hidden": -1}),
        ("hf_sequence_classifier", {"head_hidden": 0}),  # refused before any checkpoint is looked for
    ],
)
def test_a_size_below_one_is_refused_by_name(factory, hparams):
    spec = TEXT if factory.startswith("text_") else TABULAR
    ((name, value),) = hparams.items()
    refusal = re.escape(f"hparam {name}={value!r}: sizes must be whole numbers >= 1")
    with pytest.raises(ModelConfigError, match=refusal):
        build_model(ModelConfig(factory=factory, hparams=hparams), spec)
