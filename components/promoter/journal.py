"""The promotion journal, the switch of what TF Serving serves, and the repair of what a crash left behind.

Every promotion, rollback and manual override changes the served state through :func:`switch` (stage, move the
registry aliases, move the labels or journal the pending label move). :func:`reconcile` (run under the lock by
each of them) finishes a journaled promotion whose aliases moved and undoes one whose aliases did not.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

from torchtfx.components.promoter import serving_transition
from torchtfx.components.promoter.serving_transition import Served, ServingChangeError
from torchtfx.components.shared import serving_layout
from torchtfx.components.shared.mlflow_client import CHAMPION, PREVIOUS, Registry
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


def journal_path(target: ServingTarget) -> Path:
    return target.serving_dir / JOURNAL_FILE


def write_journal(target: ServingTarget, **state) -> None:
    serving_layout.write_text_atomic(journal_path(target), json.dumps(state, sort_keys=True))


def pending_label_move(target: ServingTarget) -> int | None:
    """The serving version whose label move waits for ``promote --finish`` (or the next promotion)."""
    journal = journal_path(target)
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


def switch(target: ServingTarget, served: Served, desired: ServedState, unconfirmed: frozenset[int] = frozenset(),
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
        write_journal(target, serving_version=stable, step=STEP_LABELS)
        return (f"labels {STABLE}/{CANARY} move to version {stable} once TF Serving has loaded it: run "
                "`torchtfx promote --finish` (the next promotion does it too)")  # fmt: skip
    journal_path(target).unlink(missing_ok=True)
    return f"TF Serving: {desired.describe()}"


def _registry_switch(target: ServingTarget, served: Served, unconfirmed: frozenset[int] = frozenset()) -> str:
    desired = _registry_target(target)
    if desired is None:
        return "no champion in the registry"
    try:
        return switch(target, served, desired, unconfirmed)
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
    journal = journal_path(target)
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
