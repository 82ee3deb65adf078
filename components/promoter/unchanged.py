"""Is the candidate a model the registry already has? Then promoting or recording it again changes nothing.

On a rerun over unchanged data and code, MLMD's cache hands the Promoter the Model artifact of an earlier run
(ExampleGen .. TorchTrainer are cache hits), while ChampionModel, the Evaluator and the Promoter run again (the
champion must be looked up now): the Evaluator compares the champion with itself, blesses it, and without this
check the same bytes were pushed as a new serving version and registered as a new version on every rerun. A
retrain that reproduces the same bytes (same seed and data, caching off) is the same case.

What is compared: the model fingerprint (``components.tf_serving.fingerprint``, a digest of the served SavedModel),
recorded as a registry tag on every version the Promoter registers, so the champion's folder is not re-read;
for a champion promoted before fingerprints were recorded, its serving folder is digested instead. A matching
tag is trusted only while the champion's folder still lists the same files with the same sizes (a stat, no
read): a folder damaged on disk is replaced by a fresh push rather than declared identical.

Decisions, each a no-op that says so (nothing pushed, registered, written to models.config or sent to TF
Serving):
- identical to the **champion**: nothing to do, blessed or not (a champion that fails today's gates is named as
  such, and not registered again as a challenger);
- identical to a version that was **rolled back**: an operator took it out of service, so an unchanged rerun
  does not put it back; ``torchtfx promote --version N --reason ...`` does, on purpose;
- rejected and identical to the current **challenger**: already recorded with its reasons.
A candidate identical to another served version (say ``previous``) is promoted as usual, as a new version.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, SERVING_VERSION_TAG, Registry
from torchtfx.components.tf_serving import fingerprint

logger = logging.getLogger(__name__)

ROLLED_BACK_TAG = "rolled_back"  # "true" on a version a rollback took out of service


@dataclasses.dataclass(frozen=True)
class Unchanged:
    """The candidate is already in the registry: nothing was pushed or registered; ``message`` says why."""

    registry_version: str
    serving_version: int | None  # None for a rejected challenger, which was never served
    message: str


def _short(value: str) -> str:
    scheme, _, digest = value.partition(":")
    return f"{scheme}:{digest[:12]}"


def recorded_fingerprint(version, serving_dir: Path) -> str | None:
    """A served version's fingerprint: its registry tag, else the digest of its serving folder (a version
    promoted before fingerprints were recorded); None when neither exists."""
    tagged = version.tags.get(MODEL_FINGERPRINT_TAG)
    if tagged:
        return tagged
    folder = serving_dir / version.tags.get(SERVING_VERSION_TAG, "")
    if SERVING_VERSION_TAG in version.tags and (folder / "saved_model.pb").is_file():
        return fingerprint.saved_model_fingerprint(folder)
    return None


def champion_match(
    model_fingerprint: str, files: list[tuple[str, int]], registry: Registry, serving_dir: Path
) -> Unchanged | None:
    """The champion, when the candidate is byte-identical to it (``files``: the candidate's listing)."""
    champion = registry.alias_version(CHAMPION)
    if champion is None or SERVING_VERSION_TAG not in champion.tags:
        return None
    serving = int(champion.tags[SERVING_VERSION_TAG])
    if recorded_fingerprint(champion, serving_dir) != model_fingerprint:
        return None
    folder = serving_dir / str(serving)
    if not folder.is_dir() or fingerprint.listing(folder) != files:
        logger.warning(
            "The champion's folder %s no longer holds the files its fingerprint was recorded from; "
            "the identical candidate is promoted as a new version to replace it",
            folder,
        )
        return None
    message = (
        f"The candidate is identical to the champion (serving version {serving}, registry version "
        f"{champion.version}; model fingerprint {_short(model_fingerprint)}): nothing was pushed or registered."
    )
    return Unchanged(str(champion.version), serving, message)


def rolled_back_match(model_fingerprint: str, registry: Registry) -> Unchanged | None:
    """The newest version with the candidate's fingerprint that a rollback took out of service, if any."""
    for version in registry.versions_tagged(MODEL_FINGERPRINT_TAG, model_fingerprint):
        if version.tags.get(ROLLED_BACK_TAG) == "true":
            champion = registry.alias_version(CHAMPION)
            now = f"registry version {champion.version}" if champion is not None else "none"
            serving = version.tags.get(SERVING_VERSION_TAG)
            message = (
                f"The candidate is identical to serving version {serving} (registry version {version.version}), "
                f"which was rolled back: it is not promoted again by a rerun, and nothing was pushed or "
                f"registered (the champion stays {now}). To serve it again on purpose: "
                f"torchtfx promote --version {version.version} --reason '...'"
            )
            return Unchanged(str(version.version), int(serving) if serving else None, message)
    return None


def challenger_match(model_fingerprint: str, registry: Registry) -> Unchanged | None:
    """The current challenger, when the rejected candidate is identical to it."""
    challenger = registry.alias_version(CHALLENGER)
    if challenger is None or challenger.tags.get(MODEL_FINGERPRINT_TAG) != model_fingerprint:
        return None
    message = (
        f"The candidate is identical to the rejected challenger (registry version {challenger.version}), "
        "already recorded with its reasons: nothing was registered again."
    )
    return Unchanged(str(challenger.version), None, message)
