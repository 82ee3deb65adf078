"""TabM (Gorishniy et al., "TabM: Advancing Tabular Deep Learning with Parameter-Efficient Ensembling", ICLR 2025).

Package: tabm==0.0.3, class ``tabm.TabM`` (``arch_type="tabm"``: k BatchEnsemble MLPs sharing their weights, one-hot
categorical inputs, plain numeric inputs), built with ``TabM.make``. As in the paper, training treats the k members'
predictions as k models (the loss is the mean of their losses, the adapter's ``loss``) and inference averages the
members' predictions: the mean probability for classification (served as its logit), the mean for regression.
"""

import torch
import torch.nn.functional as F
from tabm import TabM
from torch import nn

from torchtfx.components.torch_trainer.modeling.heads import task_loss


class TabMEnsemble(nn.Module):
    def __init__(self, spec, **tabm_kwargs) -> None:
        super().__init__()
        self.task = spec.task
        self.tabm = TabM.make(
            n_num_features=len(spec.dense_features),
            cat_cardinalities=list(spec.cardinalities),
            d_out=spec.num_outputs,
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


def build(spec, k: int = 8, n_blocks: int = 2, d_block: int = 64, dropout: float = 0.1) -> TabMEnsemble:
    return TabMEnsemble(spec, k=k, n_blocks=n_blocks, d_block=d_block, dropout=dropout, arch_type="tabm")
