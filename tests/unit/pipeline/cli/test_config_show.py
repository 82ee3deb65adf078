"""``torchtfx config show``: every setting with its value and its source, and the options made from the
settings' declarations."""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from click.testing import CliRunner

from tests.paths import PROJECT_ROOT
from tests.unit.pipeline.cli.test_setting_options import ALIAS_BOMB
from torchtfx.pipeline.cli.main import cli


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def _line(output: str, key: str) -> str:
    return next(line for line in output.splitlines() if line.split()[0] == key)


def test_show_names_the_source_of_a_command_line_a_pools_yaml_and_a_dataset_yaml_value(tmp_path):
    data = tmp_path / "mine.yaml"
    data.write_text((PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text() + "gates: {auc_floor: 0.8}\n")
    raw = yaml.safe_load((PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text())
    raw["dataset"] = str(data)
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(raw))
    result = _run("config", "show", "--config", str(pools), "--epochs", "3")
    assert result.exit_code == 0, result.output
    assert _line(result.output, "trainer.epochs").split()[1:] == ["3", "command", "line:", "--epochs"]
    assert _line(result.output, "trainer.batch_size").endswith("pools.yaml: trainer.hyperparameters.batch_size")
    assert "1024" in _line(result.output, "trainer.batch_size")
    assert _line(result.output, "gates.auc_floor").endswith("mine.yaml: gates.auc_floor")
    assert _line(result.output, "trainer.learning_rate").endswith("default")


def test_show_without_pools_yaml_is_what_run_uses():
    result = _run("config", "show", "--model", "resnet", "--no-cache")
    assert result.exit_code == 0, result.output
    assert _line(result.output, "model.factory").endswith("command line: --model")
    assert _line(result.output, "cache").split()[1] == "False"
    assert _line(result.output, "beam.mode").endswith("default")
    assert "gates.auc_floor" in result.output and "gates.accuracy_floor" not in result.output  # taxi is binary


def test_a_local_only_option_with_a_kubeflow_config_is_refused_by_name():
    result = _run(
        "config", "show", "--config", str(PROJECT_ROOT / "kubeflow" / "pools.yaml"), "--beam-mode", "in_memory"
    )
    assert result.exit_code == 2 and "--beam-mode applies to `torchtfx run` only" in result.output


def test_settings_that_do_not_go_together_are_refused_before_anything_runs():
    result = _run("config", "show", "--dataset", "taxi_tips", "--auc-threshold", "0.9")
    assert result.exit_code == 1 and "gates.auc_floor applies to binary tasks only" in result.output
    assert "Traceback" not in result.output


def test_help_texts_take_their_defaults_from_the_declarations():
    run_help = _run("run", "--help").output
    assert "the dataset YAML's gates.auc_floor, else 0.75]" in " ".join(run_help.split())
    compile_help = " ".join(_run("compile", "--help").output.split())
    assert (
        "[default: pools.yaml's trainer.hyperparameters.epochs, else the dataset YAML's trainer.epochs, else 12]"
        in compile_help
    )
    assert "--beam-mode" not in compile_help


def test_show_names_the_text_model_chosen_for_a_dataset_with_text_features(tmp_path):
    data = tmp_path / "reviews.yaml"
    text = (PROJECT_ROOT / "data" / "datasets" / "movie_reviews.yaml").read_text()
    data.write_text(text.replace("model:\n  factory: text_transformer\n", ""))
    result = _run("config", "show", "--dataset", str(data))
    assert result.exit_code == 0, result.output
    line = _line(result.output, "model.factory")
    assert line.split()[1] == "text_transformer" and line.endswith("default (the dataset has text features)")


def test_a_model_hparam_alias_bomb_is_refused_within_a_second():
    done: list = []  # before the guarded loader, the command wrote 9**9 values out and never finished
    worker = threading.Thread(target=lambda: done.append(_run("config", "show", "--model-hparam", f"h={ALIAS_BOMB}")))
    started = time.monotonic()
    worker.daemon = True
    worker.start()
    worker.join(timeout=10)
    assert done, "config show did not finish within 10 s"
    assert time.monotonic() - started < 1.0
    assert done[0].exit_code == 1 and "Traceback" not in done[0].output
    assert "--model-hparam h: the aliases in this value expand to more than 100,000 values" in done[0].output


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (
            ["--learning-rate", "inf"],
            "trainer.learning_rate (command line: --learning-rate): must be a finite number > 0, got inf",
        ),
        (
            ["--num-workers", "100000"],
            "trainer.num_workers (command line: --num-workers): must be 'auto' or a whole "
            "number from 1 to 1,024, got 100000",
        ),
        (
            ["--beam-workers", "100000"],
            "beam.workers (command line: --beam-workers): must be a whole number from 1 to 1,024, got 100000",
        ),
        (
            ["--epochs", "1e30"],
            "trainer.epochs (command line: --epochs): must be a whole number from 1 to 10,000, got 1e+30",
        ),
        (
            ["--batch-size", "1e12"],
            "trainer.batch_size (command line: --batch-size): must be a whole number from 1 "
            "to 16,777,216, got 1000000000000",
        ),
    ],
)
def test_values_no_one_can_mean_are_refused_with_the_option_and_the_range(args, refusal):
    result = _run("config", "show", *args)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert refusal in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("old", "new", "refusal"),
    [
        ("threshold: 0.2", "threshold: .nan", "label.threshold: must be a finite number, got nan"),
        (
            "pickup_latitude: 10",
            "pickup_latitude: 1e9",
            "features.bucketized.pickup_latitude: must be a whole number from 2 to 10,000, got '1e9'",
        ),
        (
            "pickup_latitude: 10",
            "pickup_latitude: 1000000000",
            "features.bucketized.pickup_latitude: must be a whole number from 2 to 10,000, got 1000000000",
        ),
    ],
)
def test_dataset_yaml_values_no_one_can_mean_are_refused_with_the_file_and_key(tmp_path, old, new, refusal):
    data = tmp_path / "mine.yaml"
    data.write_text(_with((PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text(), old, new))
    result = _run("config", "show", "--dataset", str(data))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{data}: {refusal}" in " ".join(result.output.split())


def test_a_pools_yaml_value_no_one_can_mean_is_refused_with_the_file_and_key(tmp_path):
    pools = tmp_path / "pools.yaml"
    text = (PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text()
    pools.write_text(_with(text, "  hyperparameters:\n    epochs: 12\n", "  hyperparameters:\n    epochs: 1e30\n"))
    result = _run("config", "show", "--config", str(pools))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{pools}: trainer.hyperparameters.epochs: must be a whole number from 1 to 10,000, got '1e30'" in (
        " ".join(result.output.split())
    )


def test_class_weights_can_be_set_on_the_command_line_as_the_rare_class_hint_says():
    result = _run("config", "show", "--dataset", "taxi_payment", "--class-weights", "balanced")
    assert result.exit_code == 0, result.output
    assert _line(result.output, "trainer.class_weights").split()[1:] == [
        "balanced",
        "command",
        "line:",
        "--class-weights",
    ]
