"""Follow a submitted Kubeflow Pipelines run until it ends (``torchtfx submit --wait``, for CI): report each
change of the run's and its tasks' states, and say how it ended; bounded by a timeout that leaves the run
going on the cluster (nothing is cancelled on the user's behalf)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from torchtfx.pipeline.kfp.submit import SubmitError

logger = logging.getLogger(__name__)

# V2beta1RuntimeState values in which a run has ended; only SUCCEEDED is a success (a SKIPPED run trained nothing).
FINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")
_TRANSIENT = (429, 500, 502, 503, 504)


class RunTimeoutError(SubmitError):
    """The run had not ended when the wait's timeout ran out; it goes on in the cluster."""


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    run_id: str
    state: str
    seconds: float
    error: str  # the run's error message and its failed tasks' ('' after success)

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def _tasks(run: Any) -> dict[str, tuple[str, str]]:
    """Task display name -> (state, error message)."""
    details = getattr(getattr(run, "run_details", None), "task_details", None) or []
    return {
        t.display_name: (str(t.state or "PENDING"), getattr(t.error, "message", "") or "")
        for t in details
        if t.display_name
    }


def _error_text(run: Any) -> str:
    parts = [getattr(run.error, "message", "") or ""]
    parts += [f"{name}: {message}" for name, (state, message) in _tasks(run).items() if state == "FAILED" and message]
    return "; ".join(p for p in dict.fromkeys(parts) if p)


class RunFollower:
    """Polls ``client.get_run`` (the real ``kfp.Client``'s) every ``poll_seconds`` until the run ends or
    ``timeout_seconds`` pass; ``report`` gets one line per change."""

    def __init__(
        self,
        client: Any,
        report: Callable[[str], None],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client, self._report, self._sleep, self._clock = client, report, sleep, clock
        self._seen: dict[str, str] = {}

    def follow(self, run_id: str, timeout_seconds: float, poll_seconds: float) -> RunOutcome:
        start = self._clock()
        deadline = start + timeout_seconds
        state = "unknown"
        while True:
            run = self._get(run_id)
            if run is not None:
                state = str(run.state or "PENDING")
                self._report_changes(run, state, self._clock() - start)
                if state in FINAL_STATES:
                    return RunOutcome(run_id, state, self._clock() - start, _error_text(run))
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise RunTimeoutError(
                    f"run {run_id} is still {state} after {_clock_text(timeout_seconds)} (--timeout): it goes on "
                    "in the cluster. Follow it in the KFP UI, or stop it with kfp.Client().terminate_run(run_id)"
                )
            self._sleep(min(poll_seconds, remaining))

    def _report_changes(self, run: Any, state: str, elapsed: float) -> None:
        changes = [
            (name, task_state)
            for name, (task_state, _) in sorted(_tasks(run).items())
            if self._seen.get(name) != task_state
        ]
        if self._seen.get("") != state:
            changes.insert(0, ("", state))
        for name, new_state in changes:
            self._seen[name] = new_state
            self._report(f"[{_clock_text(elapsed)}] {f'  {name}' if name else 'run'}: {new_state}")

    def _get(self, run_id: str) -> Any:
        """The run, or None after a transient failure (logged; the next poll tries again)."""
        try:
            return self._client.get_run(run_id)
        except Exception as err:
            status = getattr(err, "status", None)
            if type(err).__name__ == "ApiException" and status not in _TRANSIENT:
                hint = " (set KFP_TOKEN or KF_PIPELINES_SA_TOKEN_PATH)" if status in (401, 403) else ""
                raise SubmitError(
                    f"Kubeflow Pipelines refused to report run {run_id}: {status} {getattr(err, 'reason', None)}{hint}"
                ) from None
            if type(err).__name__ != "ApiException" and not _is_connection_error(err):
                raise
            logger.warning("Asking Kubeflow Pipelines about run %s failed (%s); trying again", run_id, err)
            return None


def _is_connection_error(err: Exception) -> bool:
    import urllib3

    return isinstance(err, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))
