"""The one config mechanism: every config family (dataset, gates, trainer hyperparameters, batching,
PyTorchJob, Kubeflow and local settings) is a :class:`StrictConfig`, a frozen pydantic model that

- rejects unknown keys at every nesting level, listing the allowed ones (a typo such as ``slice:`` or
  ``categorcal:`` would otherwise quietly drop slices or features);
- coerces types (``"3"`` to 3, a YAML list to a tuple) and refuses what cannot be coerced;
- raises its family's error (a :class:`ConfigError`) naming the source file and the key path;
- round-trips through JSON for TFX execution properties (sorted keys: a stable cache key).

YAML files are read with :func:`load_yaml`, which turns a syntax error into a ``file:line`` message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pydantic
import yaml
from pydantic_core import PydanticCustomError


class ConfigError(ValueError):
    """A config is malformed; the message names the source, the key path and what is allowed."""


def _key_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith(("function-", "tagged-union["))]
    return ".".join(parts)


def _message(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "unknown_keys":
        ctx = error["ctx"]
        keys = [f"{_key_path(loc) + '.' if loc else ''}{key}" for key in ctx["keys"]]
        return f"unknown key{'s' if len(keys) > 1 else ''} {', '.join(keys)}; allowed keys here: {ctx['allowed']}"
    where = _key_path(loc)
    text = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if error["type"] == "missing":
        text = "required key is missing"
    elif isinstance(error.get("input"), (bool, int, float, str)) and "got " not in text:
        text += f", got {error['input']!r}"
    return f"{where}: {text}" if where else text


def describe(err: pydantic.ValidationError, source: str) -> str:
    """``source: key.path: what is wrong`` for each problem pydantic found, one per line after the first."""
    messages = list(dict.fromkeys(_message(e) for e in err.errors(include_url=False)))
    head = f"{source}: " if source else ""
    body = messages[0] if len(messages) == 1 else "".join(f"\n  {m}" for m in messages)
    return head + body


class StrictConfig(pydantic.BaseModel):
    """Base of every config family. Subclasses set ``config_error`` to their own ConfigError subclass."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, validate_default=True)
    config_error: ClassVar[type[ConfigError]] = ConfigError

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as err:
            raise self.config_error(describe(err, "")) from None

    # Constructing a config in code raises its family's error; nested sections validated inside a parent
    # still report their key path to the parent (pydantic then skips this __init__, as it does BaseModel's).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @pydantic.model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = sorted(f.alias or name for name, f in cls.model_fields.items())
            unknown = sorted(str(k) for k in data if k not in allowed)
            if unknown:
                raise PydanticCustomError(
                    "unknown_keys", "unknown keys {keys}", {"keys": unknown, "allowed": ", ".join(allowed)}
                )
        return data

    @classmethod
    def parse(cls, raw: Any, source: str = "") -> StrictConfig:
        """Validate ``raw`` (a mapping from YAML or JSON); errors name ``source`` and the key path."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise cls.config_error(f"{source + ': ' if source else ''}expected a mapping, got {raw!r}")
        try:
            return cls.model_validate(raw)
        except pydantic.ValidationError as err:
            raise cls.config_error(describe(err, source)) from None

    @classmethod
    def from_json(cls, text: str, source: str = "") -> StrictConfig:
        return cls.parse(json.loads(text), source)

    @classmethod
    def default_of(cls, field: str) -> Any:
        """A field's default, e.g. for a CLI option's default."""
        return cls.model_fields[field].get_default(call_default_factory=True)

    def to_json(self) -> str:
        """Plain, key-sorted JSON: TFX execution properties and the cache keys made from them must be stable."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def replace(self, **changes: Any) -> StrictConfig:
        """A copy with ``changes``, validated like any other input."""
        # Field values, not model_dump(): a field excluded from the JSON must survive a replace.
        return type(self).parse({**{name: getattr(self, name) for name in type(self).model_fields}, **changes})


def one_of(field: str, allowed: tuple[str, ...], name: str | None = None) -> Any:
    """A validator for a ``StrictConfig``: ``field`` must be one of ``allowed`` (named ``name`` in the message)."""

    def check(cls: type, value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{name or field} {value!r} is not one of {', '.join(allowed)}")
        return value

    return pydantic.field_validator(field)(classmethod(check))


def load_yaml(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """The YAML document in ``path``; a syntax error becomes ``path:line: ...`` (the line YAML stopped at)."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{path}{line}: not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise error(f"{path}: not valid YAML: {err}") from None
