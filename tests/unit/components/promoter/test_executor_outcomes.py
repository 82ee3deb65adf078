"""What the Promoter's executor records on its PushedModel artifact (ML Metadata) for each outcome: TFX Pusher's
``pushed`` marks, the candidate's fingerprint, and for a rerun of the champion the sentence the run report prints
and the version it matched. The executor runs as TFX calls it, on real artifacts, registry and serving folder;
TF Serving is the ModelService TEST DOUBLE of tests/fakes/model_server.py."""

from __future__ import annotations

import pytest
from tfx.types import standard_artifacts

from tests.fakes.model_server import FakeModelServer
from tests.unit.components.promoter.test_promotion import _digest, _saved_model
from tests.unit.pipeline.reporting import evaluations
from torchtfx.components.promoter import constants, executor
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import Registry
from torchtfx.components.tf_serving.batching import BatchingParams


@pytest.fixture()
def promoter(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    server = FakeModelServer(load_seconds=0.05).start()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    registry = Registry(uri, "torchtfx-test")
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / "model")
    _saved_model(tmp_path / "model" / contracts.SERVING_MODEL_SUBDIR, 1.0)
    evaluation = standard_artifacts.ModelEvaluation()
    (tmp_path / "evaluation").mkdir()
    evaluation.uri = evaluations.binary(tmp_path / "evaluation", champion=False)
    properties = {
        contracts.SERVING_DIR_KEY: str(tmp_path / "serving"),
        constants.SERVING_MODEL_NAME_KEY: "test",
        contracts.REGISTERED_MODEL_KEY: "torchtfx-test",
        contracts.MLFLOW_TRACKING_URI_KEY: uri,
        constants.CODE_VERSION_KEY: "abc123",
        constants.BATCHING_KEY: BatchingParams().to_json(),
        constants.SERVING_ADDRESS_KEY: server.address,
        constants.LOAD_TIMEOUT_KEY: 30.0,
    }

    def run(blessed: int) -> standard_artifacts.PushedModel:
        """One pipeline run's Promoter, on the same (cached) Model artifact; a new MLflow run each time."""
        model.set_string_custom_property(
            contracts.MLFLOW_RUN_ID_PROPERTY, registry.client.create_run(experiment).info.run_id
        )
        blessing = standard_artifacts.ModelBlessing()
        blessing.set_int_custom_property(contracts.BLESSED_PROPERTY, blessed)
        pushed = standard_artifacts.PushedModel()
        inputs = {
            constants.MODEL_KEY: [model],
            constants.BLESSING_KEY: [blessing],
            constants.EVALUATION_KEY: [evaluation],
            constants.EXAMPLES_KEY: [standard_artifacts.Examples()],
        }
        executor.Executor().Do(inputs, {constants.PUSHED_MODEL_KEY: [pushed]}, dict(properties))
        return pushed

    yield run, tmp_path / "serving", server
    server.stop()


def _props(artifact) -> dict:
    return {k: artifact.get_custom_property(k) for k in artifact.mlmd_artifact.custom_properties}


def test_a_rerun_of_the_champion_is_recorded_as_not_pushed_with_the_reason(promoter):
    run, serving, server = promoter
    first = run(blessed=1)
    assert first.get_int_custom_property(contracts.PUSHED_PROPERTY) == 1
    fingerprint = first.get_string_custom_property(contracts.MODEL_FINGERPRINT_PROPERTY)
    assert fingerprint.startswith("sha256-tree-v1:")
    before, reloads = _digest(serving), len(server.history)
    rerun = run(blessed=1)
    props = _props(rerun)
    assert props[contracts.PUSHED_PROPERTY] == 0 and contracts.PUSHED_DESTINATION_PROPERTY not in props
    assert props[contracts.IDENTICAL_TO_PROPERTY] == 1 and props[contracts.LABELS_PENDING_PROPERTY] == 0
    assert props[contracts.MODEL_FINGERPRINT_PROPERTY] == fingerprint
    assert props[contracts.UNCHANGED_PROPERTY].startswith(
        "The candidate is identical to the champion (serving version 1, registry version 1;"
    )
    assert contracts.REJECTION_PROPERTY not in props
    assert _digest(serving) == before and len(server.history) == reloads


def test_an_unblessed_rerun_of_the_champion_is_a_rejection_that_registers_nothing(promoter):
    run, serving, _server = promoter
    run(blessed=1)
    before = _digest(serving)
    props = _props(run(blessed=0))
    assert props[contracts.PUSHED_PROPERTY] == 0 and props[contracts.REJECTION_PROPERTY]
    assert "The champion itself fails today's gates" in props[contracts.UNCHANGED_PROPERTY]
    assert _digest(serving) == before
