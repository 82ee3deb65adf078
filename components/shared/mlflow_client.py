"""All MLflow access, through explicit ``MlflowClient`` objects (no global fluent state): the tracking
server's reachability policy, a training run (:class:`MlflowRun`, rank 0 only) and the Model Registry
(:class:`Registry`, aliases not stages), which the Trainer, ChampionModel, Promoter and CLI share.

``MLFLOW_TRACKING_URI`` in the environment wins over the pipeline's default store, so credentials
and remote servers never appear in execution parameters or compiled specs. A URI is logged, written to a file
or put in a message only through :func:`redact`; the real one reaches MLflow from the environment or in memory
(:func:`unredact` gets it back in a process that reads a redacted one from a file).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from pathlib import Path

logger = logging.getLogger(__name__)


# What a run does when the MLflow tracking server cannot be reached.
FAIL_IF_UNREACHABLE = "fail"  # stop before training (the default)
CONTINUE_IF_UNREACHABLE = "continue"  # train without tracking, loudly; nothing can be promoted
UNREACHABLE_POLICIES = (FAIL_IF_UNREACHABLE, CONTINUE_IF_UNREACHABLE)


class RegistryVersionNotFoundError(LookupError):
    """A registry version the user named does not exist; the message lists those that do."""


class TrackingUnavailableError(RuntimeError):
    """The MLflow tracking server does not answer."""


TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
REDACTED = "***"
# user:password@ (or a token as the user) after a scheme, up to the token's LAST '@' (a password may hold an
# unencoded '/', '#', '?' or '@'; an '@' later in a path or query costs only its host being hidden too), not for an
# empty authority (sqlite:///, file:///); the value of a query parameter that names a secret.
_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)(?!/)\S*@", re.IGNORECASE)
_SECRET_PARAMETER = re.compile(
    r"([?&;][^=&\s#]*(?:pass|pwd|token|secret|key|sig|credential|auth)[^=&\s#]*=)[^&\s#]+", re.IGNORECASE
)


def resolve_tracking_uri(default_uri: str) -> str:
    return os.environ.get(TRACKING_URI_ENV) or default_uri


def redact(text: str) -> str:
    """``text`` (a URI, or a message holding URIs) without credentials, for logs, messages and files: a URI's
    ``user:password@`` becomes ``***@``, a query parameter that names a secret (``password=``, ``token=``,
    ``access_key=``, ``sig=`` ...) keeps its name and loses its value."""
    return _SECRET_PARAMETER.sub(rf"\1{REDACTED}", _USERINFO.sub(rf"\1{REDACTED}@", text))


def unredact(shown: str) -> str:
    """The tracking URI that :func:`redact` turned into ``shown`` (read from a file): ``MLFLOW_TRACKING_URI``
    from the environment when it redacts to ``shown``, else ``shown`` itself, which must then hold no ``***``."""
    real = os.environ.get(TRACKING_URI_ENV, "")
    if real and redact(real) == shown:
        return real
    if REDACTED in shown:
        raise TrackingUnavailableError(
            f"the MLflow tracking URI {shown} was written without its credentials, and this process has no "
            f"{TRACKING_URI_ENV} that matches it: set {TRACKING_URI_ENV} in its environment as the pipeline step has it"
        )
    return shown


class RedactCredentials(logging.Filter):
    """A handler filter: every record's message and traceback with :func:`redact` applied (MLflow's own errors
    name the URL they called, user:password@ included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if redact(message) != message:
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def identity_uri(uri: str) -> str:
    """The tracking URI as a serving directory records it (an identity of the registry, never a credential): no
    user:password@ (cut at the last '@' first, so no part of a password holding '#', '?' or '/' survives), no query
    or fragment (where tokens go), and a sqlite or file store's path made absolute, so one store has one spelling."""
    bare = _USERINFO.sub(r"\1", uri).split("#", 1)[0].split("?", 1)[0]
    for scheme in ("sqlite:///", "file://"):
        if bare.startswith(scheme):
            return scheme + str(Path(bare[len(scheme) :]).resolve())
    if "://" not in bare:  # a plain path is a file store
        return "file://" + str(Path(bare).resolve())
    return bare.rstrip("/")


