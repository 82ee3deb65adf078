"""One monitoring window: the requests' statistics, compared with the champion's training statistics and with the
previous window's, written as a report under the monitor's output folder (a folder per window, renamed into
place once complete, so a window that failed is never read as the previous one)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import shutil
from pathlib import Path

from torchtfx.components.champion.public import Champion
from torchtfx.components.promoter.public import ServingTarget
from torchtfx.components.shared.contracts import TRAIN_STATISTICS_TAG
from torchtfx.components.stage_failure import StageFailure
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.pipeline.monitor.compare import Finding, findings, uncompared
from torchtfx.pipeline.monitor.requests import request_files

logger = logging.getLogger(__name__)

STATISTICS_FILE = "served_statistics.pb"
REPORT_FILE = "report.json"
WRITING_PREFIX = ".writing-"


class MonitorError(StageFailure):
    """Monitoring cannot run as asked; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class MonitorRequest:
    logs: Path
    dataset: DatasetConfig
    target: ServingTarget
    out: Path  # a folder per window below it


@dataclasses.dataclass(frozen=True)
class MonitorReport:
    folder: Path
    rows: int
    champion: Champion
    findings: tuple[Finding, ...]
    previous: Path | None
    uncompared: tuple[str, ...]  # inputs without a comparator in the schema

    @property
    def moved(self) -> list[str]:
        return sorted({finding.feature for finding in self.findings})


def current_champion(target: ServingTarget) -> Champion:
    """The champion as the pipeline's ChampionModel resolves it (the registry's alias, else the serving folder's
    stable label)."""
    from torchtfx.components.champion.public import resolve_champion
    from torchtfx.components.shared.mlflow_client import TrackingUnavailableError, check_reachable

    try:
        check_reachable(target.registry.tracking_uri)  # MLflow's own client would retry for minutes
    except TrackingUnavailableError as err:
        raise TrackingUnavailableError(f"{err}: nothing was compared. Start it, or fix MLFLOW_TRACKING_URI") from None
    found = resolve_champion(target.serving_dir, target.registry)
    if found is None:
        raise MonitorError(
            f"there is no champion to compare the requests with: {target.registry.model_name} has no champion alias "
            f"and {target.serving_dir} holds no served version. Run the pipeline (`torchtfx run`) until a model is "
            "promoted, or check --pipeline-root / --serving-dir / MLFLOW_TRACKING_URI"
        )
    return found


def training_statistics_uri(target: ServingTarget, champion: Champion) -> str:
    """Where the Promoter recorded the statistics of the data the champion was trained on."""
    version = champion.registry_version
    tags = target.registry.get_version(version).tags if version else {}
    uri = tags.get(TRAIN_STATISTICS_TAG)
    if not uri:
        raise MonitorError(
            f"the champion (serving version {champion.serving_version}) has no training statistics on record "
            f"(registry tag {TRAIN_STATISTICS_TAG!r} of {target.registry.model_name}): monitor compares the requests "
            "with them. Promote a model with `torchtfx run` (the Promoter records them), then monitor again"
        )
    return uri


def previous_window(out: Path) -> Path | None:
    """The newest complete window under ``out``."""
    if not out.is_dir():
        return None
    done = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / REPORT_FILE).is_file()]
    return max(done, key=lambda p: p.name) if done else None


def monitor(request: MonitorRequest) -> MonitorReport:
    """Compare the requests under ``request.logs`` with what the champion learned and with the previous window."""
    from torchtfx.components.data_gate.public import load_split_statistics
    from torchtfx.pipeline.monitor.statistics import served_statistics, serving_schema

    files = request_files(request.logs)
    champion = current_champion(request.target)
    training = load_split_statistics(training_statistics_uri(request.target, champion))
    previous = previous_window(request.out)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H-%M-%S-%fZ")
    writing, folder = request.out / f"{WRITING_PREFIX}{stamp}", request.out / stamp
    writing.mkdir(parents=True)
    try:
        schema = serving_schema(request.dataset)
        served = served_statistics(files, request.dataset, schema, str(writing / STATISTICS_FILE))
        before = load_stats(previous / STATISTICS_FILE) if previous else None
        found = tuple(findings(served, schema, training, before))
        rows = int(served.datasets[0].num_examples) if served.datasets else 0
        report = MonitorReport(folder, rows, champion, found, previous, tuple(uncompared(schema)))
        (writing / REPORT_FILE).write_text(json.dumps(_as_json(report, request), indent=2) + "\n")
        writing.rename(folder)
    finally:
        shutil.rmtree(writing, ignore_errors=True)
    logger.info("Monitoring window written to %s: %s rows, %s findings", folder, rows, len(found))
    return report


def load_stats(path: Path):
    import tensorflow_data_validation as tfdv

    return tfdv.load_stats_binary(str(path))


def _as_json(report: MonitorReport, request: MonitorRequest) -> dict:
    return {
        "logs": str(request.logs),
        "rows": report.rows,
        "champion": {
            "serving_version": report.champion.serving_version,
            "registry_version": report.champion.registry_version,
        },
        "previous_window": str(report.previous) if report.previous else None,
        "moved": report.moved,
        "not_compared": list(report.uncompared),
        "findings": [dataclasses.asdict(finding) for finding in report.findings],
    }
