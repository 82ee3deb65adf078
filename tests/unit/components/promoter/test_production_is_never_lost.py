"""Issue #26, points 1-5: production is never lost. Each test fails on the code before the fix.

Real MLflow sqlite registries, real serving folders, the real CLI, the real ChampionModel and Promoter
executors. TF Serving is the ModelService TEST DOUBLE of tests/fakes/model_server.py (TF Serving's label and
load rules; no tensorflow_model_server runs here)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tfx.types import standard_artifacts

from tests.fakes.model_server import FakeModelServer, State
from tests.unit.components.promoter.test_promotion import _digest, _saved_model
from tests.unit.pipeline.reporting import evaluations
from torchtfx.components.champion import constants as champion_constants
from torchtfx.components.champion import executor as champion_executor
from torchtfx.components.champion.resolve import resolve_champion
from torchtfx.components.promoter import constants, executor, promotion
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import CHAMPION, Registry
from torchtfx.components.shared.serving_identity import ServingBindingError
from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.components.tf_serving.model_config import ServedState
from torchtfx.pipeline.cli import promotion as promotion_cli
from torchtfx.pipeline.cli.main import cli


@pytest.fixture()
def server():
    fake = FakeModelServer(load_seconds=0.05).start()
    yield fake
    fake.stop()


def _target(tmp_path: Path, address: str | None = None, serving: str = "serving") -> promotion.ServingTarget:
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    return promotion.ServingTarget(tmp_path / serving, "test", registry, server_address=address, load_timeout_s=5.0)


def _candidate(tmp_path: Path, registry: Registry, value: float) -> promotion.Candidate:
    found = registry.client.get_experiment_by_name("runs")
    artifacts = str(tmp_path / "artifacts")
    experiment_id = found.experiment_id if found else registry.client.create_experiment("runs", artifacts)
    run_id = registry.client.create_run(experiment_id).info.run_id
    return promotion.Candidate(_saved_model(tmp_path / f"model-{value}", value), None, run_id, {})


def _registry_versions(registry: Registry) -> list[str]:
    return sorted(str(v.version) for v in registry.client.search_model_versions(f"name='{registry.model_name}'"))


def _refusals(server: FakeModelServer) -> list[str]:
    return [outcome for _config, outcome in server.history if outcome != "OK"]


# -- 1. `promote --finish` with another registry deletes nothing -------------------------------------------
def test_1_promote_finish_with_another_registry_or_root_changes_nothing_and_names_both_sides(tmp_path, monkeypatch):
    """As after `make run`: version 1 staged, its label move pending. `promote --finish` with another
    MLFLOW_TRACKING_URI, or with a second pipeline root sharing --serving-dir, used to undo "the interrupted
    promotion" and delete serving/taxi/1."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root, other = tmp_path / "runs", tmp_path / "laptop-runs"
    for folder in (root / "mlflow", other / "mlflow"):
        folder.mkdir(parents=True)
    target = promotion_cli.serving_target(promotion_cli.local_settings("taxi", root, None))
    assert promotion.promote(_candidate(tmp_path, target.registry, 1.0), target) == 1
    assert promotion.pending_label_move(target) == 1
    serving, before = target.serving_dir, _digest(target.serving_dir)
    owner = f"registry sqlite:///{root.resolve() / 'mlflow' / 'mlflow.db'}, model torchtfx-taxi"
    wrong = [
        (
            {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'empty.db'}"},
            ["--pipeline-root", str(root)],
            f"sqlite:///{tmp_path / 'empty.db'}",
        ),
        (
            {},
            ["--pipeline-root", str(other), "--serving-dir", str(serving)],
            f"sqlite:///{other.resolve() / 'mlflow' / 'mlflow.db'}",
        ),
    ]
    for env, args, theirs in wrong:
        result = CliRunner().invoke(cli, ["promote", "--finish", *args], env=env)
        assert result.exit_code == 1, result.output
        assert f"the serving directory {serving} belongs to {owner}" in result.output
        assert f"this command uses registry {theirs}, model torchtfx-taxi" in result.output
        assert "Nothing was changed" in result.output and "unexpected" not in result.output
        assert _digest(serving) == before and (serving / "1" / "saved_model.pb").is_file()
    assert not (tmp_path / "empty.db").exists() and not (other / "mlflow" / "mlflow.db").exists()  # none created
    result = CliRunner().invoke(cli, ["promote", "--finish", "--pipeline-root", str(root)])
    assert result.exit_code == 0 and "finished the promotion of version 1" in result.output, result.output
    assert model_config.read_state(serving, "taxi") == ServedState(frozenset({1}), {"stable": 1, "canary": 1})


