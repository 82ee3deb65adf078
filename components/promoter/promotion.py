"""Promotion, rejection, rollback and manual override as small transactions.

Order of a promotion, each step journaled first so a crash at any point is repairable:
1. push the SavedModel to ``<serving>/<next version>/`` (atomic rename; not yet in models.config,
   so TF Serving does not load it) and register it in MLflow;
2. stage it: list it in models.config with the labels unchanged (``serving_transition.stage``); with a server
   address, wait until TF Serving has it AVAILABLE, and undo everything when it does not;
3. move the registry aliases (``previous`` <- old champion, ``champion`` <- new);
4. move the ``stable`` / ``canary`` labels onto it: at once when the server confirmed the load, else later
   (the journal keeps the pending move for ``torchtfx promote --finish`` and the next promotion).

The registry's ``champion`` alias is the source of truth. :func:`reconcile` (run under the lock by
every promotion and rollback) finishes a journaled promotion whose aliases moved, and undoes one
whose aliases did not: nothing is ever left half-promoted, and no label ever points at a version the
server may not have loaded.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
from pathlib import Path

from torchtfx.components.promoter import serving_transition
from torchtfx.components.promoter.serving_transition import Served, ServingChangeError
from torchtfx.components.shared import serving_layout
from torchtfx.components.shared.mlflow_client import CHALLENGER, CHAMPION, PREVIOUS, SERVING_VERSION_TAG, Registry
from torchtfx.components.shared.model_server import ModelServer
from torchtfx.components.shared.serving_config import CANARY, STABLE, ServedState
from torchtfx.components.shared.serving_layout import promotion_lock

logger = logging.getLogger(__name__)

JOURNAL_FILE = ".promotion-journal.json"
# Journal steps: the version folder exists (and may be staged); its aliases may not have moved yet.
STEP_PUSH, STEP_LABELS = "push", "labels"  # labels: the aliases moved, the label move is pending


class PromotionError(RuntimeError):
    """A promotion, rollback or override cannot be done as asked."""


@dataclasses.dataclass(frozen=True)
class ServingTarget:
    serving_dir: Path
    model_name: str
    registry: Registry
    batching: serving_layout.BatchingParams = dataclasses.field(default_factory=serving_layout.BatchingParams)
    server_address: str | None = None  # TF Serving's gRPC host:port; None: nobody to ask, labels move later
    load_timeout_s: float = serving_transition.DEFAULT_LOAD_TIMEOUT_S

    def served(self) -> Served:
        server = ModelServer(self.server_address) if self.server_address else None
        return Served(self.serving_dir, self.model_name, self.batching, server, self.load_timeout_s)


@dataclasses.dataclass(frozen=True)
class Candidate:
    saved_model_dir: Path
    onnx_path: Path | None
    mlflow_run_id: str | None
    tags: dict[str, str]
    mlflow_model_dir: Path | None = None  # the Trainer's MLflow Model (pyfunc; SavedModel, ONNX, torch inside)

    def registry_artifacts(self) -> dict[str, Path]:
        """What a registered version holds; its first entry is the version's source."""
        if self.mlflow_model_dir is not None:
            return {"model": self.mlflow_model_dir}
        # A Model artifact from before MLflow Models were built: the raw folders, as then.
        return {"serving_model": self.saved_model_dir, **({"onnx": self.onnx_path} if self.onnx_path else {})}


def _journal(target: ServingTarget) -> Path:
    return target.serving_dir / JOURNAL_FILE


def _write_journal(target: ServingTarget, **state) -> None:
    serving_layout.write_text_atomic(_journal(target), json.dumps(state, sort_keys=True))


def pending_label_move(target: ServingTarget) -> int | None:
    """The serving version whose label move waits for ``promote --finish`` (or the next promotion)."""
    journal = _journal(target)
    if not journal.is_file():
        return None
    state = json.loads(journal.read_text())
    return int(state["serving_version"]) if state.get("step") == STEP_LABELS else None


def _registry_target(target: ServingTarget) -> ServedState | None:
    champion = target.registry.serving_version(CHAMPION)
    if champion is None:
        return None
    previous = target.registry.serving_version(PREVIOUS)
    return serving_transition.target_state(target.serving_dir, champion, previous)


def _switch(target: ServingTarget, served: Served, desired: ServedState, unconfirmed: frozenset[int] = frozenset(),
            move_aliases=None) -> str:  # fmt: skip
    """Stage ``desired`` (raises ServingChangeError, nothing changed), then move the aliases, then the labels
    (or journal the label move when nobody can confirm the load)."""
    awaiting = serving_transition.stage(served, desired, unconfirmed)
    if move_aliases is not None:
        move_aliases()
    stable = desired.labels[STABLE]
    if not awaiting:
        try:
            serving_transition.move_labels(served, desired)
        except ServingChangeError as err:
            awaiting = frozenset({stable})
            logger.warning("%s; the label move stays pending", err)
    if awaiting:
        _write_journal(target, serving_version=stable, step=STEP_LABELS)
        return (f"labels {STABLE}/{CANARY} move to version {stable} once TF Serving has loaded it: run "
                "`torchtfx promote --finish` (the next promotion does it too)")  # fmt: skip
    _journal(target).unlink(missing_ok=True)
    return f"TF Serving: {desired.describe()}"


def _registry_switch(target: ServingTarget, served: Served, unconfirmed: frozenset[int] = frozenset()) -> str:
    desired = _registry_target(target)
    if desired is None:
        return "no champion in the registry"
    try:
        return _switch(target, served, desired, unconfirmed)
    except ServingChangeError as err:
        raise PromotionError(
            f"{err}. The labels stay where they were; retry with `torchtfx promote --finish`"
        ) from None


