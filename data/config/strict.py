"""The one config mechanism: every config family (dataset, gates, trainer hyperparameters, batching,
PyTorchJob, Kubeflow and local settings) is a :class:`StrictConfig`, a frozen pydantic model that

- rejects unknown keys at every nesting level, listing the allowed ones (a typo such as ``slice:`` or
  ``categorcal:`` would otherwise quietly drop slices or features);
- coerces types (``"3"`` to 3, a YAML list to a tuple) and refuses what cannot be coerced;
- raises its family's error (a :class:`ConfigError`) naming the source file and the key path;
- round-trips through JSON for TFX execution properties (sorted keys: a stable cache key).

A field that torchtfx sets itself (:func:`set_by_torchtfx`) is accepted from code, :meth:`StrictConfig.replace`
and the JSON torchtfx wrote (:meth:`StrictConfig.from_json`), and refused in a config file
(:meth:`StrictConfig.parse`).

YAML files are read with :func:`load_yaml`, which turns a syntax error into a ``file:line`` message and refuses
recursive aliases and aliases that expand to more than :data:`MAX_YAML_NODES` values (a "billion laughs" file);
:func:`load_yaml_text` reads the user's YAML that is not a file (``--model-hparam`` values) the same way.

Numbers that a field can take but no one can mean (NaN, infinity, a billion epochs) are refused by the field's own
bounds, declared beside it with :func:`whole_number` and :func:`finite_number` (``FiniteFloat``, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, cast

import pydantic
import yaml
from pydantic_core import ErrorDetails, PydanticCustomError
from typing_extensions import Self

from torchtfx.data.errors import ConfigError

__all__ = ["ConfigError"]  # defined in data/errors.py, re-exported: every config family imports it from here

# Values (scalars, lists, mappings) a YAML file may hold once its aliases are expanded: a dataset YAML holds
# a few hundred; a "billion laughs" file of 9 aliases x 9 levels holds 9**9.
MAX_YAML_NODES = 100_000
# The validation context of values torchtfx wrote itself (code, replace, its own JSON), not a config file's.
_SET_BY_TORCHTFX = "set_by_torchtfx"
_INTERNAL = {_SET_BY_TORCHTFX: True}


def _key_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith(("function-", "tagged-union["))]
    return ".".join(parts)


def _message(error: ErrorDetails) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "unknown_keys":
        ctx = error["ctx"]
        keys = [f"{_key_path(loc) + '.' if loc else ''}{key}" for key in ctx["keys"]]
        return f"unknown key{'s' if len(keys) > 1 else ''} {', '.join(keys)}; allowed keys here: {ctx['allowed']}"
    where = _key_path(loc)
    text = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if error["type"] == "missing":
        text = "required key is missing"
    elif (
        error["type"] != _SET_BY_TORCHTFX
        and isinstance(error.get("input"), (bool, int, float, str))
        and "got " not in text
    ):
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
        try:  # in code: torchtfx's own values (BaseModel.__init__, with the context)
            self.__pydantic_validator__.validate_python(data, self_instance=self, context=_INTERNAL)
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
    def parse(cls, raw: Any, source: str = "", *, written_by_torchtfx: bool = False) -> Self:
        """Validate ``raw`` (a mapping from a config file; ``written_by_torchtfx``: from a file torchtfx wrote,
        whose fields :func:`set_by_torchtfx` are accepted); errors name ``source`` and the key path."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise cls.config_error(f"{source + ': ' if source else ''}expected a mapping, got {raw!r}")
        try:
            return cls.model_validate(raw, context=_INTERNAL if written_by_torchtfx else None)
        except pydantic.ValidationError as err:
            raise cls.config_error(describe(err, source)) from None

    @classmethod
    def from_json(cls, text: str, source: str = "") -> Self:
        """From the JSON :meth:`to_json` wrote (TFX execution properties, torchtfx's own files)."""
        return cls.parse(json.loads(text), source, written_by_torchtfx=True)

    @classmethod
    def default_of(cls, field: str) -> Any:
        """A field's default, e.g. for a CLI option's default."""
        return cls.model_fields[field].get_default(call_default_factory=True)

    def to_json(self) -> str:
        """Plain, key-sorted JSON: TFX execution properties and the cache keys made from them must be stable."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated like any other input."""
        # Field values, not model_dump(): a field excluded from the JSON must survive a replace.
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).parse({**values, **changes}, written_by_torchtfx=True)


