"""The command line's options for settings, made from their declarations (pipeline/settings/declared.py): the
flag, how its text is read and its help with the default come from there, and a command reads back only what the
user typed (:func:`given_settings`), so an option left out never hides a value from ``pools.yaml`` or the
dataset YAML."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from torchtfx.data.config.model import ModelConfigError
from torchtfx.data.config.strict import load_yaml_text
from torchtfx.pipeline.settings.declared import BY_KEY, KUBEFLOW, LOCAL, SETTINGS, Option, Setting
from torchtfx.pipeline.settings.layers import Layer, command_line_layer

Command = TypeVar("Command", bound=Callable)


def _whole(text: str) -> int | float | None:
    """``12``, or a float without a fraction (``1e30``: click's int refused it as "not a valid integer", without
    the range), as an int where it is a count any setting can hold, else as the float the user wrote (the
    setting's range refuses it as ``1e+30``, not as its 31 digits); None for anything else."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    if not number.is_integer():
        return None
    return int(number) if abs(number) < 2**63 else number


class _Whole(click.ParamType):
    """A whole number, at least ``low``; its upper bound is the setting's own, checked with the other layers'
    values by its typed config's field, which names the setting, its source and the range."""

    name = "integer"

    def __init__(self, low: int | None = None) -> None:
        self.low = low

    def convert(self, value, param, ctx):
        number = value if isinstance(value, int) else _whole(str(value))
        if number is None:
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if self.low is not None and number < self.low:
            self.fail(f"{value!r} is not a whole number >= {self.low}", param, ctx)
        return number


class _AutoOrInt(_Whole):
    """``auto`` or a whole number (range checks are the hyperparameters' own)."""

    name = "auto|N"

    def convert(self, value, param, ctx):
        if value == "auto":
            return value
        number = value if isinstance(value, int) else _whole(str(value))
        if number is None:
            self.fail(f"{value!r} is neither 'auto' nor a whole number", param, ctx)
        return number


_TYPES: dict[str, Any] = {
    "text": str,
    "int": _Whole(),
    "float": float,
    "path": click.Path(path_type=Path),
    "auto_or_int": _AutoOrInt(),
    "non_negative_int": _Whole(low=0),
    "positive_int": _Whole(low=1),
}


def parse_model_hparams(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, each value read as YAML (``3``, ``0.1``, ``[64, 32]``, ``true``, ``reglu``) with the
    guarded loader of every YAML the user gives (a 406-byte alias bomb hung ``config show`` and ``run``)."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ModelConfigError(f"--model-hparam {pair!r} is not KEY=VALUE (e.g. --model-hparam dropout=0.2)")
        parsed[key.strip()] = load_yaml_text(text, f"--model-hparam {key.strip()}", ModelConfigError, lines=False)
    return parsed


def param_name(setting: Setting) -> str:
    return setting.key.replace(".", "__")


def _default_help(setting: Setting, run: str) -> str:
    """Where the value comes from when the option is left out, in precedence order."""
    fallbacks = []
    if run == KUBEFLOW and setting.pools:
        fallbacks.append(f"pools.yaml's {setting.pools}")
    if setting.dataset:
        fallbacks.append(f"the dataset YAML's {setting.dataset}")
    fallbacks.append(setting.default_shown)
    return f"[default: {', else '.join(fallbacks)}]"


def _click_type(option: Option) -> Any:
    return click.Choice(option.choices) if option.kind == "choice" else _TYPES[option.kind]


def _option(setting: Setting, option: Option, run: str) -> Callable[[Command], Command]:
    help_text = f"{option.help} {_default_help(setting, run)}".strip()
    name = param_name(setting)
    if option.kind in ("flag", "no_flag"):
        return click.option(option.flag, name, is_flag=True, help=option.help)
    if option.kind == "pairs":
        return click.option(option.flag, name, multiple=True, metavar="KEY=VALUE", help=help_text)
    return click.option(option.flag, name, type=_click_type(option), help=help_text)


def declared_option(key: str, name: str, **extra: Any) -> Callable[[Command], Command]:
    """A declared setting's option for a command that takes its value directly, with the declared default
    (``torchtfx promote``, ``report``, ``predict``: they read no config layers)."""
    setting = BY_KEY[key]
    option = setting.option
    assert option is not None, key
    default = setting.default if setting.default_text == "" else None
    help_text = f"{extra.pop('help', option.help)} [default: {setting.default_shown}]".strip()
    return click.option(option.flag, name, type=_click_type(option), default=default, help=help_text, **extra)


def setting_options(*runs: str) -> Callable[[Command], Command]:
    """The options of every setting that a run of one of ``runs`` uses (``LOCAL``: ``torchtfx run``;
    ``KUBEFLOW``: ``torchtfx compile``)."""
    declared = [s for s in SETTINGS if s.option is not None and set(runs) & set(s.runs)]

    def decorate(command: Command) -> Command:
        for setting in reversed(declared):
            command = _option(setting, setting.option, KUBEFLOW if KUBEFLOW in runs else LOCAL)(command)
        return command

    return decorate


def given_settings(context: click.Context, run: str) -> Layer:
    """The command line's layer: the setting options the user typed, read from ``context``; an option typed for
    a setting ``run`` does not use is refused by name."""
    given: dict[str, Any] = {}
    for setting in SETTINGS:
        option, name = setting.option, param_name(setting)
        if option is None or name not in context.params:
            continue
        if context.get_parameter_source(name) != ParameterSource.COMMANDLINE:
            continue
        if run not in setting.runs:
            raise click.UsageError(f"{option.flag} applies to `torchtfx run` only, not to a Kubeflow configuration")
        value = context.params[name]
        if option.kind == "pairs":
            value = parse_model_hparams(value)
        elif option.kind == "no_flag":
            value = not value
        given[setting.key] = value
    return command_line_layer(given)
