"""A CSV file cut into parts of whole records (data/csv_reader/parts.py): the parts together are the file's
records, with their lines, whatever the line ends, byte-order mark, multi-byte text or quoted line breaks."""

from __future__ import annotations

import csv

import pytest

from torchtfx.data.csv_reader.parts import CutPoints, cut, part_count, part_records
from torchtfx.data.csv_reader.sources import DataSourceError, csv_rows


def _write(path, rows, line_end: str, bom: bool) -> None:
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle, lineterminator=line_end).writerows(rows)


def _read_in_parts(path, parts: int, every: int = 512) -> tuple[list, list]:
    cuts = CutPoints(every=every)
    whole = list(csv_rows(path, None, cuts))
    read = []
    for part in cut(str(path), whole[0][1], cuts, parts):
        with open(path, "rb") as handle:
            read += list(part_records(part, handle))
    return whole[1:], read


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", [False, True])
def test_parts_hold_every_record_once_with_its_line(tmp_path, line_end, bom):
    rows = [["id", "text"]]
    for i in range(3000):
        text = f'two\nlines "quoted" é {i}' if i % 11 == 0 else ("" if i % 13 == 0 else f"ünï {i}")
        rows.append([str(i), text])
    path = tmp_path / "data.csv"
    _write(path, rows, line_end, bom)
    for parts in (1, 2, 3, 8):
        whole, read = _read_in_parts(path, parts)
        assert read == whole
        assert [record for _, record in read] == rows[1:]


def test_a_file_smaller_than_the_cut_granularity_stays_one_part(tmp_path):
    path = tmp_path / "small.csv"
    _write(path, [["a"], ["1"], ["2"]], "\n", False)
    cuts = CutPoints()
    (_, header), *_ = csv_rows(path, None, cuts)  # the whole file, so that cuts holds its points
    parts = cut(str(path), header, cuts, 4)
    assert len(parts) == 1 and parts[0].start == 2 and parts[0].stop is None and parts[0].first_line == 2


def test_blank_lines_at_a_cut_are_skipped_and_lines_still_counted(tmp_path):
    path = tmp_path / "blank.csv"
    path.write_text("a,b\n" + "".join(f"{i},x\n\n" for i in range(2000)))
    whole, read = _read_in_parts(path, 5, every=64)
    assert read == whole and read[-1][0] == 2 + 2 * 1999


def test_part_count_gives_every_worker_a_part_and_caps_part_size():
    assert part_count([1000], workers=2, part_bytes=10**6) == [2]
    assert part_count([1000], workers=1, part_bytes=10**6) == [1]
    assert part_count([300, 100], workers=4, part_bytes=10**6) == [3, 1]
    assert part_count([10**7], workers=2, part_bytes=10**6) == [10]  # a remote runner: parts of part_bytes
    assert part_count([0, 0], workers=2, part_bytes=10**6) == [1, 1]


def test_a_part_that_changed_since_the_checks_names_file_and_line(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b\n" + "".join(f"{i},x\n" for i in range(400)))
    cuts = CutPoints(every=256)
    (_, header), *_ = csv_rows(path, None, cuts)  # the whole file, so that cuts holds its points
    parts = cut(str(path), header, cuts, 2)
    path.write_text("a,b\n" + "".join(f"{i},x,extra\n" for i in range(400)))
    with open(path, "rb") as handle, pytest.raises(DataSourceError, match=rf"{path}, line {parts[1].first_line}: 3"):
        list(part_records(parts[1], handle))


def test_a_part_is_read_with_the_cell_limit_the_checks_used_whatever_the_process_had(tmp_path):
    """csv's field_size_limit is per process: a Beam worker reading a part has not run the checks."""
    long_value = "x" * 200_000
    path = tmp_path / "data.csv"
    _write(path, [["id", "text"], ["1", long_value], ["2", "short"]], "\n", False)
    cuts = CutPoints()
    rows = list(csv_rows(path, None, cuts, max_cell_chars=250_000))  # the checks' whole pass notes the cuts
    (part,) = cut(str(path), rows[0][1], cuts, 1)
    csv.field_size_limit(131_072)  # Python's default, as a fresh worker has it
    with open(path, "rb") as handle:
        assert list(part_records(part, handle)) == [(2, ["1", long_value]), (3, ["2", "short"])]
