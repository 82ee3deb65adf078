"""Where a promotion acts (:class:`ServingTarget`), what it serves there (:func:`target_state`: the Promoter's
decision; ``components.tf_serving.transition`` carries it out), and the checks every change passes before it
touches anything: the serving directory belongs to this registry, models.config parses, a folder holds what the
registry registered under it, a version folder is removed only when this registry says it was never served, and
a candidate replaces only the champion the Evaluator compared it with."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

from torchtfx.components.promoter.confirmation import STAGED, moves_at_once
from torchtfx.components.shared import serving_identity
from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import (
    SERVING_VERSION_TAG,
    Registry,
    TrackingUnavailableError,
    check_reachable,
    missing_local_store,
    redact,
)
from torchtfx.components.tf_serving import model_config, transition
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.layout import versions
from torchtfx.components.tf_serving.model_config import CANARY, STABLE, ServedState
from torchtfx.components.tf_serving.model_server import ModelServer
from torchtfx.components.tf_serving.transition import Served
from torchtfx.components.tf_serving.version_folder import FolderChangedError, check_registered_bytes

logger = logging.getLogger(__name__)

JOURNAL_FILE = ".promotion-journal.json"  # journal.py's, named here for the messages of the checks


class PromotionError(RuntimeError):
    """A promotion, rollback or override cannot be done as asked."""


class ChampionMovedError(PromotionError):
    """The registry's champion is not the one the Evaluator compared the candidate with."""


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The champion the Evaluator compared the candidate with (ChampionModel's record): its registry version,
    None when there was no champion."""

    registry_version: str | None


@dataclasses.dataclass(frozen=True)
class ServingTarget:
    serving_dir: Path
    model_name: str
    registry: Registry
    batching: BatchingParams = dataclasses.field(default_factory=BatchingParams)
    server_address: str | None = None  # TF Serving's gRPC host:port; None: nobody to ask, labels move later
    load_timeout_s: float = transition.DEFAULT_LOAD_TIMEOUT_S
    confirm_labels: str = STAGED  # IMMEDIATE (no server address): the setting confirms the load (confirmation.py)

    @property
    def labels_at_once(self) -> bool:
        return moves_at_once(self.confirm_labels, self.server_address)

    def served(self) -> Served:
        server = ModelServer(self.server_address) if self.server_address else None
        return Served(self.serving_dir, self.model_name, self.batching, server, self.load_timeout_s)


def target_state(serving_dir: Path, champion: int, previous: int | None, canary: int | None = None) -> ServedState:
    """stable -> the champion; canary -> the version the caller chose (the champion unless given: never read off
    the disk, so a rolled-back version keeps no label); the previous champion stays loaded so that a rollback
    moves a label onto a version that is already AVAILABLE."""
    on_disk = versions(serving_dir)
    canary = champion if canary is None else canary
    for role, version in (("champion", champion), ("canary", canary)):
        if version not in on_disk:
            raise FileNotFoundError(f"{role} version {version} is missing from {serving_dir}")
    loaded = {champion, canary} | ({previous} if previous in on_disk else set())
    return ServedState(frozenset(loaded), {STABLE: champion, CANARY: canary})


# A registry server restarting answers within seconds; one that is down is refused at once (a closed port) or
# times out per try, so a command waits at most about tries x (timeout + pause) before it says so.
REGISTRY_TRIES, REGISTRY_PAUSE_S, REGISTRY_TIMEOUT_S = 3, 1.0, 5.0


def require_registry(target: ServingTarget, what: str) -> None:
    """Before the promotion lock and before anything is created (``what``: the command's action, a noun phrase,
    for the message): the registry exists (a command that reads or moves aliases never creates a local store)
    and answers (a few tries, not the minutes MLflow's client would retry while holding the lock)."""
    uri = target.registry.tracking_uri
    missing = missing_local_store(uri)
    if missing is not None:
        serving_identity.check_absent_registry(target.serving_dir, target.registry, missing)
        raise PromotionError(
            f"there is no MLflow registry at {redact(uri)} ({missing} does not exist: nothing was ever promoted "
            f"with it): {what} has nothing to act on, and nothing was created or changed. Give the --pipeline-root "
            "whose runs promoted the model, or set MLFLOW_TRACKING_URI to its registry"
        )
    try:
        check_reachable(uri, REGISTRY_TIMEOUT_S, REGISTRY_TRIES, REGISTRY_PAUSE_S)
    except TrackingUnavailableError as err:
        raise TrackingUnavailableError(
            f"{err}: {what} did not start, the promotion lock was not taken and nothing was changed. Start the "
            "MLflow server, or set MLFLOW_TRACKING_URI to the registry that owns the serving directory, and rerun"
        ) from None


def open_target(target: ServingTarget) -> serving_identity.Identity:
    """Under the lock, before any change: the directory is this registry's (bound now if new) and its
    models.config parses. Raises ServingBindingError / ServingConfigError, with the fix."""
    identity = serving_identity.bind(target.serving_dir, target.registry)
    model_config.read_models_config(target.serving_dir)
    return identity


def verify_folder(target: ServingTarget, version) -> None:
    """Refuse to put a label on a serving folder that does not hold the registered version's bytes
    (components/tf_serving/version_folder.py reads the folder)."""
    serving_version = version.tags.get(SERVING_VERSION_TAG, "?")
    recorded = version.tags.get(MODEL_FINGERPRINT_TAG)
    try:
        check_registered_bytes(
            target.serving_dir, serving_version, recorded, str(version.version), target.registry.model_name
        )
    except FolderChangedError as err:
        raise PromotionError(str(err)) from None


def remove_unserved(target: ServingTarget, served: Served, version: int, registry_version: str | None) -> None:
    """Unlist and delete the folder of an interrupted promotion, once this (bound) registry confirms that nothing
    but that promotion's own unaliased ``registry_version`` was registered from it; never what ``stable`` serves."""
    state = transition.current_state(served)
    claimed = [
        v
        for v in target.registry.versions_tagged(SERVING_VERSION_TAG, str(version))
        if str(v.version) != registry_version or v.aliases
    ]
    if claimed or (state is not None and state.labels.get(model_config.STABLE) == version):
        why = (
            f"registry version {claimed[0].version} of {target.registry.model_name} is served from it"
            if claimed
            else f"`stable` points at it in {model_config.MODELS_CONFIG}"
        )
        raise PromotionError(
            f"the promotion journal {target.serving_dir / JOURNAL_FILE} names serving version {version} "
            f"as interrupted, but {why}: nothing was removed or changed. If no promotion is running, delete the "
            "journal and rerun"
        )
    if state is not None and version in state.versions and version not in state.label_versions():
        transition.restore(served, dataclasses.replace(state, versions=state.versions - {version}))
    shutil.rmtree(target.serving_dir / str(version), ignore_errors=True)


def require_compared(target: ServingTarget, compared_with: Baseline | None, champion) -> None:
    """The candidate passed its change gates (and its data the drift gate) against ``compared_with``: promote
    it only over that champion."""
    now = str(champion.version) if champion is not None else None
    if compared_with is None or compared_with.registry_version == now:
        return

    def name(version: str | None) -> str:
        return f"registry version {version}" if version is not None else "no champion"

    raise ChampionMovedError(
        f"the champion changed while this run evaluated its candidate: the Evaluator compared it with "
        f"{name(compared_with.registry_version)}, and {target.registry.model_name}'s champion is now {name(now)} "
        "(promoted or rolled back meanwhile by another run or `torchtfx promote`). The candidate was NOT promoted "
        "and nothing was changed: its change and drift gates were never run against the current champion. Rerun "
        "the pipeline to evaluate it against the current champion (the trained model comes from the cache)."
    )
