"""Promotion, rejection, rollback and manual override as small transactions.

Before any change, under the lock: the serving directory must belong to this registry and its models.config
must parse (``target.open_target``); a journaled change left by a crash is repaired (``journal.reconcile``).

Order of a promotion, each step journaled first so a crash at any point is repairable:
1. check that the registry's champion is still the one the Evaluator compared the candidate with;
2. push the SavedModel to ``<serving>/<next version>/`` (atomic rename; not yet in models.config,
   so TF Serving does not load it), register it in MLflow, and check the folder holds the registered bytes;
3. stage it: list it in models.config with the labels unchanged (``tf_serving.transition.stage``); with a server
   address, wait until TF Serving has it AVAILABLE, and undo everything when it does not;
4. move the registry aliases (``previous`` <- old champion, ``champion`` <- new);
5. move the ``stable`` / ``canary`` labels onto it: at once when the server confirmed the load, else only once
   the user confirms it (``torchtfx promote --finish``), or the user said so in advance (``--confirm-labels
   immediate``, for a folder no TF Serving reads: confirmation.py); until then no new promotion starts.

The registry's ``champion`` alias is the source of truth; nothing is ever left half-promoted, and no label
ever points at a version the server has not loaded. A candidate the registry already has (``unchanged``)
changes nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import shutil
from pathlib import Path

from torchtfx.components.promoter import journal, unchanged
from torchtfx.components.promoter.journal import (
    CONFIRM,
    JOURNAL_FILE,
    KEEP,
    OVERRIDE,
    PROMOTION,
    ROLLBACK,
    STEP_LABELS,
    STEP_PUSH,
    UNDO,
    Entry,
    finish,
    pending_label_move,
    reconcile,
)
from torchtfx.components.promoter.target import (
    Baseline,
    ChampionMovedError,
    PromotionError,
    ServingTarget,
    open_target,
    require_compared,
    require_registry,
    target_state,
    verify_folder,
)
from torchtfx.components.promoter.unchanged import ROLLED_BACK_TAG, Unchanged
from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, PREVIOUS, SERVING_VERSION_TAG
from torchtfx.components.tf_serving import fingerprint, layout
from torchtfx.components.tf_serving.errors import ServingChangeError
from torchtfx.components.tf_serving.layout import promotion_lock
from torchtfx.components.tf_serving.model_config import ServedState

# The journal's names, for the executor, the CLI and the tests, which know this module as the Promoter's API.
__all__ = [
    "JOURNAL_FILE",
    "Baseline",
    "Candidate",
    "ChampionMovedError",
    "PromotionError",
    "ServingTarget",
    "Unchanged",
    "finish",
    "pending_label_move",
    "promote",
    "reconcile",
    "reject",
    "rollback",
    "set_champion",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Candidate:
    saved_model_dir: Path
    onnx_path: Path | None
    mlflow_run_id: str | None
    tags: dict[str, str]
    mlflow_model_dir: Path | None = None  # the Trainer's MLflow Model (pyfunc; SavedModel, ONNX, torch inside)

    @functools.cached_property
    def fingerprint(self) -> str:
        """The served SavedModel's content digest, computed once (every file read: seconds per GiB)."""
        return fingerprint.saved_model_fingerprint(self.saved_model_dir)

    def registry_tags(self, **extra: str) -> dict[str, str]:
        return {**self.tags, MODEL_FINGERPRINT_TAG: self.fingerprint, **extra}

    def registry_artifacts(self) -> dict[str, Path]:
        """What a registered version holds; its first entry is the version's source."""
        if self.mlflow_model_dir is not None:
            return {"model": self.mlflow_model_dir}
        # A Model artifact from before MLflow Models were built: the raw folders, as then.
        return {"serving_model": self.saved_model_dir, **({"onnx": self.onnx_path} if self.onnx_path else {})}


def _unchanged(found: Unchanged, target: ServingTarget, repaired: journal.Repair | None, note: str = "") -> Unchanged:
    """``found``, its message saying what happened to the served state (a pending label move is settled)."""
    waiting = pending_label_move(target)
    if repaired is not None:
        served = f"Pending from before, done now: {repaired.message}."
    elif waiting is not None:
        served = (
            f"The label move onto version {waiting} still waits: check that TF Serving has it AVAILABLE, "
            "then run `torchtfx promote --finish`."
        )
    else:
        served = "models.config and TF Serving were left as they were."
    found = dataclasses.replace(found, message=f"{found.message} {served}{note}")
    logger.warning("%s", found.message)
    return found


def _require_settled(target: ServingTarget) -> None:
    """No new version while the last one's label move waits for a confirmation nobody gave."""
    waiting = pending_label_move(target)
    if waiting is not None:
        raise PromotionError(
            f"serving version {waiting} is the champion but nobody has confirmed that TF Serving loaded it, so its "
            "labels have not moved; the candidate was NOT promoted and nothing was changed. Check that TF Serving "
            f"reports version {waiting} AVAILABLE and run `torchtfx promote --finish` (or `torchtfx promote "
            "--rollback` if it failed to load), then rerun; or give --serving-address, which confirms loads itself, "
            "or, where no TF Serving reads the folder, --confirm-labels immediate"
        )