def one_of(field: str, allowed: tuple[str, ...], name: str | None = None) -> Any:
    """A validator for a ``StrictConfig``: ``field`` must be one of ``allowed`` (named ``name`` in the message)."""

    def check(cls: type, value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{name or field} {value!r} is not one of {', '.join(allowed)}")
        return value

    return pydantic.field_validator(field)(classmethod(check))


def set_by_torchtfx(field: str, fix: str) -> Any:
    """A validator for a ``StrictConfig``: ``field`` is set by torchtfx itself, never read from a config file
    (:meth:`StrictConfig.parse` refuses a value, naming the key and ``fix``)."""

    def check(cls: type, value: Any, info: pydantic.ValidationInfo) -> Any:
        if value is not None and not (info.context or {}).get(_SET_BY_TORCHTFX):
            raise PydanticCustomError(
                _SET_BY_TORCHTFX, "is set by torchtfx, never read from a config file; {fix}", {"fix": fix}
            )
        return value

    return pydantic.field_validator(field)(classmethod(check))


# -- bounded values: a field declares its range with these, and a refusal names the range and the value given --
def _number(value: Any) -> int | float | None:
    """``value`` as a number: an int, a float, or text that reads as one (PyYAML reads ``1e9`` as text, not as a
    float); None for anything else, a bool included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        for read in (int, float):
            try:
                return read(value.strip())
            except ValueError:
                pass
    return None


def whole_number(low: int, high: int) -> Any:
    """An ``int`` field from ``low`` to ``high``; a float or text without a fraction (``1e3``, ``1000.0``) is read
    as the whole number it is, anything else refused with the range (pydantic said ``1e30`` was "unable to parse
    string as an integer", and accepted ``1000000000`` buckets)."""

    def check(value: Any) -> int:
        number = _number(value)
        if isinstance(number, float) and number.is_integer():  # is_integer: False for inf and nan
            number = int(number)
        if not isinstance(number, int) or not low <= number <= high:
            raise ValueError(f"must be a whole number from {low:,} to {high:,}, got {value!r}")
        return number

    return Annotated[int, pydantic.BeforeValidator(check)]


def finite_number(above: float | None = None, at_least: float | None = None) -> Any:
    """A ``float`` field that is finite (pydantic's floats take ``.nan`` and ``inf``: a label threshold of NaN made
    every label 0), and greater than ``above`` or at least ``at_least`` when given."""
    bound = f" > {above:g}" if above is not None else f" >= {at_least:g}" if at_least is not None else ""

    def check(value: Any) -> float:
        number = _number(value)
        if number is None or not math.isfinite(number):
            raise ValueError(f"must be a finite number{bound}, got {value!r}")
        if (above is not None and number <= above) or (at_least is not None and number < at_least):
            raise ValueError(f"must be a finite number{bound}, got {value!r}")
        return float(number)

    return Annotated[float, pydantic.BeforeValidator(check)]


FiniteFloat = finite_number()
PositiveFiniteFloat = finite_number(above=0)
NonNegativeFiniteFloat = finite_number(at_least=0)


class YamlAliasError(yaml.composer.ComposerError):
    """An alias that refers to the node it is inside, or aliases that expand to too many values."""


def _mark(event: yaml.Event) -> yaml.error.Mark | None:
    """Where ``event`` is in the file (PyYAML's C loader has a Mark class of its own, with the same fields)."""
    return cast(yaml.error.Mark | None, event.start_mark)


class _GuardedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses recursive aliases and alias expansions beyond ``MAX_YAML_NODES``.

    Aliases share one Python object, so loading is cheap; the expansion happens later, when the value is
    serialized (the JSON execution properties): it ran until memory was gone, and a recursive alias failed there
    as an unexpected ValueError."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open_anchors: set[str] = set()  # anchors of the values being composed
        self._expanded: dict[int, int] = {}  # id(node) -> how many values it holds, its aliases expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise YamlAliasError(
                    None,
                    None,
                    f"alias *{event.anchor} refers to the value it is inside (a "
                    "recursive alias has no end); write the value out",
                    _mark(event),
                )
            return super().compose_node(parent, index)  # the anchor's node, counted where it was defined
        if event.anchor:
            self._open_anchors.add(event.anchor)
        node = super().compose_node(parent, index)
        self._open_anchors.discard(event.anchor)
        if node is not None:
            self._count(node)
        return node

    def _count(self, node: yaml.Node) -> None:
        children = node.value if isinstance(node, yaml.SequenceNode) else []
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        size = 1 + sum(self._expanded[id(child)] for child in children)
        if size > MAX_YAML_NODES:
            raise YamlAliasError(
                None,
                None,
                f"the aliases in this value expand to more than {MAX_YAML_NODES:,} "
                "values (a YAML alias bomb?); write the values out",
                node.start_mark,
            )
        self._expanded[id(node)] = size


def _load_guarded(text: str, documents: bool = False) -> Any:
    """The one document in ``text``, or (``documents``) the list of all its documents."""
    loader = _GuardedLoader(text)
    try:
        if not documents:
            return loader.get_single_data()
        found = []
        while loader.check_data():
            found.append(loader.get_data())
        return found
    finally:
        loader.dispose()


def load_yaml_text(
    text: str, source: str, error: type[Exception] = ConfigError, *, lines: bool = True, documents: bool = False
) -> Any:
    """The YAML document ``text`` of the user's (a file's contents, a command line value; ``documents``: the list
    of all its documents) read with the guarded loader; a syntax error, a recursive alias or aliases that expand
    beyond ``MAX_YAML_NODES`` values become ``error("source:line: ...")`` (``lines``: with the line YAML stopped
    at)."""
    try:
        return _load_guarded(text, documents)
    except YamlAliasError as err:
        raise error(f"{source}{_line(err.problem_mark, lines)}: {err.problem}") from None
    except yaml.MarkedYAMLError as err:
        where = _line(err.problem_mark or err.context_mark, lines)
        raise error(f"{source}{where}: not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise error(f"{source}: not valid YAML: {err}") from None


def _line(mark: yaml.error.Mark | None, lines: bool) -> str:
    return f":{mark.line + 1}" if mark is not None and lines else ""


def load_yaml(path: Path, error: type[ConfigError] = ConfigError) -> Any:
    """The YAML document in ``path`` (:func:`load_yaml_text`); errors name ``path:line``."""
    return load_yaml_text(Path(path).read_text(), str(path), error)
