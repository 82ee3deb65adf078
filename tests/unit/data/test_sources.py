"""Input files, checked before any Beam work: each malformed-input case gets one message naming the file,
the line and the problem (real files on disk, the real checks CsvExampleGen's executor runs)."""

from __future__ import annotations

import pytest

from torchtfx.data.sources import DataSourceError, check_csv_structure, csv_files

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
