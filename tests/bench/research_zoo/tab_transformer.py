"""TabTransformer (Huang et al. 2020, "TabTransformer: Tabular Data Modeling Using Contextual Embeddings").

From tab-transformer-pytorch==0.6.1 (lucidrains): ``tab_transformer_pytorch.TabTransformer``, unmodified.
The categorical ids go through the package's contextual embeddings (a Transformer over one token per
categorical feature); the dense features are layer-normed and concatenated before the package's MLP head.
``residual_streams``: the package's ``num_residual_streams``; 1 here, the paper's plain residuals
(measured 10-100x faster to train); 4, the package's default, keeps its manifold-constrained hyper-connection
residuals (mHC), which export to einsums with ``...`` that torchtfx's translator spells out (TF 2.16's
oneDNN einsum gets them wrong).
"""

from tab_transformer_pytorch import TabTransformer
from torch import nn


class TabTransformerAdapter(nn.Module):
    def __init__(self, spec, dim: int = 32, depth: int = 1, heads: int = 4, residual_streams: int = 1) -> None:
        super().__init__()
        self.net = TabTransformer(
            categories=tuple(spec.cardinalities),
            num_continuous=len(spec.dense_features),
            dim=dim,
            depth=depth,
            heads=heads,
            dim_head=dim // heads,
            dim_out=spec.num_outputs,
            num_residual_streams=residual_streams,
            mlp_hidden_mults=(2,),
            mlp_act=nn.ReLU(),
        )
        self.multiclass = spec.task == "multiclass"

    def forward(self, dense, categorical):
        scores = self.net(categorical, dense)  # [batch, num_outputs]; ids >= 0, so no special tokens
        return scores if self.multiclass else scores.squeeze(-1)


def build(spec, **hparams) -> nn.Module:
    return TabTransformerAdapter(spec, **hparams)
