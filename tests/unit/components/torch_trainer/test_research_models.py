"""Training that accepts research code (issue #27 point 3): parameters the loss never reaches, models returning
``(scores, aux_loss)``, and eval outputs that are not deterministic, each caught or handled before it costs a run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests import helpers
from tests.unit.components.torch_trainer import research_models
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.handoff.job import TrainResult
from torchtfx.components.torch_trainer.handoff.shards import ArraySplit
from torchtfx.components.torch_trainer.modeling.factory import build_model
from torchtfx.components.torch_trainer.modeling.heads import ExportHead, ModelOutputError, split_output
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.components.torch_trainer.torch_to_onnx.onnx_export import ExportError, export_onnx
from torchtfx.components.torch_trainer.worker.in_process import run_in_process
from torchtfx.data.config.model import ModelConfig, ModelConfigError

MODULE = "tests.unit.components.torch_trainer.research_models"
SPEC = ModelSpec(("a", "b"), ("x",), (5,))


def _job(tmp_path, tiny_taxi, factory: str, **trainer):
    model = ModelConfig(factory=f"{MODULE}:{factory}")
    return helpers.tiny_train_job(tmp_path, tiny_taxi, num_workers=1, model=model, **trainer)


def test_parameters_the_loss_never_reaches_train_with_ddp_told_and_named(tmp_path, tiny_taxi):
    job = _job(tmp_path, tiny_taxi, "attentive_mask")
    run_in_process(job, tmp_path / "logs" / "train.log", threads=2)
    result = TrainResult.load(tmp_path / "run" / contracts.RESULT_FILE)
    assert result.epochs_run == 3 and result.onnx_max_abs_diff < 1e-5
    log = (tmp_path / "logs" / "train.log").read_text()
    assert "find_unused_parameters=True" in log and "decoder.weight, model.decoder.bias" not in log
    assert "decoder.bias, decoder.weight" in log


def test_an_aux_loss_is_added_to_the_task_loss_and_plain_ddp_kept(tmp_path, tiny_taxi):
    """``balance`` reaches only the aux loss: training moves it towards 0 only if the aux loss is trained on."""
    job = _job(tmp_path, tiny_taxi, "aux_loss_mixture", learning_rate=0.05)
    run_in_process(job, tmp_path / "logs" / "train.log", threads=2)
    state = torch.load(tmp_path / "model" / contracts.STATE_DICT_FILE, weights_only=True)
    assert abs(float(state["balance"])) < 2.0  # starts at 3.0; without the aux loss its gradient is 0
    assert "find_unused_parameters" not in (tmp_path / "logs" / "train.log").read_text()  # all reached


def test_the_export_drops_the_aux_loss():
    head = ExportHead(research_models.aux_loss_mixture(SPEC), "binary").eval()
    out = head(torch.zeros(4, 2), torch.zeros(4, 1, dtype=torch.long))
    assert isinstance(out, torch.Tensor) and out.shape == (4,)


@pytest.mark.parametrize(
    ("output", "aux"),
    [
        ((torch.zeros(3), torch.tensor(2.0)), 2.0),
        ((torch.zeros(3), [torch.tensor(1.0), torch.tensor([2.0])]), 3.0),
        ((torch.zeros(3), {"balance": torch.tensor(0.5)}), 0.5),
        (torch.zeros(3), None),
    ],
)
def test_split_output_accepts_scores_or_scores_and_aux_losses(output, aux):
    scores, got = split_output(output)
    assert scores.shape == (3,)
    assert (got is None) if aux is None else float(got) == aux


@pytest.mark.parametrize("output", [(torch.zeros(3), torch.zeros(3)), (torch.zeros(3),), "scores"])
def test_split_output_refuses_anything_else_naming_the_shape_it_needs(output):
    with pytest.raises(ModelOutputError, match=r"\(scores, aux_loss\)"):
        split_output(output)


def test_random_eval_output_is_caught_when_the_model_is_built_naming_the_module():
    config = ModelConfig(factory=f"{MODULE}:noisy_routing")
    with pytest.raises(ModelConfigError, match=r"module gate \(NoisyGate\).*self\.training"):
        build_model(config, SPEC)


def test_random_eval_output_is_caught_before_export(tmp_path):
    head = ExportHead(research_models.NoisyRouting(SPEC), "binary")
    rng = np.random.default_rng(0)
    split = ArraySplit(rng.normal(size=(32, 2)).astype(np.float32), rng.integers(0, 5, (32, 1)), np.zeros(32))
    with pytest.raises(ExportError, match=r"module model\.gate \(NoisyGate\)"):
        export_onnx(head, split, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
