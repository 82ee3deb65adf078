"""The compiled Kubeflow spec, run end to end on this machine by tests/fakes/kfp_launcher.py: every step's own
container command from the YAML, in topological order, with ExecutorInputs built as the KFP v2 driver builds
them and ``file://`` artifact URIs (see the emulator's docstring for what is real and what is simulated).
This is the only evidence here, without a cluster, that the spec really runs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests import helpers
from tests.fakes.kfp_launcher import Launcher, StepFailedError, load_documents, venv_bin
from tests.paths import PROJECT_ROOT
from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.model_config import ServedState
from torchtfx.pipeline.kfp.compile import compile_pipeline
from torchtfx.pipeline.kfp.config import settings_from_dict
from torchtfx.pipeline.kfp.pipeline_root import DEFAULT_MULTI_USER_ROOT
from torchtfx.pipeline.kfp.submit import namespaced_root, pipeline_root

pytestmark = pytest.mark.e2e

STEPS = {
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "TorchTrainer",
    "ChampionModel",
    "Evaluator",
    "Promoter",
}
RUN_ID = "emulated-run-1"
BACKEND = "2.15"  # what Kubeflow 1.11 installs: executor-logs outputs, outputFile in the task root, multi-user
NAMESPACE = "team-a"


def emulation_config(root: Path) -> dict:
    """A cluster config whose paths are local folders; the MLflow address in the spec is a placeholder and
    the real store comes from the (emulated) Kubernetes secret, as credentials would."""
    return {
        "image": "localhost/torchtfx:emulated",
        "project_root": str(PROJECT_ROOT),
        "dataset": "taxi",
        "kfp_backend": BACKEND,
        "pipeline_root": DEFAULT_MULTI_USER_ROOT,  # a local folder stands in for the namespace's root
        "data_root": str(root / "data"),
        "serving_dir": str(root / "shared" / "serving"),
        "volumes": [{"claim_name": "torchtfx-shared", "mount_path": str(root)}],
        "mlflow": {
            "tracking_uri": "http://mlflow.invalid:5000",
            "credentials_secret": "mlflow",
            "secret_keys": {"tracking_uri": "MLFLOW_TRACKING_URI"},
        },
        "node_pools": {"cpu": {"node_selector": {"pool": "cpu"}}, "gpu": {"node_selector": {"pool": "gpu"}}},
        "resources": {"default": {"cpu": 1, "memory": "2Gi"}},
        "beam_args": ["--direct_running_mode=in_memory"],
        "trainer": {
            "node_pool": "gpu",
            "gpus_per_node": 0,
            "cpu": 2,
            "memory": "4Gi",
            "hyperparameters": {"epochs": 6, "num_workers": 2, "model": {"factory": f"{user_model(root)}:build"}},
        },
    }


USER_MODEL = """
import torch
from torch import nn


