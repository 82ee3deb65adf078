"""The MLflow Model Registry as the source of truth for who is champion (aliases, not stages)."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)

CHAMPION = "champion"
PREVIOUS = "previous"
CHALLENGER = "challenger"
SERVING_VERSION_TAG = "serving_version"


class Registry:
    def __init__(self, tracking_uri: str, model_name: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        self.tracking_uri = tracking_uri
        self.model_name = model_name

    def _ensure_model(self) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.model_name)
        except MlflowException:
            self.client.create_registered_model(self.model_name, description="Promoted by torchtfx")

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

    def version_for_serving(self, serving_version: int):
        for version in self.client.search_model_versions(f"name='{self.model_name}'"):
            if version.tags.get(SERVING_VERSION_TAG) == str(serving_version):
                return version
        return None

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
            raise LookupError(f"{self.model_name} has no registry version {version}; it has {known}") from err

    def set_alias(self, alias: str, version: str | int) -> None:
        self.client.set_registered_model_alias(self.model_name, alias, str(version))

    def delete_alias(self, alias: str) -> None:
        if self.alias_version(alias) is not None:
            self.client.delete_registered_model_alias(self.model_name, alias)

    def tag(self, version: str | int, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_model_version_tag(self.model_name, str(version), key, value)
