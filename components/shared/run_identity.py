"""Which pipeline run and execution an executor is serving, for tags, run names and job names."""

from __future__ import annotations

import os
import socket
from typing import Any

from tfx.dsl.compiler import constants as compiler_constants
from tfx.dsl.components.base import base_executor
from tfx.orchestration import data_types

# A parameter bound to the pipeline run id (LocalDagRunner substitutes it; `torchtfx submit` passes it
# on Kubeflow). It also makes a new cache key per run, so only components that must run every time take it.
RUN_TOKEN_KEY = "run_token"
# Set by torchtfx.pipeline.kfp.entrypoint: on Kubeflow each step is a pod, and the pod name identifies the execution.
ORCHESTRATOR_ENV = "TORCHTFX_ORCHESTRATOR"


def run_token_parameter() -> data_types.RuntimeParameter:
    return data_types.RuntimeParameter(name=compiler_constants.PIPELINE_RUN_ID_PARAMETER_NAME, ptype=str)


def run_identity(
    executor: base_executor.BaseExecutor, exec_properties: dict[str, Any] | None = None
) -> tuple[str, str]:
    """(pipeline run id, execution id); "unknown" where the orchestrator does not say."""
    context = executor._context
    token = (exec_properties or {}).get(RUN_TOKEN_KEY)
    run_id = (context.pipeline_run_id if context else None) or token or "unknown"
    if os.environ.get(ORCHESTRATOR_ENV) == "kubeflow":
        return run_id, socket.gethostname()
    # Locally the execution id is the context's unique id; TFX exposes it only privately.
    execution_id = str(getattr(context, "_unique_id", "") or "unknown")
    return run_id, execution_id
