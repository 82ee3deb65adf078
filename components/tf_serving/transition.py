"""Change what TF Serving serves in the two phases a live server accepts.

TF Serving refuses a config whose labels point at a version that is not yet AVAILABLE, and
``--allow_version_labels_for_unavailable_models`` never lets an existing label move onto one (so that a label's
traffic never goes to a version still loading). Every change of the served state therefore goes:

(a) **stage**: list every version the target needs in ``specific.versions``, labels unchanged;
(b) **move labels**: once those versions are AVAILABLE, write the target (labels moved, versions no label or
    rollback needs any more dropped).

With a server address, (a) is sent with HandleReloadConfigRequest and the versions are awaited with
GetModelStatus (bounded), then (b) is sent. Without one, nobody can confirm the load: (a) is written and the
label move stays pending (the caller journals it) until the user confirms the load (``torchtfx promote
--finish``) or a command with a server address does. What to serve (the versions, where stable and canary
point) is the caller's decision (the Promoter's ``target.target_state``); ``canary`` is never read off the disk.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from torchtfx.components.tf_serving import batching, model_config
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.errors import ModelServerError, ServingChangeError
from torchtfx.components.tf_serving.model_config import OWN_LABELS, ServedState
from torchtfx.components.tf_serving.model_server import ModelServer

logger = logging.getLogger(__name__)

DEFAULT_LOAD_TIMEOUT_S = 600.0  # a large SavedModel on a network volume; TF Serving loads with warmup replay


@dataclasses.dataclass(frozen=True)
class Served:
    """Where and how the served state is changed: the folder TF Serving reads, and the server if known."""

    serving_dir: Path
    model_name: str
    batching: BatchingParams
    server: ModelServer | None = None
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S


def current_state(served: Served) -> ServedState | None:
    return model_config.read_state(served.serving_dir, served.model_name)


def with_hand_edits(served: Served, target: ServedState, before: ServedState | None) -> ServedState:
    """``target`` plus what an operator set by hand in models.config: labels other than stable/canary (and the
    versions they point at) and versions pinned in ``specific.versions``."""
    if before is None:
        return target
    others = {label: v for label, v in before.labels.items() if label not in OWN_LABELS}
    pinned = model_config.pinned_by_hand(served.serving_dir, served.model_name, before)
    return ServedState(target.versions | pinned | frozenset(others.values()), {**others, **target.labels})


def _write(served: Served, state: ServedState | None) -> None:
    model_config.write_models_config(served.serving_dir, served.model_name, state)
    batching.write_batching(served.serving_dir, served.batching)


def _send(served: Served) -> None:
    """Hand the server the whole file as written: every model in it, not only this one (a reload replaces the
    server's model list)."""
    config = model_config.read_models_config(served.serving_dir)
    if served.server is not None and config is not None:
        served.server.reload(config)


def stage(served: Served, target: ServedState, unconfirmed: frozenset[int] = frozenset()) -> frozenset[int]:
    """Phase (a). Returns the label versions nobody has confirmed as loaded: empty when the server said they
    are AVAILABLE or they were already served; without a server, those not in the config before, plus
    ``unconfirmed`` (versions staged by an earlier call that nobody has confirmed since)."""
    before = current_state(served)
    listed = before.versions if before else frozenset()
    awaiting = target.label_versions() - (listed - unconfirmed)
    if not awaiting:
        return frozenset()
    staged = ServedState(listed | target.versions, dict(before.labels) if before else {})
    _write(served, staged)
    if served.server is None:
        logger.warning(
            "Serving version(s) %s staged in models.config; labels move once TF Serving has them", sorted(awaiting)
        )
        return awaiting
    try:
        _send(served)
        served.server.wait_available(served.model_name, awaiting, served.load_timeout_s)
    except ModelServerError as err:
        restore(served, before)
        raise ServingChangeError(f"{err}. The serving config is back to {_describe(before)}") from None
    return frozenset()


def move_labels(served: Served, target: ServedState) -> None:
    """Phase (b): only after :func:`stage` returned nothing awaiting (or the operator finished it)."""
    before = current_state(served)
    final = with_hand_edits(served, target, before)
    _write(served, final)
    try:
        _send(served)
    except ModelServerError as err:
        restore(served, before)
        raise ServingChangeError(f"{err}. The serving config is back to {_describe(before)}") from None
    logger.info("Serving %s: %s", served.model_name, final.describe())


def restore(served: Served, state: ServedState | None) -> None:
    """Put back a state the server accepted before (its labels are on versions it has loaded)."""
    _write(served, state)
    if state is not None and served.server is not None:
        try:
            _send(served)
        except ModelServerError as err:  # the file is right; the server's own poll picks it up
            logger.warning("Could not send the restored config to TF Serving: %s", err)


def _describe(state: ServedState | None) -> str:
    return "no models.config (nothing was served)" if state is None else state.describe()