def promote(candidate: Candidate, target: ServingTarget, compared_with: Baseline | None = None) -> int | Unchanged:
    """Push, register, stage (and await), move aliases, move labels; returns the new serving version, or
    :class:`Unchanged` (nothing done) for a candidate identical to the champion or to a rolled-back version.
    ``compared_with``: the champion the Evaluator compared it with (None: not checked, for callers that bypass
    the Evaluator on purpose)."""
    served = target.served()
    with promotion_lock(target.serving_dir):
        open_target(target)
        # A pending label move is settled even when nothing else is done; `immediate` is the user's confirmation.
        repaired = reconcile(target, served, mode=CONFIRM if target.labels_at_once else KEEP)
        found = unchanged.champion_match(
            candidate.fingerprint, fingerprint.listing(candidate.saved_model_dir), target.registry, target.serving_dir
        )
        found = found or unchanged.rolled_back_match(candidate.fingerprint, target.registry)
        if found is not None:
            return _unchanged(found, target, repaired)
        _require_settled(target)
        old_champion = target.registry.alias_version(CHAMPION)
        require_compared(target, compared_with, old_champion)
        version = layout.next_version(target.serving_dir)
        entry = _push_and_register(candidate, target, version)
        previous = int(old_champion.tags[SERVING_VERSION_TAG]) if old_champion is not None else None
        desired = target_state(target.serving_dir, version, previous)
        try:
            outcome = journal.switch(
                target,
                served,
                desired,
                entry,
                frozenset({version}),
                lambda: _move_aliases(target, entry.registry_version, old_champion),
            )
        except ServingChangeError as err:
            _abandon(target, version, entry.registry_version, str(err))
            raise PromotionError(
                f"serving version {version} was not promoted: {err}. The champion (registry version "
                f"{old_champion.version if old_champion else 'none'}) keeps its labels and the registry aliases."
            ) from None
    logger.info(
        "Promoted serving version %s (registry version %s) to champion; %s", version, entry.registry_version, outcome
    )
    return version


def _push_and_register(candidate: Candidate, target: ServingTarget, version: int) -> Entry:
    """Journal, push, register, journal the registry version; the folder must hold the registered bytes."""
    entry = Entry(version, STEP_PUSH, PROMOTION, aliases_before=journal.aliases_now(target.registry))
    journal.write_journal(target, entry)
    _push(candidate, target, version)
    tags = candidate.registry_tags(**{SERVING_VERSION_TAG: str(version)})
    registered = target.registry.register(candidate.mlflow_run_id, candidate.registry_artifacts(), tags)
    entry = dataclasses.replace(entry, registry_version=str(registered.version))
    journal.write_journal(target, entry)
    try:
        verify_folder(target, registered)
    except PromotionError as err:
        _abandon(target, version, entry.registry_version, str(err))
        raise
    return entry


def _abandon(target: ServingTarget, version: int, registry_version: str, reason: str) -> None:
    """The server never loaded the version: it is not served, not champion; the registry says why."""
    shutil.rmtree(target.serving_dir / str(version), ignore_errors=True)
    target.registry.tag(registry_version, {"load_failed": "true", "load_failure": reason[:4000]})
    journal.journal_path(target).unlink(missing_ok=True)


def _os_reason(err: OSError) -> str:
    """'No space left on device', also from shutil.Error, which lists (src, dst, reason) per failed file."""
    if err.strerror:
        return err.strerror
    found = re.search(r"\[Errno \d+\] ([^:'\"]+)", str(err))
    return found.group(1).strip() if found else str(err)


def _push(candidate: Candidate, target: ServingTarget, version: int) -> None:
    try:
        layout.push_version(candidate.saved_model_dir, target.serving_dir, version)
    except OSError as err:
        journal.journal_path(target).unlink(missing_ok=True)  # nothing to repair: the partial copy is already gone
        raise PromotionError(
            f"pushing serving version {version} to {target.serving_dir} failed ({_os_reason(err)}); nothing "
            "was promoted and the partial copy was removed. Free space (or fix permissions) and rerun."
        ) from err


def _move_aliases(target: ServingTarget, new_version: str, old_champion) -> None:
    if old_champion is not None:
        target.registry.set_alias(PREVIOUS, old_champion.version)
    target.registry.set_alias(CHAMPION, new_version)


