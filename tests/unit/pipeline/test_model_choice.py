"""Which model and serving precision the Trainer gets: command line > trainer settings > dataset YAML; the
factory is checked against the dataset's task before anything runs."""

from __future__ import annotations

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.hparams import TrainerHParams
from torchtfx.data.config.dataset import DatasetConfigError, load_dataset_config
from torchtfx.data.config.model import ModelConfigError
from torchtfx.data.config.serving import ServingConfig, ServingConfigError
from torchtfx.pipeline.model_choice import choose_model


def _yaml(tmp_path, base: str, extra: str, replace: tuple[str, str] = ("", "")):
    path = tmp_path / f"{base}.yaml"
    path.write_text((PROJECT_ROOT / "data" / "datasets" / f"{base}.yaml").read_text().replace(*replace) + extra)
    return load_dataset_config(path)


def test_serving_precision_command_line_over_trainer_over_dataset_yaml(tmp_path):
    dataset = _yaml(tmp_path, "taxi", "serving:\n  precision: fp16\n  drift_limits: {max_flip_rate: 0.01}\n")
    from_yaml = choose_model(dataset, TrainerHParams())
    assert from_yaml.serving.precision == "fp16" and from_yaml.serving.drift_limits.max_flip_rate == 0.01
    trainer = TrainerHParams(serving=ServingConfig(precision="fp32", drift_limits={"max_abs_diff": 0.02}))
    assert choose_model(dataset, trainer).serving.precision == "fp32"  # the trainer section's own choice
    cli = choose_model(dataset, trainer, serving_precision="fp16").serving
    assert cli.precision == "fp16" and cli.drift_limits.max_abs_diff == 0.02
    assert choose_model(load_dataset_config("taxi"), TrainerHParams()).serving == ServingConfig()  # fp32 default


def test_a_factory_is_checked_against_the_dataset_s_task(tmp_path):
    model = tmp_path / "binary_only.py"
    model.write_text("import torch\nfrom torch import nn\n\n\nclass One(nn.Module):\n    def __init__(self, spec):\n"
                     "        super().__init__()\n        self.lin = nn.Linear(len(spec.dense_features), 1)\n\n"
                     "    def forward(self, dense, categorical):\n        return self.lin(dense).squeeze(1)\n\n\n"
                     "def build(spec):\n    return One(spec)\n")  # fmt: skip
    choose_model(load_dataset_config("taxi"), TrainerHParams(), f"{model}:build")  # fine for binary
    with pytest.raises(ModelConfigError, match=r"multiclass model must return .*\(3, 3\)"):
        choose_model(load_dataset_config("taxi_payment"), TrainerHParams(), f"{model}:build")


def test_bad_serving_and_task_configs_are_refused_by_name(tmp_path):
    with pytest.raises(ServingConfigError, match="precision"):
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
