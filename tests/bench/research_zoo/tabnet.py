"""TabNet (Arik & Pfister, "TabNet: Attentive Interpretable Tabular Learning", AAAI 2021).

Package: pytorch-tabnet==4.1.0, class ``pytorch_tabnet.tab_network.TabNet`` (the network under TabNetClassifier:
categorical embeddings, sequential attentive steps with sparsemax or entmax feature masks, shared and step-specific
GLU feature transformers, ghost batch norm). It reads one float matrix with the categorical columns at ``cat_idxs``
(their ids, cast back to long by its embedder), as the package's TabModel feeds it; the group matrix is the package's
``create_group_matrix([], n_features)`` (no feature groups), as TabModel builds it. One output per class (one logit for
binary, where the package's classifier uses 2 softmax outputs). Its forward returns ``(output, M_loss)``; the package
trains on ``loss - lambda_sparse * M_loss`` (M_loss = mean of sum M log M, the negative mask entropy), so the aux loss
here is ``-lambda_sparse * M_loss`` with the package's default lambda_sparse=1e-3.
"""

import torch
from pytorch_tabnet.tab_network import TabNet
from pytorch_tabnet.utils import create_group_matrix
from torch import nn


class TabNetAdapter(nn.Module):
    def __init__(self, spec, lambda_sparse: float, cat_emb_dim: int, **tabnet_kwargs) -> None:
        super().__init__()
        n_dense, n_cat = len(spec.dense_features), len(spec.categorical_features)
        self.lambda_sparse, self.squeeze = lambda_sparse, spec.task != "multiclass"
        self.tabnet = TabNet(
            n_dense + n_cat,
            spec.num_outputs,
            cat_idxs=list(range(n_dense, n_dense + n_cat)),
            cat_dims=list(spec.cardinalities),
            cat_emb_dim=[cat_emb_dim] * n_cat,
            group_attention_matrix=create_group_matrix([], n_dense + n_cat),
            **tabnet_kwargs,
        )

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, m_loss = self.tabnet(torch.cat([dense, categorical.to(dense.dtype)], 1))
        return (out.squeeze(-1) if self.squeeze else out), -self.lambda_sparse * m_loss


def build(
    spec,
    n_d: int = 16,
    n_a: int = 16,
    n_steps: int = 3,
    gamma: float = 1.3,
    cat_emb_dim: int = 4,
    virtual_batch_size: int = 32,
    momentum: float = 0.02,
    mask_type: str = "sparsemax",
    lambda_sparse: float = 1e-3,
) -> TabNetAdapter:
    return TabNetAdapter(
        spec,
        lambda_sparse,
        cat_emb_dim,
        n_d=n_d,
        n_a=n_a,
        n_steps=n_steps,
        gamma=gamma,
        virtual_batch_size=virtual_batch_size,
        momentum=momentum,
        mask_type=mask_type,
    )