def check_reachable(uri: str, timeout: float = 5.0, tries: int = 1, pause_s: float = 1.0) -> None:
    """Raise ``TrackingUnavailableError`` if an http(s) tracking server does not answer its health check
    within ``timeout``, ``tries`` times ``pause_s`` apart (MLflow's own client would retry for minutes: 7 retries
    with backoff, 120 s each). Local stores always pass."""
    if not uri.startswith(("http://", "https://")):
        return
    import requests

    for attempt in range(1, tries + 1):
        try:
            response = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
            break
        except requests.RequestException as err:
            if attempt < tries:
                time.sleep(pause_s)
                continue
            reason = type(err).__name__ + (": connection refused" if "refused" in str(err).lower() else "")
            if isinstance(err, requests.exceptions.InvalidURL):  # e.g. a password with an unencoded '/'
                reason += ": percent-encode any '/', '#', '?' or '@' in its user or password"
            reason += f"; {tries} tries {pause_s:g} s apart" if tries > 1 else ""
            where = redact(uri)
            raise TrackingUnavailableError(f"the MLflow tracking server at {where} is unreachable ({reason})") from None
    if response.status_code >= 500:
        raise TrackingUnavailableError(
            f"the MLflow tracking server at {redact(uri)} answered HTTP {response.status_code} to its health check"
        )


def tracking_uri_or_none(uri: str, policy: str, what: str) -> str | None:
    """``uri`` if it answers; else raise (policy ``fail``) or warn loudly and return None (``continue``)."""
    try:
        check_reachable(uri)
        return uri
    except TrackingUnavailableError as err:
        if policy != CONTINUE_IF_UNREACHABLE:
            raise TrackingUnavailableError(
                f"{err}. {what} did not start. Start the server or fix MLFLOW_TRACKING_URI; or rerun with "
                "--mlflow-unreachable continue to train without tracking (nothing will be registered or promoted)."
            ) from None
        logger.warning("!" * 100)
        logger.warning("%s; %s continues WITHOUT MLflow tracking (policy 'continue')", err, what)
        logger.warning("!" * 100)
        return None


def missing_local_store(uri: str) -> Path | None:
    """The path of a local store (sqlite file, file store folder) that does not exist yet: MLflow would create it,
    empty, on first use; None for a server or a store that exists."""
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
    elif uri.startswith("file://") or "://" not in uri:
        path = Path(uri.removeprefix("file://"))
    else:
        return None
    return None if path.exists() else path


def client(tracking_uri: str):
    """The one way this project talks to MLflow: tracking and registry at the same URI."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def default_artifact_location(tracking_uri: str) -> str | None:
    """For a local sqlite store, keep artifacts beside the database, not in the CWD's ./mlruns."""
    if tracking_uri.startswith("sqlite:///"):
        return str(Path(tracking_uri[len("sqlite:///") :]).parent / "mlartifacts")
    return None


