"""Which SavedModel scores: a version the Promoter pushed into the TF Serving layout, named as the registry names
it. ``champion`` resolves as the Evaluator's ChampionModel resolves it (components/champion/resolve.py: the
registry's alias, else the serving directory's stable label); any other alias, or ``--version N`` (a registry
version, as in ``torchtfx promote --version N``), through its ``serving_version`` tag, in a serving directory that
belongs to this registry, in a folder that still holds the registered fingerprint."""

from __future__ import annotations

from pathlib import Path

from torchtfx.components.champion.public import Champion, checked_version, resolve_champion
from torchtfx.components.promoter.public import ServingTarget
from torchtfx.components.shared import serving_identity
from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import (
    CHAMPION,
    SERVING_VERSION_TAG,
    Registry,
    TrackingUnavailableError,
    check_reachable,
)
from torchtfx.components.tf_serving.version_folder import check_registered_bytes
from torchtfx.pipeline.predict.errors import PredictError


def served_model(target: ServingTarget, alias: str = CHAMPION, version: int | None = None) -> Champion:
    """The serving version that ``alias`` (or registry ``version``, which wins) names, checked readable."""
    try:
        check_reachable(target.registry.tracking_uri)  # MLflow's own client would retry for minutes
    except TrackingUnavailableError as err:
        raise TrackingUnavailableError(f"{err}: nothing was scored. Start it, or fix MLFLOW_TRACKING_URI") from None
    if version is None and alias == CHAMPION:
        found = resolve_champion(target.serving_dir, target.registry)
        if found is None:
            raise PredictError(
                f"there is no champion to score with: {target.registry.model_name} has no {CHAMPION!r} alias and "
                f"{target.serving_dir} holds no served version. Run the pipeline (`torchtfx run`) until a model is "
                "promoted, or check --pipeline-root / --serving-dir / MLFLOW_TRACKING_URI"
            )
        return found
    return _registered(target, alias, version)


def _registered(target: ServingTarget, alias: str, version: int | None) -> Champion:
    registry: Registry = target.registry
    serving_identity.check(target.serving_dir, registry)
    chosen = registry.get_version(version) if version is not None else registry.alias_version(alias)
    if chosen is None:
        raise PredictError(
            f"{registry.model_name} has no alias {alias!r}; score with --alias {CHAMPION} or a registry version "
            "(--version N)"
        )
    serving = chosen.tags.get(SERVING_VERSION_TAG, "")
    if not serving.isdigit():
        raise PredictError(
            f"registry version {chosen.version} of {registry.model_name} was never served (no {SERVING_VERSION_TAG} "
            "tag): only a promoted version has a serving folder to score with. Pick one that was promoted "
            "(--version N), or the champion"
        )
    what = f"registry version {chosen.version}" + (f" ({alias})" if version is None else "")
    found = checked_version(target.serving_dir, int(serving), str(chosen.version), "registry", what)
    # The folder holds the bytes registered under this version.
    recorded = chosen.tags.get(MODEL_FINGERPRINT_TAG)
    check_registered_bytes(target.serving_dir, serving, recorded, str(chosen.version), registry.model_name)
    return found


def describe(model: Champion) -> str:
    """How a summary names the model that scored."""
    registry = f"registry version {model.registry_version}, " if model.registry_version else ""
    return f"serving version {model.serving_version} ({registry}{Path(model.saved_model_dir)})"
