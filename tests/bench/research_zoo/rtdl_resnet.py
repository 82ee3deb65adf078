"""ResNet from rtdl_revisiting_models==0.0.2 (Gorishniy et al., "Revisiting Deep Learning Models for Tabular
Data", NeurIPS 2021, Section 3.2): ``rtdl_revisiting_models.ResNet``.

Adapter: categorical ids -> the package's ``CategoricalEmbeddings`` (one table per feature), flattened and
concatenated after the dense features -> ``ResNet(d_in, d_out=num_outputs)``; ``[batch, 1]`` is squeezed to
``[batch]``. Dropout is off and BatchNorm uses its running statistics in eval mode.
"""

import torch
from rtdl_revisiting_models import CategoricalEmbeddings, ResNet
from torch import nn


class RtdlResNet(nn.Module):
    def __init__(
        self,
        spec,
        n_blocks: int,
        d_block: int,
        d_hidden_multiplier: float,
        dropout1: float,
        dropout2: float,
        d_cat_embedding: int,
    ) -> None:
        super().__init__()
        self.cat_embeddings = CategoricalEmbeddings(list(spec.cardinalities), d_cat_embedding)
        d_in = len(spec.dense_features) + len(spec.cardinalities) * d_cat_embedding
        self.resnet = ResNet(
            d_in=d_in,
            d_out=spec.num_outputs,
            n_blocks=n_blocks,
            d_block=d_block,
            d_hidden_multiplier=d_hidden_multiplier,
            dropout1=dropout1,
            dropout2=dropout2,
        )

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = torch.cat([dense, self.cat_embeddings(categorical).flatten(1)], dim=1)
        out = self.resnet(x)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def build(
    spec,
    n_blocks: int = 2,
    d_block: int = 64,
    d_hidden_multiplier: float = 2.0,
    dropout1: float = 0.1,
    dropout2: float = 0.0,
    d_cat_embedding: int = 8,
) -> nn.Module:
    return RtdlResNet(spec, n_blocks, d_block, d_hidden_multiplier, dropout1, dropout2, d_cat_embedding)
