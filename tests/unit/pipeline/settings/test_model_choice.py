"""The model the settings chose is checked against the dataset's task before anything runs (which model and
precision they choose: tests/unit/pipeline/settings/test_resolve.py)."""

from __future__ import annotations

import pytest

from tests.fixtures.tiny_bert import save_tiny_bert
from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.spec import SequenceInput
from torchtfx.data.config.dataset import DatasetConfigError, load_dataset_config
from torchtfx.data.config.model import ModelConfig, ModelConfigError
from torchtfx.data.config.serving_precision import ServingConfig, ServingPrecisionError
from torchtfx.pipeline.cli.setting_options import parse_model_hparams
from torchtfx.pipeline.settings import model_choice
from torchtfx.pipeline.settings.declared import LOCAL
from torchtfx.pipeline.settings.layers import command_line_layer
from torchtfx.pipeline.settings.model_choice import checked_hparams, checked_model
from torchtfx.pipeline.settings.resolve import resolve_settings


def _yaml(tmp_path, base: str, extra: str, replace: tuple[str, str] = ("", "")):
    path = tmp_path / f"{base}.yaml"
    path.write_text((PROJECT_ROOT / "data" / "datasets" / f"{base}.yaml").read_text().replace(*replace) + extra)
    return load_dataset_config(path)


def test_a_factory_is_checked_against_the_dataset_s_task(tmp_path):
    model = tmp_path / "binary_only.py"
    model.write_text(
        "import torch\nfrom torch import nn\n\n\nclass One(nn.Module):\n    def __init__(self, spec):\n"
        "        super().__init__()\n        self.lin = nn.Linear(len(spec.dense_features), 1)\n\n"
        "    def forward(self, dense, categorical):\n        return self.lin(dense).squeeze(1)\n\n\n"
        "def build(spec):\n    return One(spec)\n"
    )
    hparams = TrainerHParams(model=ModelConfig(factory=f"{model}:build"))
    checked = checked_hparams(load_dataset_config("taxi"), hparams)  # fine for binary
    assert checked.model.source == model.read_text()
    with pytest.raises(ModelConfigError, match=r"multiclass model must return .*\(3, 3\)"):
        checked_hparams(load_dataset_config("taxi_payment"), hparams)


def test_bad_serving_and_task_configs_are_refused_by_name(tmp_path):
    with pytest.raises(ServingPrecisionError, match="precision"):
        ServingConfig(precision="int8")
    with pytest.raises(DatasetConfigError, match=r"serving\.drift_limits\.max_flip_rate"):
        _yaml(tmp_path, "taxi", "serving:\n  drift_limits: {max_flip_rate: -1}\n")
    with pytest.raises(DatasetConfigError, match="task 'ranking' is not one of binary, multiclass, regression"):
        _yaml(tmp_path, "taxi", "task: ranking\n")
    with pytest.raises(DatasetConfigError, match="a multiclass label needs 'num_classes'"):
        _yaml(tmp_path, "taxi", "task: multiclass\n")
    with pytest.raises(DatasetConfigError, match=r"label\.log1p does not apply to a multiclass task"):
        _yaml(tmp_path, "taxi_payment", "", ("  num_classes: 3", "  num_classes: 3\n  log1p: true"))
    with pytest.raises(DatasetConfigError, match=r"gates\.auc_floor applies to binary tasks only"):
        _yaml(tmp_path, "taxi_tips", "gates: {auc_floor: 0.8}\n")


@pytest.mark.parametrize(
    ("where", "source"),
    [("dataset", "mine.yaml: model.hparams"), ("command line", "command line: --model-hparam")],
)
def test_non_positive_layer_widths_are_refused_by_name_with_their_source(tmp_path, monkeypatch, where, source):
    """``hparams: {hidden_units: [-1, 0]}`` (issue #41): refused at the model check a run makes before any stage,
    naming the hyperparameter, its value and where it came from."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "mine.yaml"
    taxi = (PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text()
    data.write_text(taxi + ("model: {hparams: {hidden_units: [-1, 0]}}\n" if where == "dataset" else ""))
    given = {"dataset": str(data)}
    if where == "command line":
        given["model.hparams"] = parse_model_hparams(["hidden_units=[-1, 0]"])
    resolved = resolve_settings(LOCAL, command_line_layer(given))
    with pytest.raises(ModelConfigError) as refused:
        checked_model(resolved)
    assert "hparam hidden_units=[-1, 0]: sizes must be whole numbers >= 1" in str(refused.value)
    assert f"model.hparams from {source}]" in str(refused.value)


def test_a_pretrained_text_feature_is_checked_with_its_checkpoints_ids_and_model(tmp_path, monkeypatch):
    """The model check's spec carries the checkpoint and the tokenizer's vocabulary and padding id; the check
    builds the pretrained encoder, so a checkpoint it cannot load stops the run before any stage."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = save_tiny_bert(tmp_path / "bert", max_positions=128)  # movie_reviews' max_length
    words = "      tokenizer: words\n      top_k: 20000\n      num_oov_buckets: 100\n"
    pretrained = f"      tokenizer: pretrained\n      checkpoint: {folder}\n"
    dataset = _yaml(tmp_path, "movie_reviews", "", (words, pretrained))
    seen = []
    real = model_choice.build_model
    monkeypatch.setattr(model_choice, "build_model", lambda model, spec: seen.append(spec) or real(model, spec))
    hparams = TrainerHParams(model=ModelConfig(factory="hf_sequence_classifier"))
    assert checked_hparams(dataset, hparams).model.factory == "hf_sequence_classifier"
    assert seen[0].sequences == (SequenceInput("text_xf", 100, 128, 0, str(folder)),)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelConfigError, match="hf_sequence_classifier"):
        checked_hparams(dataset, hparams)