def reconcile(target: ServingTarget, served: Served | None = None) -> str | None:
    """Repair what a crash left behind and finish a pending label move; returns what was done (None when
    nothing was pending). Without a server, a pending move is finished on trust: by the next promotion or
    ``--finish``, a server polling models.config has loaded the staged version (its poll is seconds)."""
    served = served or target.served()
    serving_layout.remove_stale_staging(target.serving_dir)
    journal = _journal(target)
    if not journal.is_file():
        return None
    version = int(json.loads(journal.read_text())["serving_version"])
    if target.registry.serving_version(CHAMPION) == version:
        unconfirmed = frozenset({version}) if served.server is not None else frozenset()
        outcome = _registry_switch(target, served, unconfirmed)
        action = f"finished the promotion of version {version} ({outcome})"
    else:
        _unstage(served, version)
        shutil.rmtree(target.serving_dir / str(version), ignore_errors=True)  # never served: undo
        journal.unlink()
        action = f"undid the interrupted promotion of version {version} (its aliases never moved)"
    logger.warning("Promotion repair: %s", action)
    return action


def _unstage(served: Served, version: int) -> None:
    """Drop a version that no label points at from models.config (a crash may have staged it)."""
    state = serving_transition.current_state(served)
    if state is not None and version in state.versions and version not in state.label_versions():
        serving_transition.restore(served, ServedState(state.versions - {version}, dict(state.labels)))


def finish(target: ServingTarget) -> str:
    """``torchtfx promote --finish``: complete a pending label move (verified when a server address is set)."""
    with promotion_lock(target.serving_dir):
        done = reconcile(target)
    return done or "nothing pending: models.config already follows the registry"


def promote(candidate: Candidate, target: ServingTarget) -> int:
    """Push, register, stage (and await), move aliases, move labels; returns the new serving version."""
    served = target.served()
    with promotion_lock(target.serving_dir):
        reconcile(target, served)
        old_champion = target.registry.alias_version(CHAMPION)
        version = serving_layout.next_version(target.serving_dir)
        _write_journal(target, serving_version=version, step=STEP_PUSH)
        _push(candidate, target, version)
        tags = {**candidate.tags, SERVING_VERSION_TAG: str(version)}
        registered = target.registry.register(candidate.mlflow_run_id, candidate.registry_artifacts(), tags)
        previous = int(old_champion.tags[SERVING_VERSION_TAG]) if old_champion is not None else None
        desired = serving_transition.target_state(target.serving_dir, version, previous)
        try:
            outcome = _switch(target, served, desired, frozenset({version}),
                              lambda: _move_aliases(target, registered.version, old_champion))  # fmt: skip
        except ServingChangeError as err:
            _abandon(target, version, registered.version, str(err))
            raise PromotionError(
                f"serving version {version} was not promoted: {err}. The champion (registry version "
                f"{old_champion.version if old_champion else 'none'}) keeps its labels and the registry aliases."
            ) from None
    logger.info("Promoted serving version %s (registry version %s) to champion; %s", version, registered.version,
                outcome)  # fmt: skip
    return version


def _abandon(target: ServingTarget, version: int, registry_version: str, reason: str) -> None:
    """The server never loaded the version: it is not served, not champion; the registry says why."""
    shutil.rmtree(target.serving_dir / str(version), ignore_errors=True)
    target.registry.tag(registry_version, {"load_failed": "true", "load_failure": reason[:4000]})
    _journal(target).unlink(missing_ok=True)


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
        registered = target.registry.register(candidate.mlflow_run_id, candidate.registry_artifacts(), tags)
        target.registry.set_alias(CHALLENGER, registered.version)
    return registered.version


def rollback(target: ServingTarget) -> str:
    """champion <- previous, and the labels with it (the previous champion is kept loaded, so they move at
    once). Idempotent: with no previous, no-op."""
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

        def move_aliases() -> None:
            target.registry.set_alias(CHAMPION, previous.version)
            target.registry.delete_alias(PREVIOUS)
            target.registry.tag(champion.version, {"rolled_back": "true"})

        desired = serving_transition.target_state(target.serving_dir, _serving(previous), None)
        outcome = _guarded_switch(target, desired, move_aliases, "roll back")
    return f"rolled back: champion is registry version {previous.version} again (was {champion.version}); {outcome}"


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

        def move_aliases() -> None:
            _move_aliases(target, wanted.version, champion)
            target.registry.tag(wanted.version, {"manual_promotion_reason": reason, "rolled_back": "false"})

        previous = _serving(champion) if champion is not None else None
        desired = serving_transition.target_state(target.serving_dir, _serving(wanted), previous)
        outcome = _guarded_switch(target, desired, move_aliases, "promote it")
    logger.warning("Manual promotion of registry version %s: %s", registry_version, reason)
    return f"registry version {registry_version} is now the champion (reason: {reason}); {outcome}"


def _serving(version) -> int:
    return int(version.tags[SERVING_VERSION_TAG])


def _guarded_switch(target: ServingTarget, desired: ServedState, move_aliases, what: str) -> str:
    try:
        return _switch(target, target.served(), desired, move_aliases=move_aliases)
    except ServingChangeError as err:
        raise PromotionError(f"could not {what}: {err}. The registry aliases did not move") from None


def _require_served(target: ServingTarget, version) -> None:
    serving = version.tags.get(SERVING_VERSION_TAG)
    if serving is None or int(serving) not in serving_layout.versions(target.serving_dir):
        raise PromotionError(
            f"registry version {version.version} has no complete serving folder in {target.serving_dir} "
            f"(serving_version={serving}); it cannot be served"
        )
