"""Promotion, rejection, rollback and manual override as small transactions.

Order of a promotion, each step journaled first so a crash at any point is repairable:
1. push the SavedModel to ``<serving>/<next version>/`` (atomic rename; not yet in models.config,
   so TF Serving does not load it);
2. register it in MLflow and move the aliases (``previous`` <- old champion, ``champion`` <- new);
3. rewrite ``models.config`` and ``batching_parameters.txt`` from the registry.

The registry's ``champion`` alias is the source of truth. :func:`reconcile` (run under the lock by
every promotion and rollback) finishes a journaled promotion whose aliases moved, and undoes one
whose aliases did not: nothing is ever left half-promoted.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
from pathlib import Path

from torchtfx.components.shared import serving_layout
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, PREVIOUS, SERVING_VERSION_TAG, Registry
from torchtfx.components.shared.serving_layout import promotion_lock

logger = logging.getLogger(__name__)

JOURNAL_FILE = ".promotion-journal.json"


class PromotionError(RuntimeError):
    """A promotion, rollback or override cannot be done as asked."""


@dataclasses.dataclass(frozen=True)
class ServingTarget:
    serving_dir: Path
    model_name: str
    registry: Registry
    batching: serving_layout.BatchingParams = dataclasses.field(default_factory=serving_layout.BatchingParams)


@dataclasses.dataclass(frozen=True)
class Candidate:
    saved_model_dir: Path
    onnx_path: Path | None
    mlflow_run_id: str | None
    tags: dict[str, str]


def _journal(target: ServingTarget) -> Path:
    return target.serving_dir / JOURNAL_FILE


def _write_journal(target: ServingTarget, **state) -> None:
    serving_layout.write_text_atomic(_journal(target), json.dumps(state, sort_keys=True))


def _rewrite_config(target: ServingTarget) -> None:
    champion = target.registry.serving_version(CHAMPION)
    if champion is None:
        return
    previous = target.registry.serving_version(PREVIOUS)
    serving_layout.write_serving_config(target.serving_dir, target.model_name, champion, previous, target.batching)


def reconcile(target: ServingTarget) -> str | None:
    """Repair what a crash left behind; returns what was done (None when nothing was pending)."""
    serving_layout.remove_stale_staging(target.serving_dir)
    journal = _journal(target)
    if not journal.is_file():
        return None
    state = json.loads(journal.read_text())
    version = int(state["serving_version"])
    if target.registry.serving_version(CHAMPION) == version:
        _rewrite_config(target)  # aliases moved: finish the promotion
        action = f"completed the interrupted promotion of version {version}"
    else:
        shutil.rmtree(target.serving_dir / str(version), ignore_errors=True)  # never served: undo
        _rewrite_config(target)
        action = f"undid the interrupted promotion of version {version} (its aliases never moved)"
    journal.unlink()
    logger.warning("Promotion repair: %s", action)
    return action


def promote(candidate: Candidate, target: ServingTarget) -> int:
    """Push, register, move aliases, rewrite config; returns the new serving version."""
    with promotion_lock(target.serving_dir):
        reconcile(target)
        old_champion = target.registry.alias_version(CHAMPION)
        version = serving_layout.next_version(target.serving_dir)
        _write_journal(target, serving_version=version, step="push")
        _push(candidate, target, version)
        artifacts = {"serving_model": candidate.saved_model_dir}
        if candidate.onnx_path is not None:
            artifacts["onnx"] = candidate.onnx_path
        tags = {**candidate.tags, SERVING_VERSION_TAG: str(version)}
        registered = target.registry.register(candidate.mlflow_run_id, artifacts, tags)
        _move_aliases(target, registered.version, old_champion)
        _rewrite_config(target)
        _journal(target).unlink()
    logger.info("Promoted serving version %s (registry version %s) to champion", version, registered.version)
    return version


def _os_reason(err: OSError) -> str:
    """'No space left on device', also from shutil.Error, which lists (src, dst, reason) per failed file."""
    if err.strerror:
        return err.strerror
    found = re.search(r"\[Errno \d+\] ([^:'\"]+)", str(err))
    return found.group(1).strip() if found else str(err)


def _push(candidate: Candidate, target: ServingTarget, version: int) -> None:
    try:
        serving_layout.push_version(candidate.saved_model_dir, target.serving_dir, version)
    except OSError as err:
        _journal(target).unlink(missing_ok=True)  # nothing to repair: the partial copy is already gone
        raise PromotionError(
            f"pushing serving version {version} to {target.serving_dir} failed ({_os_reason(err)}); nothing "
            "was promoted and the partial copy was removed. Free space (or fix permissions) and rerun."
        ) from err


def _move_aliases(target: ServingTarget, new_version: str, old_champion) -> None:
    if old_champion is not None:
        target.registry.set_alias(PREVIOUS, old_champion.version)
    target.registry.set_alias(CHAMPION, new_version)


def reject(candidate: Candidate, target: ServingTarget, reasons: list[str]) -> str | None:
    """Record a rejected candidate as ``challenger`` with its reasons; serving stays untouched."""
    if candidate.mlflow_run_id is None:
        return None
    with promotion_lock(target.serving_dir):
        tags = {**candidate.tags, "rejected": "true", "rejection_reasons": "; ".join(reasons)[:4000]}
        artifacts = {"onnx": candidate.onnx_path} if candidate.onnx_path else {}
        registered = target.registry.register(candidate.mlflow_run_id, artifacts, tags)
        target.registry.set_alias(CHALLENGER, registered.version)
    return registered.version


def rollback(target: ServingTarget) -> str:
    """champion <- previous, and rewrite the serving config. Idempotent: with no previous, no-op."""
    with promotion_lock(target.serving_dir):
        reconcile(target)
        champion, previous = target.registry.alias_version(CHAMPION), target.registry.alias_version(PREVIOUS)
        if champion is None:
            raise PromotionError(f"{target.model_name} has no champion in the registry; nothing to roll back")
        if previous is None:
            return (
                f"nothing to roll back: {target.model_name} has no previous champion "
                f"(champion stays registry version {champion.version})"
            )
        _require_served(target, previous)
        target.registry.set_alias(CHAMPION, previous.version)
        target.registry.delete_alias(PREVIOUS)
        target.registry.tag(champion.version, {"rolled_back": "true"})
        _rewrite_config(target)
    return f"rolled back: champion is registry version {previous.version} again (was {champion.version})"


def set_champion(target: ServingTarget, registry_version: int, reason: str) -> str:
    """Manual override: make an existing, served registry version the champion."""
    if not reason.strip():
        raise PromotionError("a manual promotion needs a reason (--reason)")
    with promotion_lock(target.serving_dir):
        reconcile(target)
        wanted = target.registry.get_version(registry_version)
        _require_served(target, wanted)
        champion = target.registry.alias_version(CHAMPION)
        if champion is not None and champion.version == wanted.version:
            return f"registry version {registry_version} is already the champion; nothing changed"
        _move_aliases(target, wanted.version, champion)
        target.registry.tag(wanted.version, {"manual_promotion_reason": reason, "rolled_back": "false"})
        _rewrite_config(target)
    logger.warning("Manual promotion of registry version %s: %s", registry_version, reason)
    return f"registry version {registry_version} is now the champion (reason: {reason})"


def _require_served(target: ServingTarget, version) -> None:
    serving = version.tags.get(SERVING_VERSION_TAG)
    if serving is None or int(serving) not in serving_layout.versions(target.serving_dir):
        raise PromotionError(
            f"registry version {version.version} has no complete serving folder in {target.serving_dir} "
            f"(serving_version={serving}); it cannot be served"
        )
