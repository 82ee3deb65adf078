"""An artifact's URI as the orchestrator knows it. On Kubeflow, torchtfx.pipeline.kfp.entrypoint hands our executors
the launcher's local copies (/gcs/..., /minio/...); anything recorded for later runs (registry tags) must
name the artifact store's URI instead, which the entry point passes in REMOTE_URIS_ENV."""

from __future__ import annotations

import json
import os

REMOTE_URIS_ENV = "TORCHTFX_REMOTE_URIS"  # JSON: local path -> original URI


def remote_uri(uri: str) -> str:
    return json.loads(os.environ.get(REMOTE_URIS_ENV) or "{}").get(uri, uri)
