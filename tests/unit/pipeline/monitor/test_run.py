"""A monitoring window's bookkeeping: the previous window it compares with, and the refusals before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchtfx.components.champion.public import Champion
from torchtfx.pipeline.cli.promotion import local_settings, serving_target
from torchtfx.pipeline.monitor.run import (
    REPORT_FILE,
    MonitorError,
    MonitorRequest,
    monitor,
    previous_window,
    training_statistics_uri,
)


def test_the_previous_window_is_the_newest_complete_one(tmp_path):
    assert previous_window(tmp_path / "none") is None
    for name, complete in (("2026-12-01T00", True), ("2026-12-03T00", True), ("2026-12-04T00", False)):
        (tmp_path / name).mkdir()
        if complete:
            (tmp_path / name / REPORT_FILE).write_text("{}")
    (tmp_path / ".writing-2026-12-05T00").mkdir()  # a window still being written, or one that failed
    (tmp_path / ".writing-2026-12-05T00" / REPORT_FILE).write_text("{}")
    assert previous_window(tmp_path) == tmp_path / "2026-12-03T00"


def test_a_root_without_a_champion_is_refused_before_anything_is_read_or_written(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "requests.tfrecord.gz").write_bytes(b"")
    settings = local_settings("taxi", tmp_path / "root", None)
    (tmp_path / "root" / "mlflow").mkdir(parents=True)
    out = tmp_path / "root" / "monitor" / "taxi"
    with pytest.raises(MonitorError, match=r"no champion to compare the requests with.*`torchtfx run`"):
        monitor(MonitorRequest(logs, settings.dataset, serving_target(settings), out))
    assert not out.exists()


def test_a_champion_without_training_statistics_on_record_is_named_with_the_fix(tmp_path):
    settings = local_settings("taxi", tmp_path / "root", None)
    unregistered = Champion(Path(tmp_path / "serving" / "3"), 3, None, "serving_dir")
    with pytest.raises(MonitorError, match=r"serving version 3.*no training statistics on record.*Promote a model"):
        training_statistics_uri(serving_target(settings), unregistered)
