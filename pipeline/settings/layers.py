"""The layers a setting can come from, read into one shape: the command line, ``pools.yaml``, the dataset YAML.

A layer holds a setting only where its file (or the command line) names it. That is read from the file's own
keys, not by comparing a value with the default: a ``pools.yaml`` that sets ``epochs: 12``, which happens to be
the default, still overrides the dataset YAML, and ``torchtfx config show`` says it came from ``pools.yaml``.
Values are taken from the validated config (types coerced, each file's own errors already raised), so a layer
never holds a value its file's checks refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchtfx.pipeline.settings.declared import SETTINGS, Setting

COMMAND_LINE = "command line"
DEFAULT = "default"


@dataclass(frozen=True)
class Layer:
    """The settings one source holds: setting key -> value, and how that source names it (a flag, a key path)."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    def where(self, key: str) -> str:
        return f"{self.source}: {self.names[key]}"


def _present(raw: Any, path: str) -> bool:
    node = raw
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _value_at(config: Any, path: str) -> Any:
    node = config
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


def file_layer(source: str, raw: Any, config: Any, path_of: str) -> Layer:
    """The settings a config file names: ``raw`` is the file as read (for which keys it names), ``config`` its
    validated form (for the values), ``path_of`` which of a Setting's paths applies (``pools`` or ``dataset``)."""
    layer = Layer(source)
    for setting in SETTINGS:
        path = getattr(setting, path_of)
        if path is not None and _present(raw, path):
            layer.values[setting.key] = _value_at(config, path)
            layer.names[setting.key] = path
    return layer


def command_line_layer(given: dict[str, Any], settings: tuple[Setting, ...] = SETTINGS) -> Layer:
    """The options the user typed (``given``: setting key -> value; what they left out is not in it)."""
    layer = Layer(COMMAND_LINE)
    for setting in settings:
        if setting.key in given and setting.option is not None:
            layer.values[setting.key] = given[setting.key]
            layer.names[setting.key] = setting.option.flag
    return layer
