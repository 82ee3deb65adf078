"""The promotion journal, the switch of what TF Serving serves, and the repair of what a crash left behind.

Every promotion, rollback and manual override changes the served state through :func:`switch` (stage, move the
registry aliases, move the labels or journal the pending label move). The journal records the serving version,
the step, the registry version and the aliases as they were before, so a pending move can be undone exactly.

:func:`reconcile` (run under the lock, after the serving directory's binding to this registry was checked)
undoes a promotion whose aliases never moved, and settles a pending label move: a label moves only onto a
version the server reports AVAILABLE (``--serving-address``) or that the user confirms (``promote --finish``).
A version the server cannot load, or one a rollback or ``--version`` finds unconfirmed, is undone: the aliases
go back, the version is unlisted, and no label ever pointed at it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from torchtfx.components.promoter.confirmation import IMMEDIATE, SETTING_FLAG
from torchtfx.components.promoter.target import (
    JOURNAL_FILE,
    PromotionError,
    ServingTarget,
    open_target,
    remove_unserved,
    require_registry,
    target_state,
    verify_folder,
)
from torchtfx.components.promoter.unchanged import ROLLED_BACK_TAG
from torchtfx.components.shared.mlflow_client import CHAMPION, PREVIOUS, SERVING_VERSION_TAG, Registry
from torchtfx.components.tf_serving import layout, transition
from torchtfx.components.tf_serving.errors import ServingChangeError
from torchtfx.components.tf_serving.layout import promotion_lock
from torchtfx.components.tf_serving.model_config import CANARY, STABLE, ServedState
from torchtfx.components.tf_serving.transition import Served

__all__ = [
    "JOURNAL_FILE",
    "Entry",
    "PromotionError",
    "Repair",
    "ServingTarget",
    "finish",
    "pending_label_move",
    "reconcile",
    "switch",
]

logger = logging.getLogger(__name__)

# Journal steps: the version folder exists (and may be staged); its aliases may not have moved yet.
STEP_PUSH, STEP_LABELS = "push", "labels"  # labels: the aliases moved, the label move is pending
# What a change journals (only a promotion's own version is marked when undone).
PROMOTION, ROLLBACK, OVERRIDE, SYNC = "promotion", "rollback", "override", "sync"
# What reconcile does with a pending label move that no server confirms: the user confirms it (--finish),
# undo it (rollback, --version), or leave it pending (a pipeline run).
CONFIRM, UNDO, KEEP = "confirm", "undo", "keep"


@dataclasses.dataclass(frozen=True)
class Entry:
    serving_version: int
    step: str
    kind: str = PROMOTION
    registry_version: str | None = None
    aliases_before: dict[str, str | None] = dataclasses.field(default_factory=dict)  # champion, previous


@dataclasses.dataclass(frozen=True)
class Repair:
    message: str
    undone: int | None = None  # the serving version whose pending promotion was undone


def journal_path(target: ServingTarget) -> Path:
    return target.serving_dir / JOURNAL_FILE


def aliases_now(registry: Registry) -> dict[str, str | None]:
    found = {alias: registry.alias_version(alias) for alias in (CHAMPION, PREVIOUS)}
    return {alias: (str(v.version) if v is not None else None) for alias, v in found.items()}


def write_journal(target: ServingTarget, entry: Entry) -> None:
    layout.write_text_atomic(journal_path(target), json.dumps(dataclasses.asdict(entry), sort_keys=True))


def read_journal(target: ServingTarget) -> Entry | None:
    return _read(journal_path(target))


def _read(path: Path) -> Entry | None:
    if not path.is_file():
        return None
    return Entry(**json.loads(path.read_text()))  # a journal from before keeps its two keys; the rest default


def pending_label_move(target: ServingTarget) -> int | None:
    """The serving version whose label move waits for ``promote --finish`` (or a server's confirmation)."""
    return pending_in(target.serving_dir)


def pending_in(serving_dir: Path) -> int | None:
    """:func:`pending_label_move` read without a registry (a run's check at its start; no lock: a hint)."""
    entry = _read(serving_dir / JOURNAL_FILE)
    return entry.serving_version if entry is not None and entry.step == STEP_LABELS else None


def require_no_pending_promotion(
    serving_dir: Path, server_address: str | None, confirm_labels: str, finish: str = "torchtfx promote --finish"
) -> None:
    """Refuse a run at its start when the serving directory's last promotion waits for ``promote --finish``:
    its Promoter would refuse after training and evaluating (minutes). With a server address (it confirms the
    load) or ``immediate`` (the setting confirms it) the Promoter settles the pending move itself. ``finish``:
    the command that confirms it, as the user would type it."""
    if server_address or confirm_labels == IMMEDIATE:
        return
    waiting = pending_in(serving_dir)
    if waiting is None:
        return
    raise PromotionError(
        f"serving version {waiting} in {serving_dir} was promoted by an earlier run, but its stable/canary labels "
        "have not moved: nobody confirmed that TF Serving loaded it, so this run's candidate could not be promoted "
        f"and nothing was started. Either confirm it: check that TF Serving reports version {waiting} AVAILABLE "
        f"and run `{finish}` (or the same with --rollback if it failed to load); or, where no TF Serving reads "
        f"this folder (a local run), rerun with `{SETTING_FLAG} {IMMEDIATE}`, which moves the labels at once "
        "(`make run` does)"
    )


def _registry_target(target: ServingTarget) -> ServedState | None:
    champion = target.registry.serving_version(CHAMPION)
    if champion is None:
        return None
    previous = target.registry.serving_version(PREVIOUS)
    return target_state(target.serving_dir, champion, previous)


def switch(
    target: ServingTarget,
    served: Served,
    desired: ServedState,
    entry: Entry,
    unconfirmed: frozenset[int] = frozenset(),
    move_aliases=None,
) -> str:
    """Stage ``desired`` (raises ServingChangeError, nothing changed), then move the aliases, then the labels
    (or journal the label move when nobody can confirm the load)."""
    awaiting = transition.stage(served, desired, unconfirmed)
    if awaiting and target.labels_at_once:
        logger.warning(
            "Moving the labels onto version(s) %s without a load confirmation (%s %s: no TF Serving reads %s)",
            sorted(awaiting),
            SETTING_FLAG,
            IMMEDIATE,
            target.serving_dir,
        )
        awaiting = frozenset()
    if move_aliases is not None:
        move_aliases()
    stable = desired.labels[STABLE]
    if not awaiting:
        try:
            transition.move_labels(served, desired)
        except ServingChangeError as err:
            awaiting = frozenset({stable})
            logger.warning("%s; the label move stays pending", err)
    if awaiting:
        write_journal(target, dataclasses.replace(entry, serving_version=stable, step=STEP_LABELS))
        return (
            f"labels {STABLE}/{CANARY} move to version {stable} once TF Serving has loaded it: check that it "
            "is AVAILABLE, then run `torchtfx promote --finish` (or give --serving-address)"
        )
    journal_path(target).unlink(missing_ok=True)
    return f"TF Serving: {desired.describe()}"


def reconcile(target: ServingTarget, served: Served | None = None, mode: str = KEEP) -> Repair | None:
    """Repair what a crash left behind and settle a pending label move (see the module's doc); None when
    nothing was pending, or when ``mode`` is KEEP and nobody can confirm the pending move (it stays)."""
    served = served or target.served()
    layout.remove_stale_staging(target.serving_dir)
    entry = read_journal(target)
    if entry is None:
        return None
    version = entry.serving_version
    champion = target.registry.alias_version(CHAMPION)
    if champion is not None and int(champion.tags.get(SERVING_VERSION_TAG, -1)) == version:
        repair = _settle(target, served, entry, champion, mode)
    elif entry.step == STEP_PUSH:
        remove_unserved(target, served, version, entry.registry_version)  # only if this registry agrees
        if entry.registry_version is not None:
            target.registry.tag(entry.registry_version, {"promotion_interrupted": "true"})
        journal_path(target).unlink()
        repair = Repair(f"undid the interrupted promotion of version {version} (its aliases never moved)")
    else:  # the aliases moved elsewhere since (by hand in the registry): the pending move is void
        _unlist(served, version)
        journal_path(target).unlink()
        repair = Repair(f"dropped the pending label move onto version {version}: the champion is another version")
    if repair is not None:
        logger.warning("Promotion repair: %s", repair.message)
    return repair


def _settle(target: ServingTarget, served: Served, entry: Entry, champion, mode: str) -> Repair | None:
    version = entry.serving_version
    if served.server is None and (mode == KEEP or (mode == UNDO and entry.kind != PROMOTION)):
        return None  # stays pending: only a promotion's own new version is undone unconfirmed
    if served.server is None and mode == UNDO:
        return _undo(target, served, entry, "nobody confirmed that TF Serving loaded it", failed=False)
    verify_folder(target, champion)
    unconfirmed = frozenset({version}) if served.server is not None else frozenset()  # CONFIRM: the user's word
    try:
        outcome = switch(target, served, _registry_target(target), entry, unconfirmed)
    except ServingChangeError as err:
        if mode == CONFIRM:
            raise PromotionError(
                f"{err}. The labels stay where they were. `torchtfx promote --rollback` undoes the promotion of "
                f"version {version}; `--finish` retries"
            ) from None
        return _undo(target, served, entry, str(err), failed=True)
    return Repair(f"finished the promotion of version {version} ({outcome})")


def _undo(target: ServingTarget, served: Served, entry: Entry, reason: str, failed: bool) -> Repair:
    """Put the aliases back as the journal recorded them and unlist the version: no label ever pointed at it."""
    registry = target.registry
    for alias, registry_version in entry.aliases_before.items():
        if registry_version is None:
            registry.delete_alias(alias)
        else:
            registry.set_alias(alias, registry_version)
    if entry.kind == PROMOTION and entry.registry_version is not None:
        marks = {"load_failed": "true", "load_failure": reason[:4000]} if failed else {"undone": reason[:4000]}
        registry.tag(entry.registry_version, {ROLLED_BACK_TAG: "true", **marks})
    _unlist(served, entry.serving_version)
    journal_path(target).unlink(missing_ok=True)
    champion = entry.aliases_before.get(CHAMPION)
    return Repair(
        f"undid the promotion of version {entry.serving_version} ({reason}); the champion is "
        f"{f'registry version {champion}' if champion else 'none'} again and no label points at "
        f"version {entry.serving_version}",
        undone=entry.serving_version,
    )


def _unlist(served: Served, version: int) -> None:
    """Drop a version that no label points at from models.config (it may have been staged)."""
    state = transition.current_state(served)
    if state is not None and version in state.versions and version not in state.label_versions():
        transition.restore(served, ServedState(state.versions - {version}, dict(state.labels)))


def _sync(target: ServingTarget) -> str:
    """Nothing pending: make models.config's labels follow the registry (the user vouches for the load)."""
    desired = _registry_target(target)
    if desired is None:
        return "nothing pending, and the registry has no champion"
    served = target.served()
    current = transition.current_state(served)
    if current is not None and all(current.labels.get(k) == v for k, v in desired.labels.items()):
        return "nothing pending: models.config already follows the registry"
    champion = target.registry.alias_version(CHAMPION)
    verify_folder(target, champion)
    entry = Entry(desired.labels[STABLE], STEP_LABELS, SYNC, str(champion.version), aliases_now(target.registry))
    try:
        outcome = switch(target, served, desired, entry)
    except ServingChangeError as err:
        raise PromotionError(f"{err}. The labels stay where they were; `--finish` retries") from None
    return f"models.config follows the registry again: {outcome}"


def finish(target: ServingTarget) -> str:
    """``torchtfx promote --finish``: the user confirms a pending label move (verified when a server address is
    set); with nothing pending, models.config is brought back in line with the registry. A label move staged
    after the call started (by a promotion that held the lock while it waited) is not the one the user checked."""
    require_registry(target, "promote --finish")
    seen = pending_label_move(target)  # before the lock: what the user can have checked
    with promotion_lock(target.serving_dir):
        open_target(target)
        _require_seen(target, seen)
        done = reconcile(target, mode=CONFIRM)
        return done.message if done is not None else _sync(target)


def _require_seen(target: ServingTarget, seen: int | None) -> None:
    """Measured (tests/unit/components/test_faults.py): a `--finish` typed with nothing pending waited on the
    lock of a run's promotion, then moved the labels onto the version it had just staged, unchecked."""
    staged = pending_label_move(target)
    if staged is None or staged == seen or target.server_address:
        return
    raise PromotionError(
        f"serving version {staged} was staged by a promotion that ran after this `promote --finish` started, so it "
        f"cannot confirm that TF Serving loaded it; nothing was changed. Check that TF Serving reports version "
        f"{staged} AVAILABLE and run `torchtfx promote --finish` again (or `--rollback` if it failed to load)"
    )
