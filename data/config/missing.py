"""Missing values, defined once for the dataset config, ExampleGen and ``torchtfx draft-schema``.

- ``missing_values:`` (dataset config): the text that stands for "no value" in a *numeric* column (INT or FLOAT in
  the curated schema). R writes ``NA``, Excel ``#N/A``, SQL exports ``NULL``, pandas ``NaN`` (or ``nan``). Such a
  cell is read as an empty cell: an empty value list in the tf.Example. Text columns keep every value as it is:
  ``NA`` is a real value there (North America, Namibia), and a text column has its own token for a missing value.
  An empty cell is missing in every column, whatever the list says.
- ``label.missing:`` (binary labels): what a row whose label column (or ``relative_to`` column) has no value
  becomes. ``refuse`` (the default): neither trained on nor evaluated, as multiclass and regression always do;
  ``negative``: label 0, the behaviour before there was a choice (a cancelled flight with no arrival delay
  counted as "on time").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# What R, Excel, SQL and pandas exports write for a missing number: none of them is a number, so reading them as
# missing in a numeric column can only replace an error ("'NA' is not a number") or a NaN.
DEFAULT_MISSING_VALUES = ("", "NA", "N/A", "n/a", "#N/A", "NULL", "null", "None", "NaN", "nan")

REFUSE = "refuse"
NEGATIVE = "negative"
LABEL_MISSING = (REFUSE, NEGATIVE)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def checked_markers(values: Any) -> tuple[str, ...]:
    """The ``missing_values`` list, refused by name where YAML or the user made a marker that would damage data."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ValueError(f"must be a list of strings, e.g. [NA, 'NULL'], got {values!r}")
    markers = []
    for value in values:
        if value is None:
            raise ValueError("holds a null: YAML reads an unquoted null, NULL or ~ as no value; quote it ('NULL')")
        if isinstance(value, bool) or not isinstance(value, str) or _is_number(value):
            raise ValueError(
                f"holds {value!r}, a number (or a YAML boolean): a marker applies to every numeric "
                "column and would erase that real value everywhere; replace such a sentinel in the data instead "
                "(quote a marker that YAML would read otherwise: 'yes', 'on')"
            )
        markers.append(value)
    return tuple(dict.fromkeys(markers))


def optional_columns(schema_path: Path, columns: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``columns`` that the curated schema lets be missing: every column without a fixed ``shape``
    (Transform reads a column with one as a dense tensor, so a row without its value stops the run instead;
    the DataGate reports it first). A column the schema does not know counts as optional."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    try:
        schema = text_format.Parse(Path(schema_path).read_text(), schema_pb2.Schema())
    except text_format.ParseError as err:
        raise ValueError(f"the curated schema {schema_path} is not a Schema in text format: {err}") from None
    dense = {feature.name for feature in schema.feature if feature.HasField("shape")}
    return tuple(column for column in columns if column not in dense)