def test_1_a_journal_naming_a_served_version_removes_nothing(tmp_path, server):
    """A folder is removed only when the registry that created it says so: not when another registry version
    (here `previous`) is served from it."""
    target = _target(tmp_path, server.address)
    for value in (1.0, 2.0):
        promotion.promote(_candidate(tmp_path, target.registry, value), target)
    (target.serving_dir / promotion.JOURNAL_FILE).write_text('{"serving_version": 1, "step": "push"}')
    before = _digest(target.serving_dir)
    with pytest.raises(promotion.PromotionError, match="registry version 1 of torchtfx-test is served from it"):
        promotion.finish(target)
    assert _digest(target.serving_dir) == before and (target.serving_dir / "1" / "saved_model.pb").is_file()


# -- 2. a registry is tied to one serving directory, and every move checks the folder's bytes ----------------
def test_2_a_laptop_run_with_the_team_registry_is_refused_and_a_folder_must_hold_the_registered_bytes(tmp_path, server):
    production = _target(tmp_path, server.address)
    for value in (1.0, 2.0):
        promotion.promote(_candidate(tmp_path, production.registry, value), production)
    registered, served_before = _registry_versions(production.registry), _digest(production.serving_dir)
    laptop = _target(tmp_path, None, serving="laptop-serving")  # the team's registry, a local serving folder
    expected = re.escape(f"serves the serving directory {production.serving_dir} (binding ")
    with pytest.raises(ServingBindingError, match=expected):
        resolve_champion(laptop.serving_dir, laptop.registry)  # ChampionModel stops the laptop run first
    with pytest.raises(ServingBindingError, match=expected):
        promotion.promote(_candidate(tmp_path, laptop.registry, 3.0), laptop)
    assert _registry_versions(production.registry) == registered
    assert production.registry.serving_version(CHAMPION) == 2 and not list(laptop.serving_dir.glob("[0-9]*"))
    # A folder that no longer holds the bytes registered under its number is never labelled.
    shutil.rmtree(production.serving_dir / "1")
    _saved_model(production.serving_dir / "1", 9.0)
    served_before = {k: v for k, v in _digest(production.serving_dir).items() if not k.startswith("1/")}
    with pytest.raises(promotion.PromotionError, match=r"/serving/1 does not hold registry version 1 of "):
        promotion.rollback(production)
    assert production.registry.serving_version(CHAMPION) == 2
    assert model_config.read_state(production.serving_dir).labels == {"stable": 2, "canary": 2}
    after = {k: v for k, v in _digest(production.serving_dir).items() if not k.startswith("1/")}
    assert after == served_before


# -- 3. the Promoter promotes only over the champion the Evaluator compared with ---------------------------
def _champion_model(tmp_path: Path, target: promotion.ServingTarget, name: str) -> standard_artifacts.Model:
    """ChampionModel's executor, as a run runs it: the champion it hands the Evaluator (and the Promoter)."""
    artifact, statistics = standard_artifacts.Model(), standard_artifacts.ExampleStatistics()
    artifact.uri, statistics.uri = str(tmp_path / name / "champion"), str(tmp_path / name / "statistics")
    properties = {
        contracts.SERVING_DIR_KEY: str(target.serving_dir),
        contracts.REGISTERED_MODEL_KEY: target.registry.model_name,
        contracts.MLFLOW_TRACKING_URI_KEY: target.registry.tracking_uri,
    }
    output = champion_executor.Executor().Do(
        {},
        {champion_constants.CHAMPION_KEY: [artifact], champion_constants.STATISTICS_KEY: [statistics]},
        properties,
    )
    return artifact if output.output_artifacts[champion_constants.CHAMPION_KEY].artifacts else None


