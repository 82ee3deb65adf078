"""The fine-tuning settings declared like ``learning_rate``: an option on the command line and a key in
``pools.yaml``; the training recipe a dataset YAML may hold under ``trainer:``; each resolved with its source, and
a bad value refused before anything runs, naming the setting, where it came from and its range."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.public import TrainerHParams
from torchtfx.data.config.dataset import DATASET_TRAINER_KEYS
from torchtfx.pipeline.cli.main import cli
from torchtfx.pipeline.settings.declared import BY_KEY, LOCAL
from torchtfx.pipeline.settings.layers import command_line_layer
from torchtfx.pipeline.settings.resolve import resolve_settings, show_path


def _show(*args: str):
    return CliRunner().invoke(cli, ["config", "show", *args])


def _line(output: str, key: str) -> list[str]:
    return next(line for line in output.splitlines() if line.split()[0] == key).split()


@pytest.mark.parametrize(
    ("key", "flag"),
    [
        ("trainer.head_learning_rate", "--head-learning-rate"),
        ("trainer.warmup_ratio", "--warmup-ratio"),
        ("trainer.lr_schedule", "--lr-schedule"),
    ],
)
def test_the_fine_tuning_settings_have_an_option_and_a_pools_key_like_learning_rate(key, flag):
    setting = BY_KEY[key]
    assert setting.option is not None and setting.option.flag == flag
    assert setting.pools == f"trainer.hyperparameters.{key.split('.')[1]}"


def test_the_command_line_sets_them_and_config_show_names_where_each_came_from():
    result = _show("--head-learning-rate", "1e-3", "--warmup-ratio", "0.1", "--lr-schedule", "linear")
    assert result.exit_code == 0, result.output
    assert _line(result.output, "trainer.head_learning_rate")[1:] == [
        "0.001",
        "command",
        "line:",
        "--head-learning-rate",
    ]
    assert _line(result.output, "trainer.warmup_ratio")[1:] == ["0.1", "command", "line:", "--warmup-ratio"]
    assert _line(result.output, "trainer.lr_schedule")[1:] == ["linear", "command", "line:", "--lr-schedule"]


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (
            ["--head-learning-rate", "0"],
            "trainer.head_learning_rate (command line: --head-learning-rate): must be a finite number > 0, "
            "or null for learning_rate's value, got 0.0",
        ),
        (
            ["--warmup-ratio", "1"],
            "trainer.warmup_ratio (command line: --warmup-ratio): must be a fraction of all planned steps "
            "from 0 to below 1 (0.1: the first 10% warm up), got 1.0",
        ),
    ],
)
def test_a_bad_value_on_the_command_line_is_refused_with_the_option_and_the_range(args, refusal):
    result = _show(*args)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert refusal in " ".join(result.output.split())


def test_a_bad_value_in_pools_yaml_is_refused_with_the_file_and_key(tmp_path):
    raw = yaml.safe_load((PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text())
    raw["trainer"]["hyperparameters"]["warmup_ratio"] = 1.5
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(raw))
    result = _show("--config", str(pools))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{pools}: trainer.hyperparameters.warmup_ratio: must be a fraction of all planned steps" in " ".join(
        result.output.split()
    )


def _dataset_with(tmp_path, trainer: str):
    data = tmp_path / "mine.yaml"
    data.write_text((PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text() + f"trainer:\n{trainer}")
    return data


def test_every_trainer_key_a_dataset_yaml_may_hold_is_a_trainer_setting():
    assert set(DATASET_TRAINER_KEYS) <= set(TrainerHParams.model_fields)
    assert {k for k, s in BY_KEY.items() if s.dataset and s.dataset.startswith("trainer.")} == {
        f"trainer.{name}" for name in DATASET_TRAINER_KEYS
    }


def test_a_dataset_yaml_carries_its_fine_tuning_recipe_below_the_command_line(tmp_path):
    """A pretrained encoder's dataset names its own rates (the tabular default 3e-3 would wreck a checkpoint)."""
    data = _dataset_with(tmp_path, "  learning_rate: 5e-5\n  warmup_ratio: 0.1\n  lr_schedule: linear\n")
    resolved = resolve_settings(LOCAL, command_line_layer({"dataset": str(data), "trainer.warmup_ratio": 0.2}))
    hp = resolved.hparams
    assert (hp.learning_rate, hp.warmup_ratio, hp.lr_schedule) == (5e-5, 0.2, "linear")
    assert resolved.values["trainer.learning_rate"].source == f"{show_path(data)}: trainer.learning_rate"
    assert resolved.values["trainer.warmup_ratio"].source == "command line: --warmup-ratio"
    assert resolve_settings(LOCAL).hparams.learning_rate == TrainerHParams.default_of("learning_rate")


def test_a_bad_value_in_a_dataset_yaml_is_refused_with_the_file_and_key(tmp_path):
    data = _dataset_with(tmp_path, "  warmup_ratio: 2\n")
    result = _show("--dataset", str(data))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"trainer.warmup_ratio ({show_path(data)}: trainer.warmup_ratio): must be a fraction" in " ".join(
        result.output.split()
    )


def test_a_trainer_key_a_dataset_yaml_may_not_hold_is_refused_naming_where_it_goes(tmp_path):
    data = _dataset_with(tmp_path, "  num_workers: 2\n")
    result = _show("--dataset", str(data))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "num_workers cannot be set in a dataset YAML; it may hold epochs, batch_size, learning_rate" in (
        " ".join(result.output.split())
    )
    assert "(the others: pools.yaml or the command line)" in " ".join(result.output.split())
