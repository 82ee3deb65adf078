"""Which pipeline run and MLMD execution an executor is serving, for tags and run names."""

from __future__ import annotations

from tfx.dsl.components.base import base_executor


def run_identity(executor: base_executor.BaseExecutor) -> tuple[str, str]:
    """(pipeline run id, MLMD execution id); "unknown" when run outside an orchestrator."""
    context = executor._context
    run_id = (context.pipeline_run_id if context else None) or "unknown"
    # The execution id is the context's unique id; TFX exposes it only privately.
    execution_id = str(getattr(context, "_unique_id", "") or "unknown")
    return run_id, execution_id
