"""The two-phase promotion protocol against TF Serving's label rules.

TEST DOUBLE: ``FakeModelServer`` (tests/fakes/model_server.py) stands for tensorflow_model_server, which cannot
run here: a real gRPC ModelService on localhost that refuses a label on a version that is not AVAILABLE,
exactly as ServerCore::UpdateModelVersionLabelMap does. The registry (MLflow sqlite), the serving directory
and the promotion code are real."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer, State
from tests.unit.components.promoter.test_promotion import _saved_model
from torchtfx.components.promoter import promotion
from torchtfx.components.shared.mlflow_client import CHAMPION, Registry
from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.model_config import ServedState


def _candidates(tmp_path: Path, registry: Registry):
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))

    def candidate(value: float) -> promotion.Candidate:
        run_id = registry.client.create_run(experiment).info.run_id
        return promotion.Candidate(_saved_model(tmp_path / f"model-{value}", value), None, run_id, {})

    return candidate


def _target(tmp_path: Path, address: str | None, load_timeout_s: float = 30.0) -> promotion.ServingTarget:
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    return promotion.ServingTarget(
        tmp_path / "serving", "test", registry, server_address=address, load_timeout_s=load_timeout_s
    )


def _refusals(server: FakeModelServer) -> list[str]:
    return [outcome for _config, outcome in server.history if outcome != "OK"]


def test_the_double_refuses_a_label_moved_in_the_same_config_that_adds_its_version(tmp_path):
    """What every promotion did before: one config adding version 2 and moving stable onto it."""
    server = FakeModelServer(load_seconds=0.0)
    (tmp_path / "1").mkdir()
    _saved_model(tmp_path / "1", 1.0)
    assert server.reload(model_config.to_proto("m", tmp_path, ServedState(frozenset({1}))))[0] == 0
    _wait_loaded(server, "m", {1})
    assert server.reload(model_config.to_proto("m", tmp_path, ServedState(frozenset({1}), {"stable": 1})))[0] == 0
    one_shot = model_config.to_proto("m", tmp_path, ServedState(frozenset({1, 2}), {"stable": 2}))
    code, message = server.reload(one_shot)
    assert code == 9 and message == (
        "Request to assign label to version 2 of model m, which is not currently available for inference"
    )
    assert server.labels == {"m": {"stable": 1}} and set(server.states["m"]) == {1}  # nothing changed
    # --allow_version_labels_for_unavailable_models admits only new labels, never a moved one.
    lenient = FakeModelServer(load_seconds=0.0, allow_labels_for_unavailable=True)
    lenient.states, lenient.labels = server.states, server.labels
    assert lenient.reload(one_shot)[0] == 9
    with_new_label = ServedState(frozenset({1, 2}), {"stable": 1, "canary": 2})
    assert lenient.reload(model_config.to_proto("m", tmp_path, with_new_label))[0] == 0


def _wait_loaded(server: FakeModelServer, model: str, versions: set[int], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = server.states.get(model, {})
        if all(states.get(v, (0, ""))[0] in (State.AVAILABLE, State.END) for v in versions):
            return
        time.sleep(0.02)
    raise AssertionError(f"versions {versions} of {model} never loaded: {server.states}")


def test_with_a_server_every_config_is_accepted_and_labels_move_only_onto_available_versions(tmp_path):
    server = FakeModelServer(load_seconds=0.3).start()
    try:
        target = _target(tmp_path, server.address)
        candidate = _candidates(tmp_path, target.registry)
        assert promotion.promote(candidate(1.0), target) == 1
        assert promotion.promote(candidate(2.0), target) == 2
        assert "rolled back" in promotion.rollback(target)
        assert "now the champion" in promotion.set_champion(target, 2, "re-promote after the incident")
    finally:
        server.stop()
    assert _refusals(server) == []
    assert server.label_moves and all(state == State.AVAILABLE for _label, _v, state in server.label_moves)
    # canary is chosen with stable (never the newest folder on disk): the rollback takes both off version 2.
    assert [(label, v) for label, v, _ in server.label_moves] == [
        ("canary", 1),
        ("stable", 1),
        ("canary", 2),
        ("stable", 2),
        ("canary", 1),
        ("stable", 1),
        ("canary", 2),
        ("stable", 2),
    ]
    assert model_config.read_state(target.serving_dir) == ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2})
    assert promotion.pending_label_move(target) is None


def test_without_a_server_labels_wait_for_finish_and_a_polling_server_accepts_every_written_config(
    tmp_path, monkeypatch
):
    """No --serving-address: TF Serving polls models.config. Each written file is fed to the double in order."""
    server = FakeModelServer(load_seconds=0.05)
    written = model_config.write_models_config

    def write_and_poll(serving_dir, model_name, state):
        written(serving_dir, model_name, state)
        server.reload_file(serving_dir / model_config.MODELS_CONFIG)

    monkeypatch.setattr(model_config, "write_models_config", write_and_poll)
    target = _target(tmp_path, None)
    candidate = _candidates(tmp_path, target.registry)
    assert promotion.promote(candidate(1.0), target) == 1
    assert promotion.pending_label_move(target) == 1
    assert model_config.read_state(target.serving_dir) == ServedState(frozenset({1}), {})  # staged, no label yet
    _wait_loaded(server, "test", {1})
    assert "finished the promotion of version 1" in promotion.finish(target)
    assert model_config.read_stable_version(target.serving_dir) == 1
    assert promotion.promote(candidate(2.0), target) == 2
    assert model_config.read_state(target.serving_dir).labels == {"stable": 1, "canary": 1}
    assert target.registry.serving_version(CHAMPION) == 2 and promotion.pending_label_move(target) == 2
    _wait_loaded(server, "test", {2})
    # Nobody confirmed that 2 loaded: the next promotion neither moves the labels onto it nor starts.
    with pytest.raises(promotion.PromotionError, match="nobody has confirmed that TF Serving loaded it"):
        promotion.promote(candidate(3.0), target)
    assert "finished the promotion of version 2" in promotion.finish(target)
    assert promotion.promote(candidate(3.0), target) == 3
    _wait_loaded(server, "test", {3})
    assert "nothing pending" not in promotion.finish(target)
    assert "nothing pending" in promotion.finish(target)
    assert _refusals(server) == [] and all(state == State.AVAILABLE for *_, state in server.label_moves)
    assert model_config.read_state(target.serving_dir).labels == {"stable": 3, "canary": 3}


def test_a_server_that_never_loads_the_version_fails_the_promotion_and_stable_keeps_the_champion(tmp_path):
    server = FakeModelServer(load_seconds=0.05, never_load={2}).start()
    try:
        target = _target(tmp_path, server.address, load_timeout_s=1.0)
        candidate = _candidates(tmp_path, target.registry)
        promotion.promote(candidate(1.0), target)
        champion = target.registry.alias_version(CHAMPION).version
        with pytest.raises(promotion.PromotionError) as err:
            promotion.promote(candidate(2.0), target)
    finally:
        server.stop()
    message = str(err.value)
    assert message.startswith("serving version 2 was not promoted: test version(s) [2] did not become AVAILABLE")
    assert "within 1 s (2: LOADING)" in message and f"registry version {champion}) keeps its labels" in message
    assert model_config.read_state(target.serving_dir) == ServedState(frozenset({1}), {"stable": 1, "canary": 1})
    assert target.registry.alias_version(CHAMPION).version == champion
    assert not (target.serving_dir / "2").exists() and promotion.pending_label_move(target) is None
    failed = target.registry.get_version(int(champion) + 1)
    assert failed.tags["load_failed"] == "true" and "did not become AVAILABLE" in failed.tags["load_failure"]
    assert _refusals(server) == [] and server.labels == {"test": {"stable": 1, "canary": 1}}


def test_a_version_the_server_cannot_load_is_named_with_the_servers_error(tmp_path):
    server = FakeModelServer(load_seconds=0.0).start()
    try:
        target = _target(tmp_path, server.address)
        candidate = _candidates(tmp_path, target.registry)
        promotion.promote(candidate(1.0), target)
        broken = candidate(2.0)
        (broken.saved_model_dir / "saved_model.pb").write_bytes(b"\x00\xffnot a SavedModel")
        unloadable = r"could not load test version 2: \S+/serving/2/saved_model.pb holds no MetaGraph"
        with pytest.raises(promotion.PromotionError, match=unloadable):
            promotion.promote(broken, target)
    finally:
        server.stop()
    assert model_config.read_stable_version(target.serving_dir) == 1


def test_an_unreachable_server_fails_the_promotion_before_anything_is_served(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"  # a port nobody listens on once closed
    target = _target(tmp_path, address)
    with pytest.raises(promotion.PromotionError) as err:
        promotion.promote(_candidates(tmp_path, target.registry)(1.0), target)
    assert f"TF Serving at {address} did not answer HandleReloadConfigRequest (UNAVAILABLE" in str(err.value)
    assert "check --serving-address" in str(err.value)
    assert not (target.serving_dir / model_config.MODELS_CONFIG).exists()
    assert target.registry.alias_version(CHAMPION) is None
