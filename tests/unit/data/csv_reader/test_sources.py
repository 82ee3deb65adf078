"""Input files, checked before any Beam work: each malformed-input case gets one message naming the file,
the line and the problem (real files on disk, the real checks CsvExampleGen's executor runs)."""

from __future__ import annotations

import pytest

from torchtfx.data.csv_reader.sources import DataSourceError, check_csv_structure, csv_files, csv_rows, read_header

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
    with pytest.raises(DataSourceError, match=r"binary.csv, line 2: not UTF-8 text"):
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


@pytest.mark.parametrize(
    "rows, line",
    [
        ("10.5,2.0,Flash Cab\n3.0,0\r.0,Blue Diamond\n", 3),  # the record ends at the CR: 2 fields
        ("10.5,2.0,Flash Cab\n3.0,0.0,Blue\rDiamond\n4.0,1.0,Medallion\n", 3),  # after it, "Diamond": 1 field
    ],
)
def test_a_bare_carriage_return_inside_an_unquoted_value_is_named_with_its_line(tmp_path, rows, line):
    """pandas' to_csv on Linux quotes a value holding LF but writes one holding CR as it is."""
    path = _csv(tmp_path, HEADER + rows)
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    message = str(err.value)
    assert message.startswith(f"{path}, line {line}: a carriage return (\\r) inside an unquoted value"), message
    assert "to_csv(quoting=csv.QUOTE_ALL)" in message
    assert "stray delimiter" not in message


def test_cr_line_ends_are_not_taken_for_a_stray_carriage_return(tmp_path):
    path = _csv(tmp_path, "fare,tips,company\r10.5,2.0\r")
    with pytest.raises(DataSourceError, match=r"line 2: 2 fields where the header has 3; fix the line"):
        check_csv_structure(path)


def test_invalid_utf8_past_the_first_8_kib_names_the_line_and_the_offset_in_the_file(tmp_path):
    body = "".join(f"{i}.5,2.0,Flash Cab {i}\n" for i in range(600)).encode()
    assert len(body) > 8192  # past the decoder's first chunk
    path = tmp_path / "latin1.csv"
    path.write_bytes(HEADER.encode() + body + "3.0,0.0,Caf\xe9 Cab\n".encode("latin-1"))
    offset = len(HEADER) + len(body) + len("3.0,0.0,Caf")
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    assert str(err.value) == (
        f"{path}, line 602: not UTF-8 text (invalid continuation byte: byte e9 at byte offset {offset} of the file); "
        "re-encode the file as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 IN.csv > OUT.csv (-f: the encoding it "
        "was written in), or in Excel save it as CSV UTF-8"
    )


def test_invalid_utf8_in_a_remote_file_and_a_utf16_file_are_named_the_same_way(tmp_path):
    data = b"fare,tips\r\n" + b"".join(b"%d.5,0\r\n" % i for i in range(5000)) + b"1,\xff\r\n"
    with pytest.raises(DataSourceError, match=rf"line 5002: not UTF-8 text .* offset {len(data) - 3} of the file"):
        check_csv_structure("gs://bucket/data.csv", lambda _: _GFileLike(data))
    utf16 = _csv(tmp_path, HEADER + "1,2,c\n", name="utf16.csv", encoding="utf-16")
    with pytest.raises(DataSourceError, match=r"line 1: not UTF-8 text .* offset 0 of .* iconv -f UTF-16 -t UTF-8"):
        check_csv_structure(utf16)


def test_a_nul_byte_is_named_without_the_unclosed_quote_guess(tmp_path):
    path = _csv(tmp_path, HEADER + "10.5,2.0,Flash Cab\n3.0,0.0,Blue\x00Diamond\n")
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    assert str(err.value) == (
        f"{path}, line 3: a NUL byte (\\x00), which CSV text never holds; if the file is UTF-16, re-encode it as "
        "UTF-8 (iconv -f UTF-16 -t UTF-8), else remove the NUL bytes (a truncated or binary file?)"
    )


def test_a_2_mb_cell_is_named_with_the_setting_and_without_the_unclosed_quote_guess(tmp_path):
    path = _csv(tmp_path, HEADER + "10.5,2.0,Flash Cab\n3.0,0.0," + "x" * 2_000_000 + "\n")
    with pytest.raises(DataSourceError) as err:
        check_csv_structure(path)
    assert str(err.value) == (
        f"{path}, line 3: a value longer than 1,048,576 characters, the most one cell may hold; if it is meant to "
        "be this long, raise max_cell_chars in the dataset config (draft-schema: --max-cell-chars)"
    )


def test_a_quote_that_never_closes_past_the_cell_limit_keeps_the_quote_guess(tmp_path):
    path = _csv(tmp_path, HEADER + '3.0,0.0,"Blue\n' + "4.0,1.0,Flash Cab\n" * 20_000)
    with pytest.raises(DataSourceError, match=r"line 2: a value longer than 131,072 .* does a quote opened on line 2"):
        check_csv_structure(path, max_cell_chars=131_072)


def test_a_cell_over_131072_characters_is_read_when_max_cell_chars_allows_it(tmp_path):
    long_value = "word " * 40_000  # 200,000 characters, past Python's own limit of 131,072
    path = _csv(tmp_path, HEADER + f'3.0,0.0,"{long_value}"\n')
    assert list(csv_rows(path, max_cell_chars=300_000))[1] == (2, ["3.0", "0.0", long_value])
    with pytest.raises(DataSourceError, match=r"line 2: a value longer than 131,072 .* raise max_cell_chars"):
        check_csv_structure(path, max_cell_chars=131_072)
