"""CSV cells to tf.Example features, typed by the curated schema (the schema is the contract; inference is not).

TFX's CsvExampleGen infers each column's type from the values a run happens to read: a FLOAT column whose
values are all whole numbers (every ``tips`` 0, a batch of whole-dollar fares) became INT, and the DataGate
stopped the run on a type anomaly. Here the schema decides: a FLOAT column reads ``0`` as 0.0, and an INT column
reads ``3.0`` as 3 (what pandas writes for an integer column with missing values). Columns the schema does not
know are kept as text, so the DataGate still reports them as new columns. The output is what TFX writes: one
feature per CSV column, an empty cell an empty value list of the column's type, and a column without a value in
any row a feature without a type.

A numeric column reads the dataset config's ``missing_values`` (``NA``, ``NULL``, ``NaN``: data/config/missing.py)
as an empty cell; a text column keeps them as values (``NA`` is North America there).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path

from google.protobuf import text_format
from tensorflow.core.example import example_pb2
from tensorflow_metadata.proto.v0 import schema_pb2

from torchtfx.data.csv_reader.sources import DataSourceError

TYPE_NAMES = {schema_pb2.INT: "INT", schema_pb2.FLOAT: "FLOAT", schema_pb2.BYTES: "BYTES"}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def load_schema_types(schema_file: str) -> dict[str, int]:
    """Column name -> schema_pb2 type (INT, FLOAT or BYTES) of the curated schema."""
    schema = schema_pb2.Schema()
    try:
        text_format.Parse(Path(schema_file).read_text(), schema)
    except OSError as err:
        raise DataSourceError(f"cannot read the curated schema {schema_file}: {err.strerror or err}") from None
    except text_format.ParseError as err:
        raise DataSourceError(f"the curated schema {schema_file} is not a Schema in text format: {err}") from None
    unusable = [f.name for f in schema.feature if f.type not in TYPE_NAMES]
    if unusable:
        raise DataSourceError(
            f"{schema_file}: columns {unusable} have no INT, FLOAT or BYTES type; a CSV column needs one of them"
        )
    return {f.name: f.type for f in schema.feature}


def parse_int(text: str) -> int | None:
    """The integer ``text`` spells (``3``, or ``3.0`` / ``3e0``, which are whole numbers), else None."""
    try:
        value = int(text)
    except ValueError:
        try:  # Decimal, not float: an 18-digit ``...0.0`` must not round
            number = Decimal(text)
        except InvalidOperation:
            return None
        # Range first: int() of a "1e999999999" would build a billion-digit number.
        if not number.is_finite() or not _INT64_MIN <= number <= _INT64_MAX or number != number.to_integral_value():
            return None
        return int(number)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


_PARSERS: dict[int, Callable[[str], object]] = {
    schema_pb2.INT: parse_int,
    schema_pb2.FLOAT: parse_float,
    schema_pb2.BYTES: str.encode,  # UTF-8, as TFX writes text
}
_LISTS = {schema_pb2.INT: "int64_list", schema_pb2.FLOAT: "float_list", schema_pb2.BYTES: "bytes_list"}
_EMPTY_ONLY = frozenset({""})  # a text column's only missing value


def _normalized(name: str) -> str:
    """A column name without what a reader cannot see or tell apart: invisible characters (zero-width space,
    byte-order mark), surrounding blanks, Unicode look-alikes and case."""
    visible = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf"))
    return unicodedata.normalize("NFKC", visible).strip().casefold()


def _misspelled(path: str, header: list[str], schema_types: dict[str, int], schema_file: str) -> None:
    """A header name that differs from a schema column only invisibly is that column, misspelled: say so now,
    instead of the DataGate's "new column" plus "column dropped" pair with an invisible difference."""
    wanted = {_normalized(name): name for name in schema_types if name not in header}
    for position, name in enumerate(header, start=1):
        meant = wanted.get(_normalized(name)) if name not in schema_types else None
        if meant is not None:
            raise DataSourceError(
                f"{path}: column {position} of the header is {name!r}, which the schema ({schema_file}) does not "
                f"know; it has {meant!r}. Rename the column to {meant!r} in the header"
            )


class ColumnPlan:
    """How one file's columns become features: the schema's type, or text for a column it does not know.

    A column with no value in any row of the input (``empty``) is written without a type, as TFX writes a
    column whose type it could not infer: the DataGate then reports it "not present in any examples" (an empty
    value list would count as present). A numeric column's cell that is one of ``missing_values`` is an empty
    cell; a text column's is a value."""

    def __init__(
        self,
        header: list[str],
        schema_types: dict[str, int],
        empty: frozenset[str] = frozenset(),
        missing_values: Iterable[str] = (),
    ):
        self.header = tuple(header)
        self.kinds = tuple(schema_types.get(name, schema_pb2.BYTES) for name in header)
        numeric_missing = _EMPTY_ONLY | frozenset(missing_values)
        # Per column: the cells that stand for no value.
        self.missing_cells = tuple(_EMPTY_ONLY if kind == schema_pb2.BYTES else numeric_missing for kind in self.kinds)
        # In the file, not in the schema: kept as text, and the DataGate reports a new column.
        self.unknown = tuple(name for name in header if name not in schema_types)
        # In the schema, not in the file: absent, and the DataGate reports a dropped column.
        self.missing = tuple(name for name in schema_types if name not in header)
        columns = zip(self.header, self.kinds, self.missing_cells, strict=True)
        self._columns = tuple(
            (name, kind, None if name in empty else _LISTS[kind], _PARSERS[kind], missing)
            for name, kind, missing in columns
        )
        self._numeric = tuple((i, _PARSERS[k]) for i, k in enumerate(self.kinds) if k != schema_pb2.BYTES)
        self._numeric_missing = numeric_missing

    @classmethod
    def for_file(
        cls,
        path: str,
        header: list[str],
        schema_types: dict[str, int],
        schema_file: str,
        missing_values: Iterable[str] = (),
    ) -> ColumnPlan:
        _misspelled(path, header, schema_types, schema_file)
        return cls(header, schema_types, missing_values=missing_values)

    @property
    def encodings(self) -> tuple[tuple[str, int, bool, frozenset[str]], ...]:
        """Per column: name, schema type, whether it is written typed (False: no value anywhere in the input), and
        the cells that stand for no value; what the batch encoding (example_batch.py) reads."""
        return tuple((name, kind, lists is not None, missing) for name, kind, lists, _parse, missing in self._columns)

    def bad_cells(self, record: list[str]) -> list[int]:
        """Positions of the cells that are neither missing nor readable as their column's type."""
        missing = self._numeric_missing
        return [i for i, parse in self._numeric if record[i] not in missing and parse(record[i]) is None]

    def to_example(self, record: list[str]) -> example_pb2.Example:
        """One checked record (see :meth:`bad_cells`) as a tf.Example; a missing cell is an empty value list."""
        example = example_pb2.Example()
        features = example.features.feature
        for (name, kind, list_name, parse, missing), text in zip(self._columns, record, strict=True):
            if list_name is None and text in missing:
                features.get_or_create(name)  # no value anywhere: no type, as TFX writes it
                continue
            values = getattr(features[name], list_name or _LISTS[kind])
            if text not in missing:
                value = parse(text)
                if value is None:
                    raise ValueError(f"column {name!r}: {text!r} is not {TYPE_NAMES[kind]}")
                values.value.append(value)
            else:
                values.SetInParent()  # typed and empty, as TFX writes a missing value
        return example
