"""A fake Kubeflow Pipelines API server (REST API v2beta1) for the real ``kfp.Client`` (kfp 2.5.0): healthz,
experiments (list, create), runs (create, get), recurring runs (create). Serve ``FakeKfp.handle`` with
tests.fakes.http_server.

Healthz answers as the API server's own handler writes it: ``commit_sha``, ``tag_name`` (the image's
``TAG_NAME``, "unknown" when unset), ``multi_user`` and, from 2.14, ``pipeline_store``
(backend/src/apiserver/main.go:278-281@2.5.0, :362-365@2.15.0, :465-491@2.17.0).

Run get answers scripted states, as the backend reports a run while it goes on: ``state`` is a
``V2beta1RuntimeState`` (PENDING, RUNNING, SUCCEEDED, SKIPPED, FAILED, CANCELING, CANCELED, PAUSED),
``error`` a ``googlerpcStatus`` and ``run_details.task_details`` one ``V2beta1PipelineTaskDetail`` per task,
all with the snake_case field names of the v2beta1 REST API (backend/api/v2beta1/run.proto).

Recurring run create is ``POST /apis/v2beta1/recurringruns`` with the ``RecurringRun`` as the body
(backend/api/v2beta1/recurring_run.proto:37-40@2.15.0); like the server it refuses a max concurrency outside
1..10 (``int64``, a JSON string: recurring_run.swagger.json:418-421; api_converter.go:1970-1972@2.15.0)."""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

_RUN = re.compile(r"^/apis/v2beta1/runs/([^/:]+)$")


def run_status(state: str, tasks: dict[str, str] | None = None, error: str | None = None) -> dict[str, Any]:
    """What run get reports at one moment: the run's state, each task's state, the error once it failed."""
    status: dict[str, Any] = {"state": state}
    if tasks:
        details = [
            {
                "task_id": f"task-{i}",
                "display_name": name,
                "state": task_state,
                **({"error": {"code": 2, "message": error}} if task_state == "FAILED" and error else {}),
            }
            for i, (name, task_state) in enumerate(tasks.items())
        ]
        status["run_details"] = {"pipeline_context_id": "7", "task_details": details}
    if error:
        status["error"] = {"code": 2, "message": error}
    if state in ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"):
        status["finished_at"] = "2025-01-01T01:00:00Z"
    return status


class FakeKfp:
    """Records every request; ``run_code`` refuses run creation; ``statuses`` scripts run get (one entry per
    call, the last one repeats; an int answers that HTTP error code instead)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.experiments: list[dict] = []
        self.runs_created: dict[str, dict] = {}
        self.recurring_runs: list[dict] = []
        self.run_code = 200
        self.statuses: list[dict | int] = [run_status("PENDING")]
        self.tag_name = "2.15.0"  # what Kubeflow 1.11 installs
        self._gets = 0

    def handle(self, method: str, url: str, body: bytes, headers: dict) -> tuple[int, dict]:
        parsed = urllib.parse.urlsplit(url)
        self.requests.append(
            {"method": method, "path": parsed.path, "headers": headers, "body": json.loads(body) if body else None}
        )
        if parsed.path == "/apis/v2beta1/healthz":
            return 200, self._healthz()
        if parsed.path == "/apis/v2beta1/experiments" and method == "GET":
            return 200, {"experiments": self.experiments, "total_size": len(self.experiments)}
        if parsed.path == "/apis/v2beta1/experiments" and method == "POST":
            experiment = {**json.loads(body), "experiment_id": f"exp-{len(self.experiments) + 1}"}
            self.experiments.append(experiment)
            return 200, experiment
        if parsed.path == "/apis/v2beta1/runs" and method == "POST":
            return self._create_run(json.loads(body))
        if parsed.path == "/apis/v2beta1/recurringruns" and method == "POST":
            return self._create_recurring_run(json.loads(body))
        run = _RUN.match(parsed.path)
        if run and method == "GET":
            return self._get_run(run.group(1))
        return 404, {"error_message": f"no route {method} {parsed.path}", "code": 5}

    def _healthz(self) -> dict:
        answer = {"commit_sha": "0123abcd", "tag_name": self.tag_name, "multi_user": False}
        if self.tag_name == "unknown" or tuple(int(p) for p in self.tag_name.split(".")[:2]) >= (2, 14):
            answer["pipeline_store"] = "database"
        return answer

    def _create_run(self, body: dict) -> tuple[int, dict]:
        if self.run_code != 200:
            return self.run_code, {"error_message": "simulated refusal", "code": 7}
        run = {
            **body,
            "run_id": f"run-{123 + len(self.runs_created)}",
            "state": "PENDING",
            "created_at": "2025-01-01T00:00:00Z",
        }
        self.runs_created[run["run_id"]] = run
        return 200, run

    def _create_recurring_run(self, body: dict) -> tuple[int, dict]:
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            message = f"Max concurrency of a recurring run must be at least 1 and at most 10. Received {concurrency}"
            return 400, {"error_message": message, "code": 3}
        run = {
            **body,
            "recurring_run_id": f"rr-{len(self.recurring_runs) + 1}",
            "status": "ENABLED" if body.get("mode") == "ENABLE" else "DISABLED",
            "created_at": "2025-01-01T00:00:00Z",
        }
        self.recurring_runs.append(run)
        return 200, run

    def _get_run(self, run_id: str) -> tuple[int, dict]:
        if run_id not in self.runs_created:
            return 404, {"error_message": f"run {run_id} not found", "code": 5}
        step = self.statuses[min(self._gets, len(self.statuses) - 1)]
        self._gets += 1
        if isinstance(step, int):
            return step, {"error_message": "simulated", "code": 14}
        return 200, {**self.runs_created[run_id], **step}

    def runs(self) -> list[dict]:
        """The run creation requests."""
        return [r for r in self.requests if r["path"] == "/apis/v2beta1/runs"]

    def run_gets(self) -> list[dict]:
        return [r for r in self.requests if _RUN.match(r["path"]) and r["method"] == "GET"]
