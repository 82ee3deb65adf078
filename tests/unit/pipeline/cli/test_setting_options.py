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
        "hidden_units": [64, 32],
        "dropout": 0.2,
        "activation": "geglu",
    }
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


# A billion-laughs value of 406 bytes (9 aliases of 9 aliases, 9 levels deep: 9**9 "lol"s once expanded). YAML keeps
# one object per anchor, so plain yaml.safe_load returned it at once; `config show` and `run` then hung writing it
# out (issue #41).
_LEVELS = [("a", "lol")] + [(name, "*" + below) for below, name in zip("abcdefgh", "bcdefghi", strict=True)]
ALIAS_BOMB = "{" + ", ".join(f"{name}: &{name} [{', '.join([item] * 9)}]" for name, item in _LEVELS) + "}\n"


def test_a_model_hparam_alias_bomb_is_refused_by_the_guarded_loader():
    assert len(ALIAS_BOMB.encode()) == 406
    with pytest.raises(ModelConfigError, match=r"^--model-hparam blocks: the aliases in this value expand to more"):
        parse_model_hparams([f"blocks={ALIAS_BOMB}"])
    with pytest.raises(ModelConfigError, match=r"^--model-hparam blocks: not valid YAML: "):
        parse_model_hparams(["blocks=[1, 2"])
