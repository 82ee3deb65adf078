"""FT-Transformer from rtdl_revisiting_models==0.0.2 (Gorishniy et al., "Revisiting Deep Learning Models for
Tabular Data", NeurIPS 2021, Section 3.3): ``rtdl_revisiting_models.FTTransformer``.

Adapter: ``FTTransformer(n_cont_features=n_dense, cat_cardinalities=spec.cardinalities, ...)`` takes
``(dense, categorical)`` as its own ``(x_cont, x_cat)`` (the package embeds the categorical features itself);
``[batch, 1]`` is squeezed to ``[batch]``. The three dropouts are off in eval mode.
"""

import torch
from rtdl_revisiting_models import FTTransformer
from torch import nn


class RtdlFTTransformer(nn.Module):
    def __init__(self, spec, **backbone_kwargs) -> None:
        super().__init__()
        self.model = FTTransformer(
            n_cont_features=len(spec.dense_features),
            cat_cardinalities=list(spec.cardinalities),
            d_out=spec.num_outputs,
            **backbone_kwargs,
        )

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        out = self.model(dense, categorical)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def build(
    spec,
    n_blocks: int = 1,
    d_block: int = 32,
    attention_n_heads: int = 4,
    attention_dropout: float = 0.1,
    ffn_d_hidden_multiplier: float = 4 / 3,
    ffn_dropout: float = 0.0,
    residual_dropout: float = 0.0,
    ffn_activation: str = "ReGLU",
) -> nn.Module:
    return RtdlFTTransformer(
        spec,
        n_blocks=n_blocks,
        d_block=d_block,
        attention_n_heads=attention_n_heads,
        attention_dropout=attention_dropout,
        ffn_d_hidden=None,
        ffn_d_hidden_multiplier=ffn_d_hidden_multiplier,
        ffn_dropout=ffn_dropout,
        residual_dropout=residual_dropout,
        ffn_activation=ffn_activation,
    )
