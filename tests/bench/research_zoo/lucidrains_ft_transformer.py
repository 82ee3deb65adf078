"""FT-Transformer (Gorishniy et al. 2021, "Revisiting Deep Learning Models for Tabular Data").

From tab-transformer-pytorch==0.6.1 (lucidrains): ``tab_transformer_pytorch.FTTransformer``, unmodified.
Every feature becomes a token (categorical ids through the package's embedding table, dense values scaling a
learned per-feature embedding), a [CLS] token is prepended, and the package's Transformer feeds
``Linear(ReLU(LayerNorm(cls)))``.
``residual_streams``: the package's ``num_residual_streams``; 1 here, the paper's plain residuals
(measured 10-100x faster to train); 4, the package's default, keeps its manifold-constrained hyper-connection
residuals (mHC), which export to einsums with ``...`` that torchtfx's translator spells out (TF 2.16's
oneDNN einsum gets them wrong).
"""

from tab_transformer_pytorch import FTTransformer
from torch import nn


class FTTransformerAdapter(nn.Module):
    def __init__(self, spec, dim: int = 32, depth: int = 1, heads: int = 4, residual_streams: int = 1) -> None:
        super().__init__()
        self.net = FTTransformer(
            categories=tuple(spec.cardinalities),
            num_continuous=len(spec.dense_features),
            dim=dim,
            depth=depth,
            heads=heads,
            dim_head=dim // heads,
            dim_out=spec.num_outputs,
            num_residual_streams=residual_streams,
        )
        self.multiclass = spec.task == "multiclass"

    def forward(self, dense, categorical):
        scores = self.net(categorical, dense)  # [batch, num_outputs]
        return scores if self.multiclass else scores.squeeze(-1)


def build(spec, **hparams) -> nn.Module:
    return FTTransformerAdapter(spec, **hparams)
