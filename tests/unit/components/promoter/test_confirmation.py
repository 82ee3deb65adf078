"""``--confirm-labels``: who confirms a load before the labels move, against a real serving directory and a real
MLflow sqlite registry, with no TF Serving (none reads the folder of a local run).

``staged`` (the default) leaves the labels waiting for ``torchtfx promote --finish``, which is what every local
``make run`` left behind, so the next run trained and evaluated for minutes before its Promoter refused;
``immediate`` is the user's confirmation given in advance."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.unit.components.promoter.test_serving_protocol import _candidates, _target
from torchtfx.components.promoter import promotion
from torchtfx.components.promoter.confirmation import IMMEDIATE
from torchtfx.components.promoter.journal import require_no_pending_promotion
from torchtfx.components.promoter.target import PromotionError
from torchtfx.components.shared.mlflow_client import CHAMPION
from torchtfx.components.tf_serving import model_config
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.pipeline.cli.main import cli
from torchtfx.pipeline.local.runner import LocalSettings, LocalSettingsError


def test_immediate_moves_the_labels_in_the_promotion_and_a_second_promotion_follows(tmp_path):
    target = _target(tmp_path, None)
    target = type(target)(**{**target.__dict__, "confirm_labels": IMMEDIATE})
    candidate = _candidates(tmp_path, target.registry)
    assert promotion.promote(candidate(1.0), target) == 1
    assert promotion.pending_label_move(target) is None
    assert model_config.read_state(target.serving_dir).labels == {"stable": 1, "canary": 1}
    assert promotion.promote(candidate(2.0), target) == 2  # `make run` twice in a row
    state = model_config.read_state(target.serving_dir)
    assert state.labels == {"stable": 2, "canary": 2} and state.versions == {1, 2}
    assert target.registry.serving_version(CHAMPION) == 2


def test_immediate_finishes_the_label_move_a_staged_run_left_then_promotes(tmp_path):
    staged = _target(tmp_path, None)
    candidate = _candidates(tmp_path, staged.registry)
    assert promotion.promote(candidate(1.0), staged) == 1
    assert promotion.pending_label_move(staged) == 1 and model_config.read_state(staged.serving_dir).labels == {}
    with pytest.raises(PromotionError, match=r"serving version 1 .* `torchtfx promote --finish --dataset taxi`"):
        require_no_pending_promotion(staged.serving_dir, None, "staged", "torchtfx promote --finish --dataset taxi")
    require_no_pending_promotion(staged.serving_dir, None, IMMEDIATE)  # the Promoter settles it: no refusal
    require_no_pending_promotion(staged.serving_dir, "localhost:8500", "staged")  # a server confirms it
    immediate = type(staged)(**{**staged.__dict__, "confirm_labels": IMMEDIATE})
    assert promotion.promote(candidate(2.0), immediate) == 2
    assert promotion.pending_label_move(immediate) is None
    assert model_config.read_state(staged.serving_dir).labels == {"stable": 2, "canary": 2}


def test_immediate_is_refused_with_a_serving_address(tmp_path):
    with pytest.raises(LocalSettingsError, match=r"a serving address \(localhost:8500\) is given.*drop"):
        LocalSettings(
            dataset=load_dataset_config("taxi"),
            pipeline_root=tmp_path,
            serving_address="localhost:8500",
            confirm_labels=IMMEDIATE,
        )
    with pytest.raises(LocalSettingsError, match="confirm_labels"):
        LocalSettings(dataset=load_dataset_config("taxi"), pipeline_root=tmp_path, confirm_labels="later")


def test_config_show_names_the_settings_source():
    shown = CliRunner().invoke(cli, ["config", "show", "--confirm-labels", "immediate"])
    assert shown.exit_code == 0, shown.output
    line = next(line for line in shown.output.splitlines() if line.startswith("confirm_labels "))
    assert line.split()[1:] == ["immediate", "command", "line:", "--confirm-labels"]
    default = CliRunner().invoke(cli, ["config", "show"]).output
    assert next(line for line in default.splitlines() if line.startswith("confirm_labels ")).split()[1:] == [
        "staged",
        "default",
    ]
