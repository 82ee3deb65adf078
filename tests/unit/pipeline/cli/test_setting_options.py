"""The command line's setting options: made from the declarations, and only what the user typed is read back."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from torchtfx.data.config.model import ModelConfigError
from torchtfx.pipeline.cli.setting_options import given_settings, parse_model_hparams, setting_options
from torchtfx.pipeline.settings.declared import LOCAL


def test_model_hyperparameters_are_key_value_pairs_read_as_yaml():
    assert parse_model_hparams(["hidden_units=[64, 32]", "dropout=0.2", "activation=geglu"]) == {
        "hidden_units": [64, 32], "dropout": 0.2, "activation": "geglu"
    }  # fmt: skip
    with pytest.raises(ModelConfigError, match="is not KEY=VALUE"):
        parse_model_hparams(["dropout"])


def test_only_typed_options_enter_the_command_line_layer():
    seen = {}

    @click.command()
    @setting_options(LOCAL)
    def command(**_options):
        seen["layer"] = given_settings(click.get_current_context(), LOCAL)

    result = CliRunner().invoke(command, ["--epochs", "12", "--no-cache", "--model-hparam", "d=8", "--detect-anomaly"])
    assert result.exit_code == 0, result.output
    layer = seen["layer"]
    # --epochs 12 equals the default and still counts: the user asked for it
    assert layer.values == {
        "trainer.epochs": 12,
        "cache": False,
        "model.hparams": {"d": 8},
        "trainer.detect_anomaly": True,
    }
    assert layer.where("cache") == "command line: --no-cache"
    CliRunner().invoke(command, [])
    assert seen["layer"].values == {}