def reject(candidate: Candidate, target: ServingTarget, reasons: list[str]) -> str | Unchanged | None:
    """Record a rejected candidate as ``challenger`` with its reasons; serving stays untouched. Returns the
    registry version, or :class:`Unchanged` (nothing registered) when the candidate is the champion itself or
    the current challenger."""
    if candidate.mlflow_run_id is None:
        return None
    with promotion_lock(target.serving_dir):
        open_target(target)
        champion = unchanged.champion_match(
            candidate.fingerprint, fingerprint.listing(candidate.saved_model_dir), target.registry, target.serving_dir
        )
        if champion is not None:
            note = " The champion itself fails today's gates (below): were they tightened?"
            return _unchanged(champion, target, None, note)
        found = unchanged.challenger_match(candidate.fingerprint, target.registry)
        if found is not None:
            return _unchanged(found, target, None)
        tags = candidate.registry_tags(rejected="true", rejection_reasons="; ".join(reasons)[:4000])
        registered = target.registry.register(candidate.mlflow_run_id, candidate.registry_artifacts(), tags)
        target.registry.set_alias(CHALLENGER, registered.version)
    return registered.version


def rollback(target: ServingTarget) -> str:
    """champion <- previous, and both labels with it (the previous champion is kept loaded, so they move at
    once; the rolled-back version keeps no label and is unloaded). A pending promotion that no server confirmed
    or that failed to load is what a rollback undoes. Idempotent: with no previous, no-op."""
    require_registry(target, "the rollback")
    with promotion_lock(target.serving_dir):
        open_target(target)
        repaired = reconcile(target, mode=UNDO)
        if repaired is not None and repaired.undone is not None:
            return f"rolled back: {repaired.message}"
        champion, previous = target.registry.alias_version(CHAMPION), target.registry.alias_version(PREVIOUS)
        if champion is None:
            raise PromotionError(f"{target.model_name} has no champion in the registry; nothing to roll back")
        if previous is None:
            return (
                f"nothing to roll back: {target.model_name} has no previous champion "
                f"(champion stays registry version {champion.version})"
            )
        verify_folder(target, previous)

        def move_aliases() -> None:
            target.registry.set_alias(CHAMPION, previous.version)
            target.registry.delete_alias(PREVIOUS)
            target.registry.tag(champion.version, {ROLLED_BACK_TAG: "true"})

        desired = target_state(target.serving_dir, _serving(previous), None)
        outcome = _guarded_switch(target, desired, _entry(target, ROLLBACK, previous), move_aliases, "roll back")
    return (
        f"rolled back: champion is registry version {previous.version} again (was {champion.version}; a rerun that "
        f"trains the same model does not promote it again, `--version {champion.version}` does); {outcome}"
    )


def set_champion(target: ServingTarget, registry_version: int, reason: str) -> str:
    """Manual override: make an existing, served registry version the champion (a pending promotion that was
    not confirmed or did not load is undone first)."""
    if registry_version < 1:
        raise PromotionError(
            f"--version {registry_version} is not a registry version: they count from 1. Give the number MLflow "
            "shows for the version to serve; nothing was created or changed"
        )
    if not reason.strip():
        raise PromotionError("a manual promotion needs a reason (--reason)")
    require_registry(target, f"the promotion of registry version {registry_version}")
    target.registry.get_version(registry_version)  # it exists, before the lock binds the serving directory
    with promotion_lock(target.serving_dir):
        open_target(target)
        reconcile(target, mode=UNDO)
        wanted = target.registry.get_version(registry_version)
        _require_served(target, wanted)
        champion = target.registry.alias_version(CHAMPION)
        if champion is not None and champion.version == wanted.version:
            return f"registry version {registry_version} is already the champion; nothing changed"

        def move_aliases() -> None:
            _move_aliases(target, wanted.version, champion)
            target.registry.tag(wanted.version, {"manual_promotion_reason": reason, ROLLED_BACK_TAG: "false"})

        previous = _serving(champion) if champion is not None else None
        desired = target_state(target.serving_dir, _serving(wanted), previous)
        outcome = _guarded_switch(target, desired, _entry(target, OVERRIDE, wanted), move_aliases, "promote it")
    logger.warning("Manual promotion of registry version %s: %s", registry_version, reason)
    return f"registry version {registry_version} is now the champion (reason: {reason}); {outcome}"


def _serving(version) -> int:
    return int(version.tags[SERVING_VERSION_TAG])


def _entry(target: ServingTarget, kind: str, version) -> Entry:
    """What a rollback or override journals if its label move has to wait."""
    return Entry(_serving(version), STEP_LABELS, kind, str(version.version), journal.aliases_now(target.registry))


def _guarded_switch(target: ServingTarget, desired: ServedState, entry: Entry, move_aliases, what: str) -> str:
    try:
        return journal.switch(target, target.served(), desired, entry, move_aliases=move_aliases)
    except ServingChangeError as err:
        raise PromotionError(f"could not {what}: {err}. The registry aliases did not move") from None


def _require_served(target: ServingTarget, version) -> None:
    serving = version.tags.get(SERVING_VERSION_TAG)
    if serving is None or int(serving) not in layout.versions(target.serving_dir):
        raise PromotionError(
            f"registry version {version.version} has no complete serving folder in {target.serving_dir} "
            f"(serving_version={serving}); it cannot be served"
        )
    verify_folder(target, version)
