"""Change what TF Serving serves in the two phases a live server accepts.

TF Serving refuses a config whose labels point at a version that is not yet AVAILABLE, and
``--allow_version_labels_for_unavailable_models`` never lets an existing label move onto one (so that a label's
traffic never goes to a version still loading). Every change of the served state therefore goes:

(a) **stage**: list every version the target needs in ``specific.versions``, labels unchanged;
(b) **move labels**: once those versions are AVAILABLE, write the target (labels moved, versions no label or
    rollback needs any more dropped).

With a server address, (a) is sent with HandleReloadConfigRequest and the versions are awaited with
GetModelStatus (bounded), then (b) is sent. Without one, nobody can confirm the load: (a) is written and the
label move stays pending (the caller journals it) until ``torchtfx promote --finish`` or the next promotion,
by when a server polling the file has loaded the version.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from torchtfx.components.shared import serving_config
from torchtfx.components.shared.model_server import ModelServer, ModelServerError
from torchtfx.components.shared.serving_config import CANARY, STABLE, ServedState
from torchtfx.components.shared.serving_layout import BatchingParams, versions

logger = logging.getLogger(__name__)

DEFAULT_LOAD_TIMEOUT_S = 600.0  # a large SavedModel on a network volume; TF Serving loads with warmup replay


class ServingChangeError(RuntimeError):
    """The server refused a config or did not load a version; what it served before is restored."""


@dataclasses.dataclass(frozen=True)
class Served:
    """Where and how the served state is changed: the folder TF Serving reads, and the server if known."""

    serving_dir: Path
    model_name: str
    batching: BatchingParams
    server: ModelServer | None = None
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S


def target_state(serving_dir: Path, champion: int, previous: int | None) -> ServedState:
    """stable -> the champion; canary -> the newest version on disk; the previous champion stays loaded so
    that a rollback moves a label onto a version that is already AVAILABLE."""
    on_disk = versions(serving_dir)
    if champion not in on_disk:
        raise FileNotFoundError(f"champion version {champion} is missing from {serving_dir}")
    canary = max(on_disk)
    loaded = {champion, canary} | ({previous} if previous in on_disk else set())
    return ServedState(frozenset(loaded), {STABLE: champion, CANARY: canary})


def current_state(served: Served) -> ServedState | None:
    return serving_config.read_state(served.serving_dir, served.model_name)


def _write(served: Served, state: ServedState | None) -> None:
    if state is None:
        (served.serving_dir / serving_config.MODELS_CONFIG).unlink(missing_ok=True)
    else:
        serving_config.write_models_config(served.serving_dir, served.model_name, state)
    serving_config.write_batching(served.serving_dir, served.batching)


def _send(served: Served, state: ServedState) -> None:
    if served.server is not None:
        served.server.reload(serving_config.to_proto(served.model_name, served.serving_dir, state))


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
        logger.warning("Serving version(s) %s staged in models.config; labels move once TF Serving has them",
                       sorted(awaiting))  # fmt: skip
        return awaiting
    try:
        _send(served, staged)
        served.server.wait_available(served.model_name, awaiting, served.load_timeout_s)
    except ModelServerError as err:
        restore(served, before)
        raise ServingChangeError(f"{err}. The serving config is back to {_describe(before)}") from None
    return frozenset()


def move_labels(served: Served, target: ServedState) -> None:
    """Phase (b): only after :func:`stage` returned nothing awaiting (or the operator finished it)."""
    before = current_state(served)
    _write(served, target)
    try:
        _send(served, target)
    except ModelServerError as err:
        restore(served, before)
        raise ServingChangeError(f"{err}. The serving config is back to {_describe(before)}") from None
    logger.info("Serving %s: %s", served.model_name, target.describe())


def restore(served: Served, state: ServedState | None) -> None:
    """Put back a state the server accepted before (its labels are on versions it has loaded)."""
    _write(served, state)
    if state is not None and served.server is not None:
        try:
            _send(served, state)
        except ModelServerError as err:  # the file is right; the server's own poll picks it up
            logger.warning("Could not send the restored config to TF Serving: %s", err)


def _describe(state: ServedState | None) -> str:
    return "no models.config (nothing was served)" if state is None else state.describe()
