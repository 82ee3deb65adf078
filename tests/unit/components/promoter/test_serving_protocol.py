"""The two-phase promotion protocol against TF Serving's label rules.

TEST DOUBLE: ``FakeModelServer`` (tests/fakes/model_server.py) stands for tensorflow_model_server, which cannot
run here: a real gRPC ModelService on localhost that refuses a label on a version that is not AVAILABLE,
exactly as ServerCore::UpdateModelVersionLabelMap does. The registry (MLflow sqlite), the serving directory
and the promotion code are real."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from tests.fakes.model_server import FakeModelServer, State
from tests.unit.components.promoter.test_promotion import _saved_model
from torchtfx.components.promoter import promotion
from torchtfx.components.shared import serving_config
from torchtfx.components.shared.mlflow_client import CHAMPION, Registry
from torchtfx.components.shared.serving_config import ServedState


def _candidates(tmp_path: Path, registry: Registry):
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))

    def candidate(value: float) -> promotion.Candidate:
        run_id = registry.client.create_run(experiment).info.run_id
        return promotion.Candidate(_saved_model(tmp_path / f"model-{value}", value), None, run_id, {})

    return candidate


def _target(tmp_path: Path, address: str | None, load_timeout_s: float = 30.0) -> promotion.ServingTarget:
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    return promotion.ServingTarget(tmp_path / "serving", "test", registry, server_address=address,
                                   load_timeout_s=load_timeout_s)  # fmt: skip


def _refusals(server: FakeModelServer) -> list[str]:
    return [outcome for _config, outcome in server.history if outcome != "OK"]


def test_the_double_refuses_a_label_moved_in_the_same_config_that_adds_its_version(tmp_path):
    """What every promotion did before: one config adding version 2 and moving stable onto it."""
    server = FakeModelServer(load_seconds=0.0)
    (tmp_path / "1").mkdir()
    _saved_model(tmp_path / "1", 1.0)
    assert server.reload(serving_config.to_proto("m", tmp_path, ServedState(frozenset({1}))))[0] == 0
    _wait_loaded(server, "m", {1})
    assert server.reload(serving_config.to_proto("m", tmp_path, ServedState(frozenset({1}), {"stable": 1})))[0] == 0
    one_shot = serving_config.to_proto("m", tmp_path, ServedState(frozenset({1, 2}), {"stable": 2}))
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
    assert lenient.reload(serving_config.to_proto("m", tmp_path, with_new_label))[0] == 0


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
        ("canary", 1), ("stable", 1), ("canary", 2), ("stable", 2), ("canary", 1), ("stable", 1), ("canary", 2),
        ("stable", 2),
    ]  # fmt: skip
    assert serving_config.read_state(target.serving_dir) == ServedState(frozenset({1, 2}), {"stable": 2, "canary": 2})
    assert promotion.pending_label_move(target) is None


def test_without_a_server_labels_wait_for_finish_and_a_polling_server_accepts_every_written_config(
    tmp_path, monkeypatch
):
    """No --serving-address: TF Serving polls models.config. Each written file is fed to the double in order."""
    server = FakeModelServer(load_seconds=0.05)
    written = serving_config.write_models_config

    def write_and_poll(serving_dir, model_name, state):
        written(serving_dir, model_name, state)
        server.reload_file(serving_dir / serving_config.MODELS_CONFIG)

    monkeypatch.setattr(serving_config, "write_models_config", write_and_poll)
    target = _target(tmp_path, None)
    candidate = _candidates(tmp_path, target.registry)
    assert promotion.promote(candidate(1.0), target) == 1
    assert promotion.pending_label_move(target) == 1
    assert serving_config.read_state(target.serving_dir) == ServedState(frozenset({1}), {})  # staged, no label yet
    _wait_loaded(server, "test", {1})
    assert "finished the promotion of version 1" in promotion.finish(target)
    assert serving_config.read_stable_version(target.serving_dir) == 1
    assert promotion.promote(candidate(2.0), target) == 2
    assert serving_config.read_state(target.serving_dir).labels == {"stable": 1, "canary": 1}
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
    assert serving_config.read_state(target.serving_dir).labels == {"stable": 3, "canary": 3}


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
    assert serving_config.read_state(target.serving_dir) == ServedState(frozenset({1}), {"stable": 1, "canary": 1})
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
    assert serving_config.read_stable_version(target.serving_dir) == 1


def test_an_unreachable_server_fails_the_promotion_before_anything_is_served(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"  # a port nobody listens on once closed
    target = _target(tmp_path, address)
    with pytest.raises(promotion.PromotionError) as err:
        promotion.promote(_candidates(tmp_path, target.registry)(1.0), target)
    assert f"TF Serving at {address} did not answer HandleReloadConfigRequest (UNAVAILABLE" in str(err.value)
    assert "check --serving-address" in str(err.value)
    assert not (target.serving_dir / serving_config.MODELS_CONFIG).exists()
    assert target.registry.alias_version(CHAMPION) is None


def test_models_config_is_a_model_server_config_text_proto(tmp_path):
    state = ServedState(frozenset({3, 7}), {"stable": 3, "canary": 7})
    serving_config.write_models_config(tmp_path, "taxi", state)
    parsed = model_server_config_pb2.ModelServerConfig()
    text_format.Parse((tmp_path / serving_config.MODELS_CONFIG).read_text(), parsed)
    (model,) = parsed.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == ("taxi", str(tmp_path), "tensorflow")
    assert list(model.model_version_policy.specific.versions) == [3, 7]
    assert dict(model.version_labels) == {"stable": 3, "canary": 7}
    assert serving_config.read_state(tmp_path) == state
    (tmp_path / serving_config.MODELS_CONFIG).write_text("model_config_list { config { nme: 'x' } }")
    with pytest.raises(serving_config.ServingConfigError, match="is not a ModelServerConfig text proto"):
        serving_config.read_state(tmp_path)


# tensorflow_serving/servables/tensorflow/session_bundle_config.proto (tensorflow/serving 2.16.1), the message the
# pip package does not ship, as published:
UPSTREAM_BATCHING_PARAMETERS = """
  google.protobuf.Int64Value max_batch_size = 1;
  google.protobuf.Int64Value batch_timeout_micros = 2;
  google.protobuf.Int64Value max_enqueued_batches = 3;
  google.protobuf.Int64Value num_batch_threads = 4;
  google.protobuf.StringValue thread_pool_name = 5;
  repeated int64 allowed_batch_sizes = 6;
  bool pad_variable_length_inputs = 7;
  google.protobuf.BoolValue enable_large_batch_splitting = 8;
  google.protobuf.Int64Value max_execution_batch_size = 9;
"""


def test_batching_parameters_match_the_upstream_proto_and_round_trip(tmp_path):
    descriptor = serving_config.batching_message_class().DESCRIPTOR
    assert descriptor.full_name == "tensorflow.serving.BatchingParameters"
    fields = {f.name: (f.number, f.message_type.full_name if f.message_type else f.type) for f in descriptor.fields}
    for kind, name, number in re.findall(r"(\S+) (\w+) = (\d+);", UPSTREAM_BATCHING_PARAMETERS):
        expected = kind if kind.startswith("google.") else fields[name][1]
        assert fields[name] == (int(number), expected), name
    assert len(fields) == len(re.findall(r" = \d+;", UPSTREAM_BATCHING_PARAMETERS))
    from torchtfx.components.shared.serving_layout import BatchingParams

    serving_config.write_batching(tmp_path, BatchingParams(max_batch_size=64, num_batch_threads=2))
    read = serving_config.read_batching(tmp_path)
    assert (read.max_batch_size.value, read.num_batch_threads.value, read.batch_timeout_micros.value) == (64, 2, 2000)
