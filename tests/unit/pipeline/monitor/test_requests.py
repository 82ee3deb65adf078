"""What a monitoring window reads, and the folders it refuses."""

from __future__ import annotations

import pytest

from torchtfx.pipeline.monitor.requests import MonitorInputError, request_files


def test_request_logs_and_csv_files_directly_in_the_folder_are_read_and_hidden_files_are_not(tmp_path):
    for name in ("a.tfrecord.gz", "b.tfrecord", "scored.csv", ".writing-c.tfrecord.gz"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "below").mkdir()
    (tmp_path / "below" / "d.tfrecord.gz").write_bytes(b"")  # only the folder named is read

    files = request_files(tmp_path)

    assert [p.rsplit("/", 1)[1] for p in files.tfrecords] == ["a.tfrecord.gz", "b.tfrecord"]
    assert [p.rsplit("/", 1)[1] for p in files.csvs] == ["scored.csv"]


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ((), "holds no request log"),
        (("notes.txt", "a.tfrecord.gz"), "files monitor cannot read: ['notes.txt']"),
    ],
)
def test_a_folder_with_nothing_to_read_or_foreign_files_is_refused_by_name(tmp_path, files, named):
    for name in files:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(MonitorInputError, match=named.replace("[", r"\[").replace("]", r"\]")):
        request_files(tmp_path)


def test_a_path_that_is_not_a_folder_is_refused(tmp_path):
    with pytest.raises(MonitorInputError, match="is not a folder"):
        request_files(tmp_path / "missing")
