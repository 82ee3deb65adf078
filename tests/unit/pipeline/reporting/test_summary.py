"""Which run a summary reads: the run this process started, never the newest record on a shared root."""

from __future__ import annotations

import time

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata

from torchtfx.pipeline.reporting.summary import latest_run, run_summary


def _record_run(store: metadata_store.MetadataStore, run_id: str, node: str) -> None:
    """A pipeline run context as TFX's launcher writes it, with one completed execution of ``node``."""
    run_type = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline_run"))
    node_type = store.put_context_type(metadata_store_pb2.ContextType(name="node"))
    execution_type = store.put_execution_type(metadata_store_pb2.ExecutionType(name=node))
    [run_ctx, node_ctx] = store.put_contexts(
        [
            metadata_store_pb2.Context(type_id=run_type, name=run_id),
            metadata_store_pb2.Context(type_id=node_type, name=f"torchtfx-taxi.{node}"),
        ]
    )
    execution = metadata_store_pb2.Execution(
        type_id=execution_type, last_known_state=metadata_store_pb2.Execution.COMPLETE
    )
    [execution_id] = store.put_executions([execution])
    store.put_attributions_and_associations(
        [],
        [
            metadata_store_pb2.Association(context_id=run_ctx, execution_id=execution_id),
            metadata_store_pb2.Association(context_id=node_ctx, execution_id=execution_id),
        ],
    )


def test_the_summary_is_this_runs_own_when_another_runs_record_is_newer(tmp_path):
    """Two runs on one root: the one that finished printed the other's summary (the newest record)."""
    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    store = metadata_store.MetadataStore(connection)
    _record_run(store, "2026-12-07T06:00:00.000001", "Promoter")  # this run, started first
    time.sleep(0.01)
    _record_run(store, "2026-12-07T06:00:05.000002", "Evaluator")  # the other run's, newer
    assert latest_run(connection).run_id == "2026-12-07T06:00:05.000002"
    own = run_summary(connection, "2026-12-07T06:00:00.000001")
    assert own.run_id == "2026-12-07T06:00:00.000001"
    assert [(s.node, s.state) for s in own.stages] == [("Promoter", "COMPLETE")]
    assert run_summary(connection, "2026-12-07T07:00:00") is None
