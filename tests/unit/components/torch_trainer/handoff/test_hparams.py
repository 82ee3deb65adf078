"""The fine-tuning hyperparameters' bounds: ``head_learning_rate`` and ``warmup_ratio``, each refused value named
with its range and what it means."""

from __future__ import annotations

import pytest

from torchtfx.components.torch_trainer.handoff.hparams import HParamsError, TrainerHParams


def test_the_defaults_fine_tune_as_before_one_rate_and_no_warmup():
    hp = TrainerHParams()
    assert (hp.head_learning_rate, hp.warmup_ratio, hp.lr_schedule) == (None, 0.0, "constant")


def test_values_given_as_yaml_text_are_read_as_numbers_and_survive_the_json_handoff():
    hp = TrainerHParams.parse({"head_learning_rate": "1e-3", "warmup_ratio": "0.06", "lr_schedule": "linear"})
    assert TrainerHParams.from_json(hp.to_json()) == hp
    assert (hp.head_learning_rate, hp.warmup_ratio) == (1e-3, 0.06)


@pytest.mark.parametrize(
    ("field", "value", "refusal"),
    [
        ("head_learning_rate", 0, "head_learning_rate: must be a finite number > 0, or null for learning_rate's"),
        ("head_learning_rate", "inf", "head_learning_rate: must be a finite number > 0"),
        ("head_learning_rate", True, "head_learning_rate: must be a finite number > 0"),
        ("warmup_ratio", 1.0, "warmup_ratio: must be a fraction of all planned steps from 0 to below 1 (0.1: the"),
        ("warmup_ratio", -0.1, "warmup_ratio: must be a fraction of all planned steps from 0 to below 1"),
        ("warmup_ratio", float("nan"), "warmup_ratio: must be a fraction of all planned steps from 0 to below 1"),
        ("warmup_ratio", "ten percent", "warmup_ratio: must be a fraction of all planned steps from 0 to below 1"),
        ("lr_schedule", "polynomial", "lr_schedule: Input should be 'constant', 'cosine' or 'linear'"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_range(field, value, refusal):
    with pytest.raises(HParamsError) as err:
        TrainerHParams.parse({field: value})
    assert refusal in str(err.value) and "\n" not in str(err.value).strip()