class Wide(nn.Module):
    def __init__(self, spec, width):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(card, 4) for card in spec.cardinalities)
        self.net = nn.Sequential(nn.Linear(len(spec.dense_features) + 4 * len(spec.cardinalities), width), nn.ReLU(),
                                 nn.Linear(width, 1))

    def forward(self, dense, categorical):
        parts = [dense] + [emb(categorical[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.net(torch.cat(parts, dim=1)).squeeze(1)


def build(spec, width=32):
    return Wide(spec, width)
"""


def user_model(root: Path) -> Path:
    """A researcher's model file outside the repository; compile embeds it, and it is gone before any step
    runs, so the Trainer step and its workers can only have it from the compiled spec."""
    path = root / "research" / "my_model.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(USER_MODEL)
    return path


@pytest.fixture(scope="module")
def emulated(tmp_path_factory, taxi_csv):
    root = tmp_path_factory.mktemp("kfp_emulation")
    rows = helpers.csv_rows(taxi_csv, 3000)
    (root / "data").mkdir()
    with (root / "data" / "data.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    spec = compile_pipeline(settings_from_dict(emulation_config(root), "emulation"), root / "pipeline.yaml")
    (root / "research" / "my_model.py").unlink()
    launcher = _launcher(root, spec, BACKEND, _submitted_root(spec))
    results = launcher.run({"pipeline-run-id": RUN_ID})
    return root, results


def _submitted_root(spec: Path) -> str:
    """The pipeline root `torchtfx submit` creates the run with in NAMESPACE."""
    return namespaced_root(pipeline_root(load_documents(spec)[0], spec), NAMESPACE, client=None)


def _launcher(root: Path, spec: Path, backend: str, run_root_uri: str, bucket: str = "kfp-root") -> Launcher:
    secrets = {"mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}"}}
    return Launcher(
        spec,
        RUN_ID,
        venv_bin(),
        secrets,
        pipeline_root=root / bucket,
        backend=backend,
        namespace=NAMESPACE,
        run_root_uri=run_root_uri,
    )


@pytest.mark.parametrize("backend", ["2.3", "2.5", "2.17"])
def test_the_first_step_runs_on_each_drivers_executor_input(emulated, backend):
    """2.3: no executor-logs; 2.5: executor-logs (system.Artifact), which TFX 1.16 cannot import; 2.17: the
    log URI qualified by retry. The ExampleGen step parses every output, with TFX's driver first."""
    root, _ = emulated
    spec = root / "pipeline.yaml"
    result = _launcher(root, spec, backend, _submitted_root(spec), f"root-{backend}").run_task(
        "CsvExampleGen", {"pipeline-run-id": RUN_ID}
    )
    assert result.outputs["examples"]["metadata"]["input_fingerprint"].startswith("split:single_split")
    assert ("executor-logs" in result.outputs) == (backend != "2.3")


def test_a_root_outside_the_namespaces_prefixes_is_refused_by_the_object_store(emulated):
    """The root pools.yaml shipped before (the single-user default): the 2.15 multi-user policy denies it."""
    root, _ = emulated
    launcher = _launcher(root, root / "pipeline.yaml", "2.15", "minio://mlpipeline/v2/artifacts/torchtfx", "denied")
    with pytest.raises(StepFailedError, match=r"upload of mlpipeline/v2/artifacts/torchtfx/.* AccessDenied"):
        launcher.run_task("CsvExampleGen", {"pipeline-run-id": RUN_ID})


def test_every_step_of_the_compiled_spec_runs_and_the_model_is_pushed(emulated):
    root, results = emulated
    assert set(results) == STEPS
    serving = root / "shared" / "serving"
    assert (serving / "1" / "saved_model.pb").is_file()
    # No serving_address in the config: version 1 is staged, and the labels wait for `promote --finish`.
    assert model_config.read_state(serving) == ServedState(frozenset({1}), {})
    pushed = results["Promoter"].outputs["pushed_model"]["metadata"]
    assert pushed["labels_pending"] == 1
    assert pushed["pushed"] == 1 and pushed["pushed_destination"] == str(serving / "1")
    assert pushed["pushed_version"] == "1"  # a string, as TFX's Pusher writes it
    # The launcher uploaded each step's log to the executor-logs output the 2.5+ driver added.
    trainer = results["TorchTrainer"]
    uploaded = Path(trainer.outputs["executor-logs"]["uri"][len("file://") :]).read_text()
    assert uploaded == trainer.log.read_text() and "TorchTrainer" in uploaded


def test_launcher_fixes_hold_on_the_artifacts_passed_between_steps(emulated):
    _, results = emulated
    examples = results["CsvExampleGen"].outputs["examples"]["metadata"]
    assert examples["input_fingerprint"].startswith("split:single_split")  # the ExampleGen driver ran
    assert results["ChampionModel"].outputs["champion"]["metadata"]["torchtfx_absent"] == 1  # first run
    blessing = results["Evaluator"].outputs["blessing"]
    assert blessing["metadata"]["blessed"] == 1  # judged by value gates alone: the absent baseline was dropped
    assert blessing["uri"].startswith("file://") and blessing["metadata"]["current_model"].startswith("file://")
    model = results["TorchTrainer"].outputs["model"]["metadata"]
    assert float(model["parity_max_abs_diff"]) <= 1e-5 and model["ddp_world_size"] == 2
    assert model["model_factory"].endswith("research/my_model.py:build")  # loaded from the spec's copy
    assert model["onnx_conversion"].startswith("translator")
    # Outputs landed where the launcher would upload them from: under the run's folder of the pipeline root.
    assert Path(results["TorchTrainer"].outputs["model"]["uri"][len("file://") :], "Format-Serving").is_dir()


def test_registry_gets_the_champion_through_the_secret_provided_store(emulated):
    root, _ = emulated
    from torchtfx.components.shared.mlflow_client import Registry

    champion = Registry(f"sqlite:///{root / 'mlflow.db'}", "torchtfx-taxi").alias_version("champion")
    assert champion.tags["pipeline_run_id"] == RUN_ID  # the run's own id, {{$.pipeline_job_uuid}} from 2.5
    assert champion.tags["data_fingerprint"].startswith("split:single_split")
    # What later runs read back names the artifact store's URI, not the pod-local copy.
    assert champion.tags["train_statistics_uri"].startswith("file://") and champion.tags["model_uri"].startswith(
        "file://"
    )
    logs = "\n".join(r.log.read_text() for r in emulated[1].values())
    assert helpers.find_credentials(logs) == []
    assert (root / "shared" / "serving" / "batching_parameters.txt").is_file()
