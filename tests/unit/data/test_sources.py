"""Input files, checked before any Beam work: each malformed-input case gets one message naming the file,
the line and the problem (real files on disk, the real checks CsvExampleGen's executor runs)."""

from __future__ import annotations

import pytest

from torchtfx.data.sources import DataSourceError, check_csv_structure, csv_files, csv_rows, read_header

HEADER = "fare,tips,company\n"


def _csv(tmp_path, text: str, name: str = "data.csv", encoding: str = "utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_well_formed_csv_counts_rows_including_quoted_newlines(tmp_path):
    path = _csv(tmp_path, HEADER + '10.5,2.0,"Flash Cab"\n3.0,0.0,"Multi\nline, with comma"\n')
    assert check_csv_structure(path) == 2


def test_bad_input_01_wrong_field_count_names_file_and_line(tmp_path):
    path = _csv(tmp_path, HEADER + "10.5,2.0,Flash Cab\n3.0,0.0,Blue Diamond,extra\n")
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    assert str(err.value) == (
        f"{path}, line 3: 4 fields where the header has 3; fix the line (a stray delimiter, or an unquoted comma "
        "inside a value?)"
    )


def test_bad_input_01_unterminated_quote_names_file_and_line(tmp_path):
    path = _csv(tmp_path, HEADER + '10.5,2.0,"Flash Cab\n3.0,0.0,Blue Diamond\n')
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    assert str(err.value) == (
        f"{path}, line 2: malformed CSV (unexpected end of data); does a quote opened on this line never close?"
    )


def test_bad_input_05_empty_file_and_header_only_file(tmp_path):
    with pytest.raises(DataSourceError, match="is empty; each CSV needs a header line and rows"):
        check_csv_structure(_csv(tmp_path, ""))
    with pytest.raises(DataSourceError, match="has a header but no rows"):
        check_csv_structure(_csv(tmp_path, HEADER, name="header_only.csv"))


def test_bad_input_05_empty_input_directory(tmp_path):
    with pytest.raises(DataSourceError, match=f"input directory {tmp_path} holds no \\*.csv files"):
        csv_files(tmp_path)


def test_bad_input_12_missing_or_unreadable_input(tmp_path):
    with pytest.raises(DataSourceError, match="does not exist"):
        csv_files(tmp_path / "nope")
    with pytest.raises(DataSourceError, match="is not a directory"):
        csv_files(_csv(tmp_path, HEADER + "1,2,3\n"))
    # Unreadable: a file whose bytes are not text (root ignores permission bits, so chmod cannot show it).
    binary = _csv(tmp_path, "fare,tips\n\xff\xfe\x00\x01", name="binary.csv", encoding="latin-1")
    with pytest.raises(DataSourceError, match=r"binary.csv is not UTF-8 text"):
        check_csv_structure(binary)


def test_bad_input_12_dangling_link_cannot_be_read(tmp_path):
    (tmp_path / "data.csv").symlink_to(tmp_path / "gone.csv")
    with pytest.raises(DataSourceError, match=r"cannot read .*data.csv: No such file or directory"):
        csv_files(tmp_path)
    with pytest.raises(DataSourceError, match=r"cannot read .*data.csv: No such file or directory"):
        check_csv_structure(tmp_path / "data.csv")


def test_excel_byte_order_mark_and_crlf_are_read_as_plain_utf8(tmp_path):
    """Excel's "CSV UTF-8": a BOM before the first column's name, CRLF line ends, a quoted CRLF inside a value."""
    path = tmp_path / "excel.csv"
    path.write_bytes(b'\xef\xbb\xbffare,tips,company\r\n10.5,2.0,"Flash\r\nCab"\r\n\r\n3.0,0.0,Blue\r\n')

    assert read_header(path) == ["fare", "tips", "company"]
    assert list(csv_rows(path)) == [
        (1, ["fare", "tips", "company"]),
        (2, ["10.5", "2.0", "Flash\r\nCab"]),
        (5, ["3.0", "0.0", "Blue"]),
    ]
    assert check_csv_structure(path) == 2
    assert csv_files(tmp_path) == [path]


class _GFileLike:
    """A remote file as tf.io.gfile opens it: read(n) and close(), no readable()."""

    def __init__(self, data: bytes):
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._at + n
        chunk, self._at = self._data[self._at : end], min(end, len(self._data))
        return chunk

    def close(self) -> None:
        pass


def test_remote_files_are_read_through_the_given_binary_opener(tmp_path):
    data = b"\xef\xbb\xbffare,tips\r\n" + b"".join(b"%d.5,0\r\n" % i for i in range(5000))
    assert check_csv_structure("gs://bucket/data.csv", lambda _: _GFileLike(data)) == 5000
    assert read_header("gs://bucket/data.csv", lambda _: _GFileLike(data)) == ["fare", "tips"]


def test_bad_input_duplicate_column_names_the_column_and_both_positions(tmp_path):
    path = _csv(tmp_path, "fare,tips,company,tips\n1,2,c,3\n")
    message = (
        f"{path}: the header names column 'tips' twice (columns 2 and 4), so its values cannot be told apart; "
        "rename or remove one of them in the header"
    )
    for check in (read_header, check_csv_structure, lambda _: csv_files(tmp_path)):
        with pytest.raises(DataSourceError) as err:
            check(path)
        assert str(err.value) == message


def test_bad_input_unnamed_column_says_where_and_the_likely_cause(tmp_path):
    path = _csv(tmp_path, ",fare,tips\n0,1,2\n")  # pandas' to_csv(index=True)
    with pytest.raises(DataSourceError) as err:
        read_header(path)
    assert str(err.value) == (
        f"{path}: column 1 of the header has no name (''); name it, or remove the column (a trailing comma on the "
        "header line, or a DataFrame index written by to_csv(index=True)?)"
    )


def test_schema_draft_names_the_first_column_without_the_byte_order_mark(tmp_path):
    """``torchtfx draft-schema`` reads the header through the same reader (TFDV's kept the BOM in the name)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    from torchtfx.data.schema_draft import draft_schema

    _csv(tmp_path, "\ufefffare,company\r\n" + "".join(f"{i}.5,c{i % 2}\r\n" for i in range(20)), encoding="utf-8")
    schema = draft_schema(tmp_path)
    assert {f.name: f.type for f in schema.feature} == {"fare": schema_pb2.FLOAT, "company": schema_pb2.BYTES}
