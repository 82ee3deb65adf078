"""Promotion transactions against a real MLflow sqlite registry, a real serving directory and a TF Serving
ModelService on a localhost gRPC port (tests/fakes/model_server.py: a TEST DOUBLE of TF Serving, which cannot
run here, enforcing its documented label rules).

The "crash" scenarios raise from inside one step (a simulated process death at that point); the
registry, the files and the repair logic are all real."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tensorflow as tf

from tests.fakes.model_server import FakeModelServer
from torchtfx.components.champion.resolve import ChampionError, resolve_champion
from torchtfx.components.promoter import promotion
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, PREVIOUS, Registry
from torchtfx.components.tf_serving import batching, model_config, transition


class SimulatedCrash(BaseException):
    """Stands for the process dying at this exact point (not an Exception: nothing may catch it)."""


def _saved_model(path: Path, value: float) -> Path:
    module = tf.Module()
    module.value = tf.Variable(value)
    module.f = tf.function(lambda: module.value, input_signature=[])
    tf.saved_model.save(module, str(path))
    return path


def _digest(root: Path) -> dict[str, str]:
    skip = {".promotion.lock"}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


@pytest.fixture()
def server():
    fake = FakeModelServer(load_seconds=0.05).start()
    yield fake
    fake.stop()


@pytest.fixture()
def world(tmp_path, server):
    """A serving directory whose TF Serving is driven over gRPC (``--serving-address``)."""
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    target = promotion.ServingTarget(tmp_path / "serving", "test", registry, server_address=server.address)
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))

    def candidate(value: float) -> promotion.Candidate:
        run_id = registry.client.create_run(experiment).info.run_id
        return promotion.Candidate(
            _saved_model(tmp_path / f"model-{value}", value), None, run_id, {"value": str(value)}
        )

    return target, candidate


def test_first_promotion_serves_version_1_as_champion(world):
    target, candidate = world
    assert promotion.promote(candidate(1.0), target) == 1
    assert (target.serving_dir / "1" / "saved_model.pb").is_file()
    assert target.registry.serving_version(CHAMPION) == 1 and target.registry.alias_version(PREVIOUS) is None
    assert model_config.read_stable_version(target.serving_dir) == 1
    assert batching.read_batching(target.serving_dir).max_batch_size.value == 1024


def test_second_promotion_keeps_previous_loaded_and_versions_increase(world):
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    assert promotion.promote(candidate(2.0), target) == 2
    assert target.registry.serving_version(CHAMPION) == 2 and target.registry.serving_version(PREVIOUS) == 1
    state = model_config.read_state(target.serving_dir)
    assert state.versions == {1, 2} and state.labels == {"stable": 2, "canary": 2}


def test_rejection_leaves_serving_and_champion_byte_identical(world):
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    before, champion = _digest(target.serving_dir), target.registry.alias_version(CHAMPION).version
    promotion.reject(candidate(0.5), target, ["auc Overall candidate 0.60 champion 0.93"])
    assert _digest(target.serving_dir) == before
    assert target.registry.alias_version(CHAMPION).version == champion
    challenger = target.registry.alias_version(CHALLENGER)
    assert challenger.tags["rejected"] == "true" and "auc Overall" in challenger.tags["rejection_reasons"]


def test_rollback_restores_previous_and_a_second_rollback_changes_nothing(world):
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    promotion.promote(candidate(2.0), target)
    assert "rolled back" in promotion.rollback(target)
    assert target.registry.serving_version(CHAMPION) == 1
    assert model_config.read_stable_version(target.serving_dir) == 1
    state = _digest(target.serving_dir)
    assert "nothing to roll back" in promotion.rollback(target)
    assert _digest(target.serving_dir) == state and target.registry.serving_version(CHAMPION) == 1


def test_crash_after_push_before_aliases_is_undone_by_the_next_promotion(world, monkeypatch):
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    config_before = (target.serving_dir / model_config.MODELS_CONFIG).read_text()

    def crash(*_args, **_kwargs):
        raise SimulatedCrash

    with monkeypatch.context() as patch:
        patch.setattr(Registry, "set_alias", crash)
        with pytest.raises(SimulatedCrash):
            promotion.promote(candidate(2.0), target)
    # The crash left version 2 on disk and staged (loaded, no label), with a journal; the labels still say 1.
    assert (target.serving_dir / "2").is_dir() and (target.serving_dir / promotion.JOURNAL_FILE).is_file()
    assert model_config.read_state(target.serving_dir).labels == {"stable": 1, "canary": 1}
    assert target.registry.serving_version(CHAMPION) == 1
    # The next promotion repairs first (undo 2), then promotes to a fresh, higher version.
    assert promotion.promote(candidate(3.0), target) == 3
    assert not (target.serving_dir / "2").exists()
    assert target.registry.serving_version(CHAMPION) == 3 and target.registry.serving_version(PREVIOUS) == 1
    assert model_config.read_state(target.serving_dir).versions == {1, 3}
    assert config_before != (target.serving_dir / model_config.MODELS_CONFIG).read_text()


def test_crash_after_aliases_before_config_is_completed_by_rollback(world, monkeypatch):
    target, candidate = world
    promotion.promote(candidate(1.0), target)

    def crash(*_args, **_kwargs):
        raise SimulatedCrash

    with monkeypatch.context() as patch:
        patch.setattr(transition, "move_labels", crash)
        with pytest.raises(SimulatedCrash):
            promotion.promote(candidate(2.0), target)
    assert target.registry.serving_version(CHAMPION) == 2
    assert model_config.read_stable_version(target.serving_dir) == 1  # config lags: half-promoted
    message = promotion.rollback(target)  # repairs (finishes 2), then rolls back to 1
    assert "rolled back" in message
    assert not (target.serving_dir / promotion.JOURNAL_FILE).exists()
    assert target.registry.serving_version(CHAMPION) == 1
    assert model_config.read_stable_version(target.serving_dir) == 1


def test_manual_override_needs_a_reason_and_a_served_version(world):
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    promotion.promote(candidate(2.0), target)
    with pytest.raises(promotion.PromotionError, match="needs a reason"):
        promotion.set_champion(target, 1, " ")
    with pytest.raises(LookupError, match="has no registry version 9"):
        promotion.set_champion(target, 9, "typo")
    assert "now the champion" in promotion.set_champion(target, 1, "incident 42")
    assert target.registry.alias_version(CHAMPION).tags["manual_promotion_reason"] == "incident 42"
    assert model_config.read_stable_version(target.serving_dir) == 1


def test_champion_resolution_from_registry_then_serving_dir(world, tmp_path):
    target, candidate = world
    assert resolve_champion(target.serving_dir, target.registry) is None  # first run
    promotion.promote(candidate(1.0), target)
    champion = resolve_champion(target.serving_dir, target.registry)
    assert champion.source == "registry" and champion.serving_version == 1
    no_registry = resolve_champion(target.serving_dir, None)
    assert no_registry.source == "serving_dir" and no_registry.serving_version == 1
    (target.serving_dir / "1" / "saved_model.pb").unlink()
    with pytest.raises(ChampionError, match=r"has no saved_model\.pb"):
        resolve_champion(target.serving_dir, target.registry)


def test_bad_input_14_corrupt_champion_stops_with_a_clear_error(world):
    """An unreadable champion (garbage bytes where saved_model.pb was) is refused before any evaluation."""
    target, candidate = world
    promotion.promote(candidate(1.0), target)
    (target.serving_dir / "1" / "saved_model.pb").write_bytes(b"\x00\xffnot a protocol buffer\x13")
    with pytest.raises(ChampionError) as err:
        resolve_champion(target.serving_dir, target.registry)
    message = str(err.value)
    assert message.startswith(
        f"the champion (serving version 1, from the registry) at {target.serving_dir / '1'} "
        "is unreadable (saved_model.pb is not a SavedModel"
    )
    assert "nothing was evaluated or promoted" in message and "torchtfx promote --version N" in message
