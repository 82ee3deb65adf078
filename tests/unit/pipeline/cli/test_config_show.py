"""``torchtfx config show``: every setting with its value and its source, and the options made from the
settings' declarations."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from tests.paths import PROJECT_ROOT
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
    assert "[default: pools.yaml's trainer.hyperparameters.epochs, else 12]" in compile_help
    assert "--beam-mode" not in compile_help


def test_show_names_the_text_model_chosen_for_a_dataset_with_text_features(tmp_path):
    data = tmp_path / "reviews.yaml"
    text = (PROJECT_ROOT / "data" / "datasets" / "movie_reviews.yaml").read_text()
    data.write_text(text.replace("model:\n  factory: text_transformer\n", ""))
    result = _run("config", "show", "--dataset", str(data))
    assert result.exit_code == 0, result.output
    line = _line(result.output, "model.factory")
    assert line.split()[1] == "text_transformer" and line.endswith("default (the dataset has text features)")


def test_class_weights_can_be_set_on_the_command_line_as_the_rare_class_hint_says():
    result = _run("config", "show", "--dataset", "taxi_payment", "--class-weights", "balanced")
    assert result.exit_code == 0, result.output
    assert _line(result.output, "trainer.class_weights").split()[1:] == [
        "balanced",
        "command",
        "line:",
        "--class-weights",
    ]
