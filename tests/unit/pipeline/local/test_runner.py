"""The local runner records its run under the id it chose, so that it reads back its own summary.

No ``from __future__ import annotations``: TFX reads the component function's annotations as types."""

from tfx.dsl.component.experimental.decorators import component
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline

from torchtfx.pipeline.local import runner
from torchtfx.pipeline.reporting.summary import run_summary


@component
def Noop() -> None:  # TFX names the component after the function
    pass


def test_the_runner_records_the_run_under_the_id_it_chose(tmp_path):
    """With TFX's own id (drawn inside LocalDagRunner) the run could only find 'the newest run' afterwards."""
    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    pipeline = tfx_pipeline.Pipeline(pipeline_name="own-id", pipeline_root=str(tmp_path / "tfx"),
                                     components=[Noop()], metadata_connection_config=connection)  # fmt: skip
    runner._own_run_id_runner("2026-12-07T06:00:00.123456").run(pipeline)
    summary = run_summary(connection, "2026-12-07T06:00:00.123456")
    assert summary is not None and [(s.node, s.state) for s in summary.stages] == [("Noop", "COMPLETE")]
