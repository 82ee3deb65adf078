"""The optimizer's parameter groups (pretrained body vs new head, no decay on biases and normalization weights,
frozen parameters left out), the warmup schedule, and the mixed-precision decision: on a tiny random-weight
``transformers.BertModel`` built from a config, wrapped with a head as a zoo factory does."""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.worker.optimization import (
    lr_factor,
    make_optimizer,
    make_schedule,
    mixed_precision,
    parameter_groups,
)
from torchtfx.data.config.model import ModelConfigError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

BODY_LR, HEAD_LR = 2e-5, 1e-3


class _Classifier(nn.Module):
    """A pretrained encoder (random weights here) plus a new head, with a normalization layer of its own."""

    def __init__(self) -> None:
        super().__init__()
        config = transformers.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100
        )
        self.encoder = transformers.BertModel(config)
        self.head = nn.Sequential(nn.Linear(32, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(input_ids=ids).last_hidden_state[:, 0])


def _hp(**changes) -> TrainerHParams:
    return TrainerHParams(**{"learning_rate": BODY_LR, "head_learning_rate": HEAD_LR, "weight_decay": 0.01, **changes})


def _group_of(groups: list[dict], model: nn.Module) -> dict[str, dict]:
    by_id = {id(p): group for group in groups for p in group["params"]}
    return {name: by_id[id(p)] for name, p in model.named_parameters() if id(p) in by_id}


def test_the_pretrained_encoder_takes_learning_rate_and_the_new_head_head_learning_rate():
    model = _Classifier()
    placed = _group_of(parameter_groups(model, _hp()), model)
    assert set(placed) == {name for name, _ in model.named_parameters()}  # every parameter, once
    assert {placed[n]["lr"] for n in placed if n.startswith("encoder.")} == {BODY_LR}
    assert {placed[n]["lr"] for n in placed if n.startswith("head.")} == {HEAD_LR}


def test_biases_and_normalization_weights_are_not_decayed_and_the_rest_is():
    model = _Classifier()
    placed = _group_of(parameter_groups(model, _hp()), model)
    no_decay = {n for n, group in placed.items() if group["weight_decay"] == 0.0}
    expected = {n for n in placed if n.endswith(".bias") or "LayerNorm." in n or n.startswith("head.1.")}
    assert no_decay == expected
    assert "encoder.embeddings.LayerNorm.weight" in no_decay and "head.1.weight" in no_decay
    assert placed["encoder.encoder.layer.0.attention.self.query.weight"]["weight_decay"] == 0.01
    assert placed["encoder.embeddings.word_embeddings.weight"]["weight_decay"] == 0.01
    assert placed["head.0.weight"]["weight_decay"] == 0.01


def test_frozen_parameters_are_left_out_of_the_optimizer_and_stay_as_they_were():
    model = _Classifier()
    for param in model.encoder.embeddings.parameters():
        param.requires_grad_(False)
    optimizer = make_optimizer(model, _hp())
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not any(id(p) in in_optimizer for p in model.encoder.embeddings.parameters())
    assert all(id(p) in in_optimizer for p in model.head.parameters())
    before = model.encoder.embeddings.word_embeddings.weight.detach().clone()
    model(torch.randint(0, 100, (4, 8))).sum().backward()
    optimizer.step()
    assert torch.equal(model.encoder.embeddings.word_embeddings.weight, before)


def test_a_model_without_trainable_parameters_is_refused_naming_the_fix():
    model = _Classifier().requires_grad_(False)
    with pytest.raises(ModelConfigError, match=r"no trainable parameters.*unfreeze"):
        make_optimizer(model, _hp())


def test_without_head_learning_rate_every_group_takes_learning_rate():
    model = _Classifier()
    assert {group["lr"] for group in parameter_groups(model, _hp(head_learning_rate=None))} == {BODY_LR}


def test_without_transformers_loaded_every_parameter_is_a_head_parameter(monkeypatch):
    """torchtfx runs without transformers: the rule looks only at a loaded transformers, never imports it."""
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
    monkeypatch.delitem(sys.modules, "transformers.modeling_utils")
    groups = parameter_groups(model, _hp())
    assert "transformers.modeling_utils" not in sys.modules
    assert [(g["name"], g["lr"], len(g["params"])) for g in groups] == [
        ("head", HEAD_LR, 2),
        ("head_no_decay", HEAD_LR, 4),
    ]


def test_groups_keep_their_ratio_of_rates_through_the_schedule():
    model = _Classifier()
    hp = _hp(lr_schedule="linear", warmup_ratio=0.25, epochs=2)
    optimizer = make_optimizer(model, hp)
    schedule = make_schedule(optimizer, hp, steps_per_epoch=4)  # 8 steps, 2 of warmup
    rates = []
    for _ in range(8):
        rates.append({group["name"]: group["lr"] for group in optimizer.param_groups})
        optimizer.step()
        schedule.step()
    assert rates[0]["head"] == 0.0 and rates[1]["head"] == pytest.approx(HEAD_LR / 2)
    assert rates[2] == {
        "pretrained": BODY_LR,
        "pretrained_no_decay": BODY_LR,
        "head": HEAD_LR,
        "head_no_decay": HEAD_LR,
    }
    assert rates[5]["pretrained"] == pytest.approx(BODY_LR / 2) and rates[5]["head"] == pytest.approx(HEAD_LR / 2)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        # 100 steps, warmup 0.1: 10 steps from 0, then 90 steps of decay.
        ("constant", {0: 0.0, 5: 0.5, 10: 1.0, 55: 1.0, 100: 1.0}),
        ("linear", {0: 0.0, 5: 0.5, 10: 1.0, 55: 0.5, 100: 0.0}),
        ("cosine", {0: 0.0, 5: 0.5, 10: 1.0, 55: 0.5, 100: 0.0}),
    ],
)
def test_the_warmup_rises_linearly_from_0_then_the_schedule_runs_to_its_end(schedule, expected):
    factor = lr_factor(_hp(lr_schedule=schedule, warmup_ratio=0.1), total_steps=100)
    assert {step: pytest.approx(factor(step), abs=1e-12) for step in expected} == expected


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_the_schedule_is_transformers_own_with_the_same_warmup(schedule):
    make = {
        "linear": transformers.get_linear_schedule_with_warmup,
        "cosine": transformers.get_cosine_schedule_with_warmup,
    }[schedule]
    hp, total = _hp(lr_schedule=schedule, warmup_ratio=0.06), 250
    theirs = make(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0), math.ceil(0.06 * total), total)
    ours = lr_factor(hp, total)
    for step in range(total + 1):
        assert ours(step) == pytest.approx(theirs.lr_lambdas[0](step), abs=1e-12), step


def test_without_warmup_the_cosine_is_the_one_it_was():
    factor = lr_factor(_hp(lr_schedule="cosine"), total_steps=40)
    assert all(factor(s) == pytest.approx(0.5 * (1 + math.cos(math.pi * s / 40))) for s in range(41))


def test_amp_is_on_for_cuda_training_with_a_grad_scaler_and_off_on_cpu():
    cuda = mixed_precision(torch.device("cuda", 0))
    assert (cuda.enabled, cuda.dtype, cuda.scaled) == (True, torch.float16, True)
    cpu = mixed_precision(torch.device("cpu"))
    assert (cpu.enabled, cpu.dtype, cpu.scaled) == (False, None, False)