def _promoter_run(tmp_path: Path, target: promotion.ServingTarget, name: str, value: float, champion) -> None:
    """The Promoter's executor on run ``name``'s blessed candidate, with the champion its Evaluator compared with."""
    model, evaluation, blessing = (
        standard_artifacts.Model(),
        standard_artifacts.ModelEvaluation(),
        standard_artifacts.ModelBlessing(),
    )
    model.uri = str(tmp_path / name / "model")
    run_id = _candidate(tmp_path, target.registry, value).mlflow_run_id  # the Trainer's MLflow run
    model.set_string_custom_property(contracts.MLFLOW_RUN_ID_PROPERTY, run_id)
    _saved_model(tmp_path / name / "model" / contracts.SERVING_MODEL_SUBDIR, value)
    (tmp_path / name / "evaluation").mkdir()
    evaluation.uri = evaluations.binary(tmp_path / name / "evaluation", champion=False)
    blessing.set_int_custom_property(contracts.BLESSED_PROPERTY, 1)
    inputs = {
        constants.MODEL_KEY: [model],
        constants.BLESSING_KEY: [blessing],
        constants.EVALUATION_KEY: [evaluation],
        constants.EXAMPLES_KEY: [standard_artifacts.Examples()],
        constants.CHAMPION_KEY: [champion] if champion is not None else [],
    }
    properties = {
        contracts.SERVING_DIR_KEY: str(target.serving_dir),
        constants.SERVING_MODEL_NAME_KEY: target.model_name,
        contracts.REGISTERED_MODEL_KEY: target.registry.model_name,
        contracts.MLFLOW_TRACKING_URI_KEY: target.registry.tracking_uri,
        constants.CODE_VERSION_KEY: "abc123",
        constants.BATCHING_KEY: BatchingParams().to_json(),
        constants.SERVING_ADDRESS_KEY: target.server_address or "",
        constants.LOAD_TIMEOUT_KEY: 30.0,
    }
    outputs = {constants.PUSHED_MODEL_KEY: [standard_artifacts.PushedModel()]}
    executor.Executor().Do(inputs, outputs, properties)


