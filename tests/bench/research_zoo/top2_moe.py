"""Sparsely-gated top-2 mixture of experts (Shazeer et al. 2017, "Outrageously Large Neural Networks").

From mixture-of-experts==0.2.3 (lucidrains): ``mixture_of_experts.MoE``, unmodified. The adapter turns every
feature into a ``dim``-wide token (dense: ``x_j * W_j + b_j``; categorical: a row of one shared embedding
table), the MoE sends each token to its top-2 experts, the tokens plus the MoE output are mean-pooled and a
linear layer gives the scores. ``forward`` returns ``(scores, aux_loss)``, the MoE's auxiliary loss (scaled by
its ``loss_coef``). The second expert is kept at random in training (the package's default) and always in
eval (the deterministic ``second_policy_eval="all"``; the ``"threshold"`` policy fails to broadcast in 0.2.3).

``routing="token"`` (default): every token is its own routing group (``[batch * features, 1, dim]``), so no
token is dropped for capacity and the aux loss penalizes confident gates rather than balancing a group.
``routing="row"``: a row's features form one group (``[batch, features, dim]``, the package's sequence use,
with a real load-balancing loss); its ``safe_one_hot`` depth, ``max(positions.max() + 2, capacity)``, is a
Python ``max`` the ONNX tracer freezes on the trace batch, so that export fails at other batches.
"""

import torch
from mixture_of_experts import MoE
from torch import nn


class Top2MoEAdapter(nn.Module):
    def __init__(self, spec, dim: int = 32, num_experts: int = 4, hidden_dim: int = 64, routing: str = "token"):
        super().__init__()
        if routing not in ("token", "row"):
            raise ValueError(f"routing is 'token' or 'row', got {routing!r}")
        n_dense, cards = len(spec.dense_features), tuple(spec.cardinalities)
        self.dense_weight = nn.Parameter(torch.randn(n_dense, dim) / dim**0.5)
        self.dense_bias = nn.Parameter(torch.zeros(n_dense, dim))
        self.register_buffer("offsets", torch.tensor((0, *cards[:-1])).cumsum(0), persistent=False)
        self.embedding = nn.Embedding(sum(cards), dim)
        self.moe = MoE(dim=dim, num_experts=num_experts, hidden_dim=hidden_dim, second_policy_eval="all")
        self.head = nn.Linear(dim, spec.num_outputs)
        self.routing, self.multiclass = routing, spec.task == "multiclass"

    def forward(self, dense, categorical):
        tokens = torch.cat(
            [dense.unsqueeze(-1) * self.dense_weight + self.dense_bias, self.embedding(categorical + self.offsets)],
            dim=1,
        )  # [batch, features, dim]
        groups = tokens.reshape(-1, 1, tokens.shape[-1]) if self.routing == "token" else tokens
        mixed, aux_loss = self.moe(groups)
        scores = self.head((tokens + mixed.reshape(tokens.shape)).mean(dim=1))
        return (scores if self.multiclass else scores.squeeze(-1)), aux_loss


def build(spec, **hparams) -> nn.Module:
    return Top2MoEAdapter(spec, **hparams)
