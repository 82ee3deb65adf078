"""The fine-tuning settings declared like ``learning_rate``: an option on the command line and a key in
``pools.yaml``, resolved with their source, and a bad value refused before anything runs, naming the setting,
where it came from and its range."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.cli.main import cli
from torchtfx.pipeline.settings.declared import BY_KEY


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