def test_3_a_run_whose_champion_moved_meanwhile_is_not_promoted_over_the_new_one(tmp_path, server, monkeypatch):
    """Two overlapping runs: both Evaluators compared against registry version 1; run B promotes first. Run A's
    blessing says nothing about B (change gates, drift), so run A's Promoter must not replace B."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    target = _target(tmp_path, server.address)
    _promoter_run(tmp_path, target, "first", 1.0, _champion_model(tmp_path, target, "first"))
    run_a, run_b = _champion_model(tmp_path, target, "a"), _champion_model(tmp_path, target, "b")
    assert run_a.get_string_custom_property(champion_constants.REGISTRY_VERSION_PROPERTY) == "1"
    _promoter_run(tmp_path, target, "b", 2.0, run_b)
    assert target.registry.serving_version(CHAMPION) == 2
    registered, served = _registry_versions(target.registry), _digest(target.serving_dir)
    with pytest.raises(promotion.ChampionMovedError) as err:
        _promoter_run(tmp_path, target, "a", 3.0, run_a)
    assert str(err.value).startswith(
        "the champion changed while this run evaluated its candidate: the Evaluator compared it with registry "
        "version 1, and torchtfx-test's champion is now registry version 2"
    )
    assert "NOT promoted" in str(err.value) and "Rerun the pipeline" in str(err.value)
    assert _registry_versions(target.registry) == registered and _digest(target.serving_dir) == served
    assert target.registry.serving_version(CHAMPION) == 2


# -- 4. a version TF Serving cannot load never gets a label, and rollback undoes it -------------------------
def _wait_loaded(server: FakeModelServer, versions: set[int], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = server.states.get("test", {})
        if all(states.get(v, (0, ""))[0] in (State.AVAILABLE, State.END) for v in versions):
            return
        time.sleep(0.02)
    raise AssertionError(f"versions {versions} never loaded: {server.states}")


def test_4_an_unloadable_version_never_wedges_the_server_and_rollback_undoes_it(tmp_path, server, monkeypatch):
    """No server address: TF Serving polls models.config (each written file is fed to the double). Version 2
    cannot load. Before: the next promotion moved the labels onto it on trust and TF Serving refused every config
    from then on, while `promote --rollback --serving-address` was refused for exactly that incident."""
    written = model_config.write_models_config

    def write_and_poll(serving_dir, model_name, state):
        written(serving_dir, model_name, state)
        if (serving_dir / model_config.MODELS_CONFIG).is_file():
            server.reload_file(serving_dir / model_config.MODELS_CONFIG)

    monkeypatch.setattr(model_config, "write_models_config", write_and_poll)
    polled, confirmed = _target(tmp_path), _target(tmp_path, server.address)
    promotion.promote(_candidate(tmp_path, polled.registry, 1.0), polled)
    _wait_loaded(server, {1})
    promotion.finish(polled)
    broken = _candidate(tmp_path, polled.registry, 2.0)
    (broken.saved_model_dir / "saved_model.pb").write_bytes(b"\x00\xffnot a SavedModel")
    assert promotion.promote(broken, polled) == 2
    _wait_loaded(server, {2})
    assert server.states["test"][2][0] == State.END  # TF Serving could not load it
    with pytest.raises(promotion.PromotionError, match="nobody has confirmed that TF Serving loaded it"):
        promotion.promote(_candidate(tmp_path, polled.registry, 3.0), polled)
    assert server.labels == {"test": {"stable": 1, "canary": 1}} and _refusals(server) == []
    message = promotion.rollback(confirmed)
    assert message.startswith("rolled back: undid the promotion of version 2 (TF Serving at ")
    assert "could not load test version 2: " in message
    assert "the champion is registry version 1 again and no label points at version 2" in message
    assert model_config.read_state(confirmed.serving_dir) == ServedState(frozenset({1}), {"stable": 1, "canary": 1})
    assert confirmed.registry.serving_version(CHAMPION) == 1
    assert confirmed.registry.get_version(2).tags["load_failed"] == "true"
    assert promotion.promote(_candidate(tmp_path, confirmed.registry, 3.0), confirmed) == 3
    assert _refusals(server) == [] and all(state == State.AVAILABLE for *_, state in server.label_moves)


def test_4_after_a_rollback_no_label_points_at_the_rolled_back_version_and_it_is_unloaded(tmp_path, server):
    target = _target(tmp_path, server.address)
    for value in (1.0, 2.0):
        promotion.promote(_candidate(tmp_path, target.registry, value), target)
    promotion.rollback(target)
    assert model_config.read_state(target.serving_dir) == ServedState(frozenset({1}), {"stable": 1, "canary": 1})
    assert server.labels == {"test": {"stable": 1, "canary": 1}} and server.states["test"][2][0] == State.END


# -- 5. models.config is edited, not rebuilt; a broken one stops every command with the right fix ------------
def test_5_hand_edits_to_models_config_survive_and_a_broken_file_stops_every_command(tmp_path, server):
    target = _target(tmp_path, server.address)
    for value in (1.0, 2.0, 3.0):
        promotion.promote(_candidate(tmp_path, target.registry, value), target)
    _saved_model(tmp_path / "other" / "1", 7.0)
    path = target.serving_dir / model_config.MODELS_CONFIG
    config = model_config.read_models_config(target.serving_dir)
    ours = config.model_config_list.config[0]
    ours.model_version_policy.specific.versions.append(1)  # pinned by hand
    other = config.model_config_list.config.add(
        name="other", base_path=str(tmp_path / "other"), model_platform="tensorflow"
    )
    other.model_version_policy.specific.versions.append(1)
    path.write_text(text_format.MessageToString(config))
    assert server.reload_file(path) == (0, "")
    _wait_loaded(server, {1})
    ours.version_labels["shadow"] = 1  # once 1 is loaded again, as TF Serving requires
    path.write_text(text_format.MessageToString(config))
    assert server.reload_file(path) == (0, "")
    assert promotion.promote(_candidate(tmp_path, target.registry, 4.0), target) == 4
    assert model_config.read_state(target.serving_dir, "test") == ServedState(
        frozenset({1, 3, 4}), {"stable": 4, "canary": 4, "shadow": 1}
    )
    assert model_config.read_state(target.serving_dir, "other") == ServedState(frozenset({1}), {})
    assert _refusals(server) == [] and server.states["other"][1][0] == State.AVAILABLE
    # A file that does not parse: every command stops before any change, and names the fix that works.
    good = path.read_text()
    path.write_text(good.replace("model_config_list {", "model_config_list {{", 1))
    registered, before = _registry_versions(target.registry), _digest(target.serving_dir)
    commands = (
        lambda: promotion.promote(_candidate(tmp_path, target.registry, 5.0), target),
        lambda: promotion.rollback(target),
        lambda: promotion.finish(target),
        lambda: resolve_champion(target.serving_dir, target.registry),
    )
    for command in commands:
        with pytest.raises(ServingConfigError) as err:
            command()
        assert f"put back the config torchtfx wrote last: `cp {target.serving_dir / '.models.config.torchtfx'} " in (
            str(err.value)
        )
    assert _registry_versions(target.registry) == registered and _digest(target.serving_dir) == before
    shutil.copy(target.serving_dir / ".models.config.torchtfx", path)  # the advice, followed
    assert "rolled back" in promotion.rollback(target)
    assert model_config.read_state(target.serving_dir, "test").labels == {"stable": 3, "canary": 3, "shadow": 1}
