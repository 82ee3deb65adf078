"""Bring your own model, end to end through ``torchtfx run``: a researcher's file outside the repository,
then every zoo model, each trained, exported, translated, parity-checked, evaluated and promoted.

One pipeline root: the zoo runs reuse ExampleGen, statistics and Transform from MLMD's cache (the model is
not part of what those components receive), so each adds only Trainer, Evaluator and Promoter time.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from tests import helpers
from tests.e2e.test_pipeline import SAMPLE_ROWS, run_on, torchtfx

pytestmark = pytest.mark.e2e

RESEARCH_MODEL = """
import torch
from torch import nn


class GatedEmbeddings(nn.Module):
    '''Embeddings weighted by a learned softmax gate over features (einsum on [batch, features, d]),
    concatenated with the dense features into an MLP.'''

    def __init__(self, spec, d=8):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(card, d) for card in spec.cardinalities)
        self.gate = nn.Parameter(torch.zeros(len(spec.cardinalities)))
        width = len(spec.dense_features) + d * len(spec.cardinalities)
        self.mlp = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense, categorical):
        tokens = torch.stack([e(categorical[:, i]) for i, e in enumerate(self.embeddings)], dim=1)
        gated = torch.einsum("bfd,f->bfd", tokens, torch.softmax(self.gate, 0) * len(self.embeddings))
        return self.mlp(torch.cat([dense, gated.flatten(1)], dim=1)).squeeze(-1)


def build(spec, d=8):
    return GatedEmbeddings(spec, d)
"""


@pytest.fixture(scope="module")
def zoo_root(tmp_path_factory, taxi_csv):
    root = tmp_path_factory.mktemp("zoo_e2e")
    rows = helpers.csv_rows(taxi_csv, SAMPLE_ROWS)
    helpers.write_sample(rows, root / "data", list(rows[0]))
    return root


def _run(root, *args):
    return run_on(root, "--epochs", "8", "--batch-size", "64", *args)


def _check_converted_and_blessed(root, proc, factory: str) -> None:
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = helpers.metadata(root / "pipeline")
    assert summary.blessed is True
    assert summary.parity is not None and summary.parity <= 1e-5
    assert summary.custom("TorchTrainer", "model", "model_factory").endswith(factory)
    assert summary.custom("TorchTrainer", "model", "onnx_conversion").startswith("translator")
    # No TF Serving here to confirm the load: the operator's confirmation, without which the next model's
    # promotion would stop (the labels move only onto a version someone saw loaded).
    finish = torchtfx(
        "--pipeline-root", str(root / "pipeline"), "--serving-dir", str(root / "serving"), "--finish", command="promote"
    )
    assert finish.returncode == 0, finish.stderr[-2000:]


def test_a_model_file_outside_the_repository_trains_converts_and_is_promoted(zoo_root, tmp_path_factory):
    research = tmp_path_factory.mktemp("x") / "my_model.py"
    research.write_text(textwrap.dedent(RESEARCH_MODEL))
    proc = _run(zoo_root, "--model", f"{research}:build", "--model-hparam", "d=6")
    _check_converted_and_blessed(zoo_root, proc, "my_model.py:build")
    assert (zoo_root / "serving" / "1" / "saved_model.pb").is_file()


@pytest.mark.parametrize("model", ["resnet", "dcn", "ft_transformer"])
def test_each_zoo_model_runs_the_whole_pipeline_with_parity(zoo_root, model):
    # Judged by the value gates alone: which zoo model beats which is not this test's question.
    proc = _run(zoo_root, "--model", model, "--max-auc-drop", "1.0")
    _check_converted_and_blessed(zoo_root, proc, model)


# Third-party published models, unmodified, from their pip packages (tests/bench/research_zoo/; the whole corpus runs in
# `make bench --only zoo`): the periodic-embedding MLP (Sin/Cos) and TabM (aten::column_stack by a torchtfx symbolic,
# OneHot, its own mean-of-members loss). Two fast ones: each pipeline run adds about a minute to make test.
RESEARCH_ZOO = Path(__file__).resolve().parents[1] / "bench" / "research_zoo"


@pytest.mark.parametrize("factory", ["rtdl_mlp_periodic", "tabm_ensemble"])
def test_published_research_models_run_the_whole_pipeline_with_parity(zoo_root, factory):
    proc = _run(zoo_root, "--model", f"{RESEARCH_ZOO / factory}.py:build", "--max-auc-drop", "1.0")
    _check_converted_and_blessed(zoo_root, proc, f"{factory}.py:build")


def test_a_factory_that_cannot_be_loaded_stops_before_the_pipeline_runs(zoo_root, tmp_path):
    bad = tmp_path / "bad_model.py"
    bad.write_text("from torch import nn\ndef build(spec):\n    return nn.Linear(3, 1)\n")
    proc = _run(zoo_root, "--model", f"{bad}:build", "--pipeline-root", str(tmp_path / "never"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "bad_model.py:build" in proc.stderr and "failed on a batch of 3" in proc.stderr
    assert not (tmp_path / "never").exists()


def test_a_failed_training_names_a_log_that_exists_with_the_last_checkpoint_summary(zoo_root, tmp_path):
    """TFX deletes a failed execution's outputs (the ModelRun with its train.log): the message must name a log
    that still exists, under <TFX pipeline root>/logs/<run id>/, beside the last checkpoint's summary."""
    model = tmp_path / "late_diverging.py"
    # 2,000 training rows in batches of 64 train in process (num_workers auto): 32 steps an epoch.
    model.write_text(helpers.diverging_model_source(finite_steps=40))
    proc = _run(zoo_root, "--model", f"{model}:build")
    assert proc.returncode == 1, proc.stderr[-3000:]
    # The message leads with the worker's own error, not torchrun's "child failed" traceback.
    error = proc.stderr[proc.stderr.index("\nError: ") + 1 :]
    assert "TrainingDiverged: Training diverged at epoch 2" in error.splitlines()[0] and "Traceback" not in error
    shown = Path(re.search(r"full log: (\S+)", error).group(1))
    assert shown.parent.parent == zoo_root / "pipeline" / "tfx" / "logs" and shown.name == "train.log"
    assert "Training diverged at epoch 2" in shown.read_text()
    summary = json.loads((shown.parent / "checkpoint.json").read_text())
    assert summary["last_completed_epoch"] == 1, summary
