"""Where a dataset's CSV files come from (a user's directory, or a file shipped inside a package), and the one
CSV reader that the checks before any Beam work and ExampleGen's decoding share, so both see the same records.

The reader takes what spreadsheet programs write: a UTF-8 byte-order mark (Excel's "CSV UTF-8" starts every
file with one, and TFX's reader kept it in the first column's name, so a run stopped with ``New column
'\\ufeffpickup_community_area'`` and ``Column dropped: pickup_community_area``), CRLF or CR line ends, and quoted
values that span lines. Its refusals are explained by data/csv_reader/problems.py: an invalid UTF-8 byte by line and
offset in the file, a carriage return inside an unquoted value, a NUL byte, a value over ``max_cell_chars``.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, cast

from torchtfx.data.config.dataset import MAX_CELL_CHARS, DatasetConfig
from torchtfx.data.csv_reader import problems as csv_problems

# "utf-8-sig" drops a leading byte-order mark and reads a file without one unchanged.
ENCODING = "utf-8-sig"
OpenBinary = Callable[[str], IO[bytes]]


class BinaryReader(Protocol):
    """What the reader needs of a file opened binary: an ``IO[bytes]``, or an object with only ``read`` and
    ``close`` (tf.io.gfile's GFile, a part of a file: data/csv_reader/parts.py)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class DataSourceError(ValueError):
    """The input data cannot be found or read."""


# A cut point (data/csv_reader/parts.py) is noted at most once per this many bytes: about 100 for a 100 MiB file.
CUT_GRANULARITY_BYTES = 1 << 20
BOM = "\ufeff"


@dataclass
class CutPoints:
    """Where records of one file start (byte offset, line), noted while the file is read through
    :meth:`counting`; at most one per ``every`` bytes."""

    every: int = CUT_GRANULARITY_BYTES
    offset: int = 0  # bytes read so far: after a record, where the next one starts
    body: tuple[int, int] = (0, 2)  # the first record after the header
    points: list[tuple[int, int]] = field(default_factory=list)
    size: int = 0  # the whole file, once read to the end
    next_mark: int = 0  # the offset from which the next cut point is noted
    max_cell_chars: int = MAX_CELL_CHARS  # the limit the file was checked with: its parts are read with it

    def counting(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` (decoded with plain utf-8), counting their bytes; a leading byte-order mark is dropped, as
        "utf-8-sig" does, and counted."""
        first = True
        for line in lines:
            self.offset += len(line.encode("utf-8"))
            if first:
                first = False
                line = line.removeprefix(BOM)
            yield line

    def at_body(self, line: int) -> None:
        self.body = (self.offset, line)
        self.next_mark = self.offset + self.every

    def after_record(self, next_line: int) -> None:
        if self.offset >= self.next_mark:
            self.points.append((self.offset, next_line))
            self.next_mark = self.offset + self.every

    def finish(self) -> None:
        self.size = self.offset
        if self.points and self.points[-1][0] >= self.size:
            self.points.pop()  # a cut at the end of the file would leave an empty part


def packaged_csv(package: str, relative_path: str) -> Path:
    """A CSV file inside an installed package, e.g. tfx's Chicago taxi sample."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataSourceError(f"package {package!r} is not installed; cannot resolve {relative_path}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative_path
    if not path.is_file():
        raise DataSourceError(f"{path} is missing from the installed {package!r} package")
    return path


def csv_files(data_dir: Path) -> list[Path]:
    """The CSV files of an input directory, with clear errors for the usual mistakes (header included)."""
    data_dir = Path(data_dir)
    if not data_dir.exists():
        raise DataSourceError(f"input directory {data_dir} does not exist")
    if not data_dir.is_dir():
        raise DataSourceError(f"input path {data_dir} is not a directory; point --data-dir at a folder of CSV files")
    # Links too: a dangling one must fail by name, not be skipped (ExampleGen would try to read it).
    files = sorted(p for p in data_dir.glob("*.csv") if p.is_file() or p.is_symlink())
    if not files:
        raise DataSourceError(f"input directory {data_dir} holds no *.csv files")
    for path in files:
        read_header(path)
    return files


class _RawReader(io.RawIOBase):
    """A binary file object that has ``read(n)`` but no ``readable()`` (tf.io.gfile's GFile), as a raw stream
    that ``io.TextIOWrapper`` can decode."""

    def __init__(self, handle: BinaryReader):
        self._handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        super().close()


def text_stream(handle: BinaryReader, encoding: str = ENCODING) -> IO[str]:
    # A file object that says whether it is readable is one io.TextIOWrapper can decode; a bare reader gets one.
    binary = cast(IO[bytes], handle) if hasattr(handle, "readable") else io.BufferedReader(_RawReader(handle))
    # newline="": the csv module sees CRLF, CR and quoted line breaks itself, as it needs to.
    return io.TextIOWrapper(binary, encoding=encoding, newline="")


class FieldCountError(DataSourceError):
    """A record with more or fewer fields than the header."""

    def __init__(self, path: Path | str, line: int, last_line: int, fields: int, width: int):
        super().__init__(
            f"{path}, line {line}: {fields} fields where the header has {width}; "
            "fix the line (a stray delimiter, or an unquoted comma inside a value?)"
        )
        self.line, self.last_line, self.fields, self.width = line, last_line, fields, width


def set_cell_limit(max_cell_chars: int) -> None:
    """csv's field_size_limit, which is one per process: each of our readers sets it before it reads (the checks,
    ExampleGen's Beam workers, draft-schema's), so none reads with a limit another left behind."""
    csv.field_size_limit(max_cell_chars)


def check_header(path: Path | str, header: list[str]) -> None:
    """Every column has a name of its own; the message says which column and what to change."""
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if not name.strip():
            raise DataSourceError(
                f"{path}: column {position} of the header has no name ({name!r}); name it, or remove the column "
                "(a trailing comma on the header line, or a DataFrame index written by to_csv(index=True)?)"
            )
        if name in seen:
            raise DataSourceError(
                f"{path}: the header names column {name!r} twice (columns {seen[name]} and {position}), so its "
                "values cannot be told apart; rename or remove one of them in the header"
            )
        seen[name] = position


def csv_rows(
    path: Path | str,
    open_binary: OpenBinary | None = None,
    cuts: CutPoints | None = None,
    max_cell_chars: int = MAX_CELL_CHARS,
) -> Generator[tuple[int, list[str]], None, None]:
    """The header (line 1), then each non-blank record with the line it starts on, all checked: a
    :class:`DataSourceError` names the file, the line and the problem. ``open_binary`` opens remote files
    (e.g. ``tf.io.gfile.GFile(path, "rb")``). ``cuts`` (data/csv_reader/parts.py) notes where records start, by byte
    offset, so that the file can be read in parts. A cell may hold up to ``max_cell_chars`` characters."""
    opener = open_binary or (lambda p: open(p, "rb"))
    set_cell_limit(max_cell_chars)
    if cuts is not None:
        cuts.max_cell_chars = max_cell_chars
    reader: Any = None
    try:
        # With cuts, plain utf-8: cuts.counting drops a byte-order mark itself, after counting its bytes.
        with text_stream(opener(str(path)), ENCODING if cuts is None else "utf-8") as handle:
            reader = csv.reader(handle if cuts is None else cuts.counting(handle), strict=True)
            header = next(reader, None)
            if not header:
                raise DataSourceError(f"{path} is empty; each CSV needs a header line and rows")
            check_header(path, header)
            yield 1, header
            if cuts is not None:
                cuts.at_body(reader.line_num + 1)
            yield from checked_records(path, reader, len(header), 1, cuts.after_record if cuts else None)
            if cuts is not None:
                cuts.finish()
    except csv.Error as err:  # in the header: checked_records explains the records' own
        raise DataSourceError(csv_problems.csv_error(str(path), err, 1, reader.line_num)) from None
    except FieldCountError as err:
        raise _with_carriage_return(path, opener, err) from None
    except UnicodeDecodeError as err:
        raise _not_utf8(path, opener, err) from None
    except OSError as err:
        raise DataSourceError(f"cannot read {path}: {err.strerror or err}") from None


def _with_carriage_return(path: Path | str, opener: OpenBinary, err: FieldCountError) -> DataSourceError:
    """``err``, or, where a carriage return inside a value split the record (or the one before it), that: a CR
    ends a record early, so it leaves too few fields, in the record or in the rest of the line after it."""
    if err.fields > err.width:
        return err
    try:
        with text_stream(opener(str(path))) as handle:
            line = csv_problems.stray_carriage_return(handle, err.line - 1, err.last_line)
    except (OSError, UnicodeDecodeError):
        return err
    if line is None:
        return err
    return DataSourceError(csv_problems.carriage_return_error(str(path), line, err.fields, err.width))


def _not_utf8(path: Path | str, opener: OpenBinary, err: UnicodeDecodeError) -> DataSourceError:
    """Where the file stops being UTF-8, by line and byte offset in the file (``err`` has the offset in the
    decoder's chunk of 8 KiB), read again from its start."""
    try:
        handle = opener(str(path))
        try:
            found = csv_problems.invalid_utf8(handle)
        finally:
            handle.close()
    except OSError:
        found = None
    if found is None:  # the file changed since, or cannot be read again
        return DataSourceError(f"{path} is not UTF-8 text ({err.reason}); re-encode it as UTF-8 (e.g. with iconv)")
    return DataSourceError(csv_problems.utf8_error(str(path), found))


def checked_records(
    path: Path | str,
    reader: Any,  # a csv.reader: records, and line_num
    width: int,
    first_line: int,
    after_record: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, list[str]]]:
    """Each non-blank record ``reader`` (a ``csv.reader``) reads from here on, with the line it starts on
    (``first_line`` plus the lines the reader has read), ``width`` fields each; ``after_record`` gets the line where
    the next record starts. The one record loop of a whole file (:func:`csv_rows`) and of a part of one
    (data/csv_reader/parts.py)."""
    line = first_line + reader.line_num
    try:
        for record in reader:
            if record and len(record) != width:
                raise FieldCountError(path, line, first_line + reader.line_num - 1, len(record), width)
            if record:
                yield line, record
            line = first_line + reader.line_num
            if after_record is not None:
                after_record(line)
    except csv.Error as err:
        last_line = first_line + reader.line_num - 1
        raise DataSourceError(csv_problems.csv_error(str(path), err, line, last_line)) from None


def read_header(
    path: Path | str, open_binary: OpenBinary | None = None, max_cell_chars: int = MAX_CELL_CHARS
) -> list[str]:
    """The column names of a CSV file, checked (no byte-order mark, none empty or repeated)."""
    rows = csv_rows(path, open_binary, max_cell_chars=max_cell_chars)
    try:
        return next(rows)[1]
    finally:
        rows.close()


def check_csv_structure(
    path: Path | str, open_binary: OpenBinary | None = None, max_cell_chars: int = MAX_CELL_CHARS
) -> int:
    """Every record of ``path`` parses and has as many fields as the header; returns the number of rows.

    Beam's CSV decoder would fail on these deep inside ExampleGen with a stack trace; here the message names
    the file, the line and what is wrong.
    """
    rows = sum(1 for _ in csv_rows(path, open_binary, max_cell_chars=max_cell_chars)) - 1
    if rows == 0:
        raise DataSourceError(f"{path} has a header but no rows")
    return rows


def default_data_dir(cfg: DatasetConfig) -> Path:
    """The folder holding the dataset's packaged CSV (ExampleGen reads every CSV in a folder)."""
    if not (cfg.source_package and cfg.source_path):
        raise DataSourceError(f"dataset {cfg.name!r} has no packaged source; pass --data-dir")
    return packaged_csv(cfg.source_package, cfg.source_path).parent
