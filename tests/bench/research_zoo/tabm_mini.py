"""TabM-mini with numeric embeddings (Gorishniy et al., "TabM: Advancing Tabular Deep Learning with Parameter-Efficient
Ensembling", ICLR 2025; embeddings: Gorishniy et al., "On Embeddings for Numerical Features in Tabular Deep Learning",
NeurIPS 2022).

Package: tabm==0.0.3, class ``tabm.TabM`` built with ``TabM.make(arch_type="tabm-mini")``: one shared MLP whose input
alone is scaled by k per-member vectors, the dense features first embedded by rtdl_num_embeddings==0.0.12 (the
embeddings TabM accepts). ``embeddings="periodic"`` (default): ``PeriodicEmbeddings(lite=False)``.
``embeddings="piecewise_linear"``: the paper's TabM-mini-dagger, ``PiecewiseLinearEmbeddings(version="B")`` (TabM
requires B); the paper's bins are training-data quantiles (``compute_bins``), which a factory has not got, so the edges
are standard-normal quantiles (the pipeline z-scores dense features), outer edges -3 and 3, the same for every feature.
Training: the mean of the k members' losses (the adapter's ``loss``); inference: the members' mean prediction (mean
probability for classification, served as its logit; mean for regression), as in the paper.
"""

import torch
import torch.nn.functional as F
from rtdl_num_embeddings import PeriodicEmbeddings, PiecewiseLinearEmbeddings
from tabm import TabM
from torch import nn

from torchtfx.components.torch_trainer.modeling.heads import task_loss


def standard_normal_bins(n_features: int, n_bins: int, outer: float = 3.0) -> list[torch.Tensor]:
    inner = torch.special.ndtri(torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)[1:-1])
    return [torch.cat([torch.tensor([-outer]), inner.float(), torch.tensor([outer])]) for _ in range(n_features)]


class TabMMini(nn.Module):
    def __init__(self, spec, embeddings: str, d_embedding: int, n_frequencies: int, n_bins: int, **tabm_kwargs) -> None:
        super().__init__()
        self.task, n_dense = spec.task, len(spec.dense_features)
        num_embeddings = {
            "periodic": lambda: PeriodicEmbeddings(n_dense, d_embedding, n_frequencies=n_frequencies, lite=False),
            "piecewise_linear": lambda: PiecewiseLinearEmbeddings(
                standard_normal_bins(n_dense, n_bins), d_embedding, activation=False, version="B"
            ),
        }[embeddings]()
        self.tabm = TabM.make(
            n_num_features=n_dense,
            cat_cardinalities=list(spec.cardinalities),
            d_out=spec.num_outputs,
            num_embeddings=num_embeddings,
            arch_type="tabm-mini",
            **tabm_kwargs,
        )
        self.member_loss = task_loss(spec.task)

    def forward(self, dense: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        z = self.tabm(dense, categorical)  # [batch, k, num_outputs]
        z = z.squeeze(-1) if self.task != "multiclass" else z
        if self.training:
            return z  # the k members' scores, for ``loss``
        if self.task == "binary":  # logit of the mean probability: log(mean p) - log(mean (1 - p))
            return torch.logsumexp(F.logsigmoid(z), 1) - torch.logsumexp(F.logsigmoid(-z), 1)
        if self.task == "multiclass":  # log of the mean probabilities (the softmax drops the constant -log k)
            return torch.logsumexp(torch.log_softmax(z, -1), 1)
        return z.mean(1)

    def loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean of the k members' losses, each member seeing the whole batch (TabM's training objective)."""
        return self.member_loss(outputs.flatten(0, 1), labels.repeat_interleave(outputs.shape[1]))


def build(
    spec,
    embeddings: str = "periodic",
    k: int = 8,
    n_blocks: int = 2,
    d_block: int = 64,
    dropout: float = 0.1,
    d_embedding: int = 16,
    n_frequencies: int = 16,
    n_bins: int = 16,
) -> TabMMini:
    return TabMMini(
        spec, embeddings, d_embedding, n_frequencies, n_bins, k=k, n_blocks=n_blocks, d_block=d_block, dropout=dropout
    )