class MlflowRun:
    """One MLflow run: parameters, per-epoch metrics with a step, artifacts, final status."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        self.client = client(tracking_uri)
        self.tracking_uri = tracking_uri
        self.run_id = run_id

    @classmethod
    def start(cls, tracking_uri: str, experiment: str, run_name: str, tags: dict[str, str]) -> MlflowRun:
        mlflow = client(tracking_uri)
        found = mlflow.get_experiment_by_name(experiment)
        if found is not None:
            experiment_id = found.experiment_id
        else:
            experiment_id = mlflow.create_experiment(experiment, default_artifact_location(tracking_uri))
        run = mlflow.create_run(experiment_id, run_name=run_name, tags=tags)
        logger.info(
            "MLflow run %s (%s) in experiment %s at %s", run.info.run_id, run_name, experiment, redact(tracking_uri)
        )
        return cls(tracking_uri, run.info.run_id)

    def log_params(self, params: dict[str, object]) -> None:
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in sorted(params.items())])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status)


# -- the Model Registry -----------------------------------------------------------------------------
CHAMPION = "champion"
PREVIOUS = "previous"
CHALLENGER = "challenger"
SERVING_VERSION_TAG = "serving_version"


class Registry:
    """One registered model: its versions, their tags and the aliases that say who is in production."""

    def __init__(self, tracking_uri: str, model_name: str) -> None:
        self.tracking_uri = tracking_uri
        self.model_name = model_name

    @functools.cached_property
    def client(self):
        """Made on first use: MlflowClient creates a sqlite store as it starts, and a command that refuses its
        arguments first must leave none behind."""
        return client(self.tracking_uri)

    def _ensure_model(self) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.model_name)
        except MlflowException:
            self.client.create_registered_model(self.model_name, description="Promoted by torchtfx")

    def model_tags(self) -> dict[str, str]:
        """The registered model's own tags; empty when the model does not exist yet."""
        from mlflow.exceptions import MlflowException

        try:
            return dict(self.client.get_registered_model(self.model_name).tags)
        except MlflowException as err:
            if "RESOURCE_DOES_NOT_EXIST" in str(err.error_code) or "not found" in str(err).lower():
                return {}
            raise

    def set_model_tags(self, tags: dict[str, str]) -> None:
        """Tag the registered model itself (created first if need be)."""
        self._ensure_model()
        for key, value in tags.items():
            self.client.set_registered_model_tag(self.model_name, key, value)

    def alias_version(self, alias: str):
        """The ModelVersion behind ``alias``, or None when the model or the alias does not exist."""
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version_by_alias(self.model_name, alias)
        except MlflowException as err:
            if "RESOURCE_DOES_NOT_EXIST" in str(err.error_code) or "not found" in str(err).lower():
                return None
            raise

    def serving_version(self, alias: str) -> int | None:
        version = self.alias_version(alias)
        if version is None:
            return None
        if SERVING_VERSION_TAG not in version.tags:
            raise ValueError(
                f"registry version {version.version} of {self.model_name} has no {SERVING_VERSION_TAG} tag"
            )
        return int(version.tags[SERVING_VERSION_TAG])

    def register(self, run_id: str | None, artifacts: dict[str, Path], tags: dict[str, str]):
        """Log artifacts to the training run and register them as a new model version."""
        self._ensure_model()
        if run_id is None:
            experiment = self.client.get_experiment_by_name(self.model_name) or None
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(self.model_name)
            run_id = self.client.create_run(experiment_id, run_name="registration").info.run_id
        for name, path in artifacts.items():
            if path.is_dir():
                self.client.log_artifacts(run_id, str(path), name)
            else:
                self.client.log_artifact(run_id, str(path), name)
        source = f"runs:/{run_id}/{next(iter(artifacts))}" if artifacts else f"runs:/{run_id}"
        version = self.client.create_model_version(self.model_name, source=source, run_id=run_id, tags=tags)
        logger.info("Registered %s version %s", self.model_name, version.version)
        return version

    def get_version(self, version: int | str):
        """A registered version, or a clear error naming the versions that exist."""
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version(self.model_name, str(version))
        except MlflowException as err:
            known = sorted(int(v.version) for v in self.client.search_model_versions(f"name='{self.model_name}'"))
            message = f"{self.model_name} has no registry version {version}; it has {known}"
            raise RegistryVersionNotFoundError(message) from err

    def versions_tagged(self, key: str, value: str) -> list:
        """The versions whose tag ``key`` is ``value``, newest first (the registry searches; nothing is listed)."""
        quoted = value.replace("'", "\\'")
        found = self.client.search_model_versions(f"name='{self.model_name}' AND tags.`{key}`='{quoted}'")
        return sorted(found, key=lambda v: int(v.version), reverse=True)

    def set_alias(self, alias: str, version: str | int) -> None:
        self.client.set_registered_model_alias(self.model_name, alias, str(version))

    def delete_alias(self, alias: str) -> None:
        if self.alias_version(alias) is not None:
            self.client.delete_registered_model_alias(self.model_name, alias)

    def tag(self, version: str | int, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_model_version_tag(self.model_name, str(version), key, value)
