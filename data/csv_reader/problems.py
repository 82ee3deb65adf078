"""What is wrong with a CSV file the reader (sources.py) refused, said in the user's terms: the line, the
byte offset in the file, the character at fault and the fix, instead of Python's csv and codec messages.

Each explanation runs only after a refusal, so the reader's pass over a good file pays nothing for them; where one
needs the file's bytes again (an invalid UTF-8 sequence, a carriage return inside a value), it reads them again.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable
from typing import Protocol

# Python's csv messages (3.10), matched to say what they mean.
_NUL = "line contains NUL"
_FIELD_LIMIT = "field larger than field limit"
_CHUNK = 1 << 20
# The setting a cell over the limit names (data/config/dataset.py).
CELL_LIMIT_SETTING = "max_cell_chars in the dataset config (draft-schema: --max-cell-chars)"


class _Binary(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def csv_error(path: str, err: csv.Error, line: int, last_line: int) -> str:
    """The message for a csv error in the record that starts on ``line``; the reader had read up to ``last_line``."""
    text = str(err)
    if _NUL in text:
        return (
            f"{path}, line {last_line}: a NUL byte (\\x00), which CSV text never holds; if the file is UTF-16, "
            "re-encode it as UTF-8 (iconv -f UTF-16 -t UTF-8), else remove the NUL bytes (a truncated or binary file?)"
        )
    if _FIELD_LIMIT in text:
        limit = csv.field_size_limit()
        open_quote = (
            f"; or does a quote opened on line {line} never close (the value runs on to line {last_line})?"
            if last_line > line
            else ""
        )
        return (
            f"{path}, line {line}: a value longer than {limit:,} characters, the most one cell may hold; if it is "
            f"meant to be this long, raise {CELL_LIMIT_SETTING}{open_quote}"
        )
    return f"{path}, line {line}: malformed CSV ({err}); does a quote opened on this line never close?"


def _line_end(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    return line[-1:] if line[-1:] in ("\r", "\n") else ""


def stray_carriage_return(lines: Iterable[str], first: int, last: int) -> int | None:
    """The line among ``first`` to ``last`` (as the csv reader counts them, a lone CR ending one) that a bare
    carriage return ends, in a file whose header line ends otherwise: the CR sits inside a value (pandas' to_csv
    writes a value's CR unquoted); None if there is none. ``lines``: the file's text split as the reader splits it
    (``newline=""``)."""
    header_end = None
    for number, text in enumerate(lines, start=1):
        if header_end is None:
            header_end = _line_end(text)
            if header_end == "\r":
                return None  # CR line ends (classic Mac): a CR ends a line here
        if number >= first and _line_end(text) == "\r":
            return number
        if number >= last:
            return None
    return None


def carriage_return_error(path: str, line: int, fields: int, width: int) -> str:
    return (
        f"{path}, line {line}: a carriage return (\\r) inside an unquoted value ends the line there, which leaves "
        f"a record of {fields} fields where the header has {width}; quote the value (pandas: "
        "to_csv(quoting=csv.QUOTE_ALL)), or remove the carriage returns from the values"
    )


def _line_breaks(data: bytes, after_cr: bool) -> int:
    """Line breaks (CRLF, CR, LF: one each) in ``data``; ``after_cr``: the bytes before it ended with a CR."""
    breaks = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return breaks - 1 if after_cr and data.startswith(b"\n") else breaks


def invalid_utf8(handle: _Binary) -> tuple[int, int, str, bytes] | None:
    """Where ``handle`` (a file opened binary, at its start) stops being UTF-8: (byte offset in the file, line,
    reason, the bytes at fault), or None if it is UTF-8 throughout."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, breaks, after_cr = 0, 0, False
    while True:
        data = handle.read(_CHUNK)
        pending = len(decoder.getstate()[0])  # bytes of a character begun in the chunk before
        try:
            decoder.decode(data, final=not data)
        except UnicodeDecodeError as err:
            at = offset - pending + err.start
            line = breaks + _line_breaks(data[: max(0, at - offset)], after_cr) + 1
            return at, line, err.reason, err.object[err.start : err.end]
        if not data:
            return None
        breaks += _line_breaks(data, after_cr)
        after_cr = data.endswith(b"\r")
        offset += len(data)


def utf8_error(path: str, found: tuple[int, int, str, bytes]) -> str:
    offset, line, reason, bad = found
    # 0xFF and 0xFE are never UTF-8; first in a file, they begin UTF-16's byte-order mark.
    source = "UTF-16" if offset == 0 and bad[:1] in (b"\xff", b"\xfe") else "WINDOWS-1252"
    return (
        f"{path}, line {line}: not UTF-8 text ({reason}: byte {bad.hex(' ')} at byte offset {offset} of the file); "
        f"re-encode the file as UTF-8, e.g. iconv -f {source} -t UTF-8 IN.csv > OUT.csv (-f: the encoding it "
        "was written in), or in Excel save it as CSV UTF-8"
    )
