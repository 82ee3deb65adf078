"""What a finished local run produced, read back from ML Metadata: stage times, output artifacts and their
properties (the metrics themselves: components/shared/evaluation_results.py)."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from torchtfx.components.shared import contracts

_STATES = {v: k for k, v in metadata_store_pb2.Execution.State.items()}


@dataclasses.dataclass
class StageTime:
    node: str
    state: str
    seconds: float


@dataclasses.dataclass
class RunSummary:
    run_id: str
    stages: list[StageTime]
    artifacts: dict[str, dict[str, list[metadata_store_pb2.Artifact]]]  # node -> output key -> artifacts

    def output(self, node: str, key: str) -> metadata_store_pb2.Artifact | None:
        found = self.artifacts.get(node, {}).get(key)
        return found[0] if found else None

    def custom(self, node: str, key: str, prop: str):
        artifact = self.output(node, key)
        if artifact is None or prop not in artifact.custom_properties:
            return None
        value = artifact.custom_properties[prop]
        return getattr(value, value.WhichOneof("value"))

    @property
    def pushed_to(self) -> str | None:
        if self.custom(contracts.PROMOTER_ID, "pushed_model", contracts.PUSHED_PROPERTY) != 1:
            return None
        return self.custom(contracts.PROMOTER_ID, "pushed_model", contracts.PUSHED_DESTINATION_PROPERTY)

    @property
    def unchanged(self) -> str | None:
        """Why nothing was pushed or registered: the candidate is a model the registry already has."""
        return self.custom(contracts.PROMOTER_ID, "pushed_model", contracts.UNCHANGED_PROPERTY) or None

    @property
    def labels_pending(self) -> bool:
        return self.custom(contracts.PROMOTER_ID, "pushed_model", contracts.LABELS_PENDING_PROPERTY) == 1

    @property
    def parity(self) -> float | None:
        value = self.custom(contracts.TRAINER_ID, "model", contracts.PARITY_PROPERTY)
        return None if value is None else float(value)

    @property
    def mlflow_run_id(self) -> str | None:
        return self.custom(contracts.TRAINER_ID, "model", contracts.MLFLOW_RUN_ID_PROPERTY)

    @property
    def ddp_workers(self) -> int | None:
        return self.custom(contracts.TRAINER_ID, "model", contracts.NUM_WORKERS_PROPERTY)

    @property
    def task(self) -> str | None:
        return self.custom(contracts.TRAINER_ID, "model", contracts.TASK_PROPERTY)

    @property
    def serving_precision(self) -> str | None:
        return self.custom(contracts.TRAINER_ID, "model", contracts.SERVING_PRECISION_PROPERTY)

    @property
    def precision_drift(self) -> dict | None:
        """The reduced-precision variant's drift figures (and whether it was served), when one was built."""
        text = self.custom(contracts.TRAINER_ID, "model", contracts.PRECISION_DRIFT_PROPERTY)
        return json.loads(text) if text else None

    @property
    def label_refused(self) -> dict[str, int] | None:
        """Rows refused for their label, by split (None where no row could be: see contracts)."""
        text = self.custom(contracts.TRAINER_ID, "model", contracts.LABEL_REFUSED_PROPERTY)
        return json.loads(text) if text else None

    @property
    def refused_line(self) -> str | None:
        """The report's line on rows refused for their label (None where no row could be refused)."""
        refused = self.label_refused
        if refused is None:
            return None
        counts = ", ".join(f"{split} {count}" for split, count in sorted(refused.items()))
        return f"Rows refused for their label (neither trained on nor evaluated): {counts}"

    @property
    def blessed(self) -> bool | None:
        value = self.custom(contracts.EVALUATOR_ID, "blessing", contracts.BLESSED_PROPERTY)
        return None if value is None else bool(value)


def _node_names(store: metadata_store.MetadataStore) -> dict[int, str]:
    names = {}
    for ctx in store.get_contexts_by_type("node"):
        for execution in store.get_executions_by_context(ctx.id):
            names[execution.id] = ctx.name.split(".", 1)[-1]
    return names


def _outputs(store: metadata_store.MetadataStore, execution_ids: list[int]) -> dict[int, dict[str, list]]:
    events = store.get_events_by_execution_ids(execution_ids)
    wanted = [
        e for e in events if e.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
    ]
    by_id = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in wanted])}
    outputs: dict[int, dict[str, list]] = {}
    for event in wanted:
        key = event.path.steps[0].key if event.path.steps else "output"
        outputs.setdefault(event.execution_id, {}).setdefault(key, []).append(by_id[event.artifact_id])
    return outputs


def latest_run(connection_config: metadata_store_pb2.ConnectionConfig) -> RunSummary | None:
    """The newest pipeline run in the store (``torchtfx report``), with per-node times and output artifacts."""
    store = metadata_store.MetadataStore(connection_config)
    runs = store.get_contexts_by_type("pipeline_run")
    if not runs:
        return None
    return _summary(store, max(runs, key=lambda c: c.create_time_since_epoch))


def run_summary(connection_config: metadata_store_pb2.ConnectionConfig, run_id: str) -> RunSummary | None:
    """The pipeline run ``run_id`` (the one this process started), never another run's newer record."""
    store = metadata_store.MetadataStore(connection_config)
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    return None if run is None else _summary(store, run)


def _summary(store: metadata_store.MetadataStore, run: metadata_store_pb2.Context) -> RunSummary:
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: e.create_time_since_epoch)
    names = _node_names(store)
    outputs = _outputs(store, [e.id for e in executions])
    stages = [
        StageTime(
            node=names.get(e.id, e.type),
            state=_STATES.get(e.last_known_state, "UNKNOWN"),
            seconds=(e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000.0,
        )
        for e in executions
    ]
    artifacts = {names.get(e.id, e.type): outputs.get(e.id, {}) for e in executions}
    return RunSummary(run_id=run.name, stages=stages, artifacts=artifacts)
