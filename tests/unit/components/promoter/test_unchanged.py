"""A candidate the registry already has changes nothing: a rerun on unchanged data and code (MLMD hands the
Promoter the cached Model artifact) or a retrain that reproduced the same bytes is not pushed, not registered,
and TF Serving gets no new config. Real MLflow sqlite registry, real serving directory, and TF Serving's
ModelService on a localhost gRPC port (tests/fakes/model_server.py: a TEST DOUBLE, which records every reload)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.unit.components.promoter.test_promotion import _digest, _saved_model
from torchtfx.components.promoter import promotion
from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, Registry
from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.fingerprint import saved_model_fingerprint

REASONS = ["auc Overall candidate 0.60 champion 0.93"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Two trained models (their Format-Serving folders), saved once: a rerun reuses the same folder."""
    root = tmp_path_factory.mktemp("models")
    return {name: _saved_model(root / name / "Format-Serving", value) for name, value in (("a", 1.0), ("b", 2.0))}


@pytest.fixture()
def server():
    fake = FakeModelServer(load_seconds=0.05).start()
    yield fake
    fake.stop()


def _world(tmp_path: Path, address: str | None):
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    target = promotion.ServingTarget(tmp_path / "serving", "test", registry, server_address=address)
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))

    def candidate(saved_model: Path) -> promotion.Candidate:
        """A new run's candidate (its own MLflow run, as each pipeline run has)."""
        run_id = registry.client.create_run(experiment).info.run_id
        return promotion.Candidate(saved_model, None, run_id, {"model": saved_model.parent.name})

    return target, candidate


@pytest.fixture()
def world(tmp_path, server):
    return _world(tmp_path, server.address)


def _versions(target: promotion.ServingTarget) -> list[str]:
    return sorted(str(v.version) for v in target.registry.client.search_model_versions("name='torchtfx-test'"))


def _snapshot(target: promotion.ServingTarget, server: FakeModelServer):
    return _digest(target.serving_dir), _versions(target), len(server.history)


def test_a_rerun_of_the_champion_pushes_registers_and_reloads_nothing(world, models, server):
    target, candidate = world
    first = candidate(models["a"])
    assert promotion.promote(first, target) == 1
    assert target.registry.alias_version(CHAMPION).tags[MODEL_FINGERPRINT_TAG] == first.fingerprint
    before = _snapshot(target, server)
    outcome = promotion.promote(candidate(models["a"]), target)
    assert isinstance(outcome, promotion.Unchanged)
    assert (outcome.serving_version, outcome.registry_version) == (1, "1")
    assert outcome.message == (
        "The candidate is identical to the champion (serving version 1, registry version 1; model fingerprint "
        f"{first.fingerprint[:27]}): nothing was pushed or registered. models.config and TF Serving were left as "
        "they were."
    )
    assert _snapshot(target, server) == before  # files, models.config, registry versions, ModelService reloads


def test_a_retrain_that_reproduced_the_same_bytes_is_the_same_model(world, models, server, tmp_path):
    """Another Model artifact (caching off, same seed and data) whose SavedModel is byte-identical."""
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    retrained = shutil.copytree(models["a"], tmp_path / "retrained" / "Format-Serving")
    before = _snapshot(target, server)
    assert isinstance(promotion.promote(candidate(Path(retrained)), target), promotion.Unchanged)
    assert _snapshot(target, server) == before
    assert promotion.promote(candidate(models["b"]), target) == 2  # a different model is promoted as ever


def test_a_champion_promoted_before_fingerprints_were_recorded_is_digested_from_its_folder(world, models, server):
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    target.registry.client.delete_model_version_tag("torchtfx-test", "1", MODEL_FINGERPRINT_TAG)
    before = _snapshot(target, server)
    assert isinstance(promotion.promote(candidate(models["a"]), target), promotion.Unchanged)
    assert _snapshot(target, server) == before


def test_a_champion_folder_damaged_on_disk_is_replaced_not_declared_identical(world, models):
    """The recorded fingerprint matches, but the folder lost a file: the candidate is pushed as a new version."""
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    next((target.serving_dir / "1" / "variables").glob("variables.data-*")).write_bytes(b"")
    assert promotion.promote(candidate(models["a"]), target) == 2
    assert saved_model_fingerprint(target.serving_dir / "2") == saved_model_fingerprint(models["a"])
    assert model_config.read_stable_version(target.serving_dir) == 2


def test_a_rerun_leaves_the_champion_s_pending_label_move_to_finish_and_pushes_nothing(tmp_path, models):
    """Without a server address the label move of version 1 waits (journaled) until the user confirms the load
    (`promote --finish`): a rerun of the same model changes nothing and says that the move still waits."""
    target, candidate = _world(tmp_path, None)
    assert promotion.promote(candidate(models["a"]), target) == 1
    assert promotion.pending_label_move(target) == 1
    assert model_config.read_state(target.serving_dir).labels == {}
    before = _digest(target.serving_dir)
    outcome = promotion.promote(candidate(models["a"]), target)
    assert isinstance(outcome, promotion.Unchanged)
    assert "The label move onto version 1 still waits" in outcome.message and "promote --finish" in outcome.message
    assert promotion.pending_label_move(target) == 1 and _digest(target.serving_dir) == before
    assert _versions(target) == ["1"]
    assert "finished the promotion of version 1" in promotion.finish(target)
    assert model_config.read_state(target.serving_dir).labels == {"stable": 1, "canary": 1}
    assert promotion.finish(target) == "nothing pending: models.config already follows the registry"


def test_a_rolled_back_model_is_not_put_back_by_a_rerun_but_can_be_on_purpose(world, models, server):
    """Rollback from b (serving 2) to a (serving 1): rerunning b's run says so and changes nothing; rerunning a's
    is a rerun of the champion; `promote --version 2` brings b back, and b's rerun is then the champion's."""
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    promotion.promote(candidate(models["b"]), target)
    message = promotion.rollback(target)
    assert "a rerun that trains the same model does not promote it again, `--version 2` does" in message
    before = _snapshot(target, server)
    outcome = promotion.promote(candidate(models["b"]), target)
    assert isinstance(outcome, promotion.Unchanged) and (outcome.serving_version, outcome.registry_version) == (2, "2")
    assert "which was rolled back: it is not promoted again by a rerun" in outcome.message
    assert "the champion stays registry version 1" in outcome.message
    assert "torchtfx promote --version 2 --reason" in outcome.message
    assert isinstance(promotion.promote(candidate(models["a"]), target), promotion.Unchanged)
    assert _snapshot(target, server) == before
    promotion.set_champion(target, 2, "the incident was elsewhere")
    outcome = promotion.promote(candidate(models["b"]), target)
    assert isinstance(outcome, promotion.Unchanged) and "identical to the champion (serving version 2" in (
        outcome.message
    )


def test_a_rejected_rerun_registers_no_second_challenger(world, models, server):
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    first = promotion.reject(candidate(models["b"]), target, REASONS)
    assert str(first) == "2" and str(target.registry.alias_version(CHALLENGER).version) == "2"
    before = _snapshot(target, server)
    again = promotion.reject(candidate(models["b"]), target, REASONS)
    assert isinstance(again, promotion.Unchanged) and again.serving_version is None
    assert again.message.startswith("The candidate is identical to the rejected challenger (registry version 2)")
    assert _snapshot(target, server) == before


def test_a_champion_that_fails_today_s_gates_is_named_and_not_registered_as_challenger(world, models, server):
    target, candidate = world
    promotion.promote(candidate(models["a"]), target)
    before = _snapshot(target, server)
    outcome = promotion.reject(candidate(models["a"]), target, REASONS)
    assert isinstance(outcome, promotion.Unchanged) and outcome.serving_version == 1
    assert "identical to the champion" in outcome.message and "The champion itself fails today's gates" in (
        outcome.message
    )
    assert target.registry.alias_version(CHALLENGER) is None
    assert _snapshot(target, server) == before
