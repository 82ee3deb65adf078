"""Which registry owns a serving directory: the binding that stops one registry from changing what another
registry's promotions serve.

A serving directory holds integer version folders; a registry holds versions tagged with those integers. Nothing
in the integers says which registry wrote them, so a command run with another registry (another
``MLFLOW_TRACKING_URI``, another ``--pipeline-root``, a second pipeline root sharing ``--serving-dir``, a laptop run
against the team's registry) would read the wrong champion, undo "interrupted" promotions it never made, or move
production's aliases. The binding is recorded on both sides:

- the serving directory's ``.torchtfx-registry.json``: the registry URI (never a credential: user:password,
  query and fragment are stripped), the registered model's name, and a random binding id;
- the registered model's tags: the same binding id and the serving directory's path.

:func:`check` (read-only: ChampionModel) and :func:`bind` (under the promotion lock: the Promoter and every
``torchtfx promote``) refuse, before anything changes, a registry that is not the directory's, with both sides
named. The id, not the URI, decides: the same registry reached through another address (a port-forward, a
Service name) is still the same registry. The directory's file is written first and marked confirmed once the
registry carries the id, so a crash between the two is completed by the next command, not refused.

A directory from before bindings (versions, no file) is adopted by the registry whose champion it serves:
its ``serving_version`` folder is here and holds the registered fingerprint.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from pathlib import Path

from torchtfx.components.shared.contracts import MODEL_FINGERPRINT_TAG
from torchtfx.components.shared.mlflow_client import CHAMPION, SERVING_VERSION_TAG, Registry, identity_uri
from torchtfx.components.tf_serving import fingerprint
from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.components.tf_serving.layout import versions, write_text_atomic

logger = logging.getLogger(__name__)

IDENTITY_FILE = ".torchtfx-registry.json"
BINDING_TAG = "torchtfx.serving_binding"  # on the registered model: the binding id of its serving directory
SERVING_DIR_TAG = "torchtfx.serving_dir"  # on the registered model: that directory's path, for messages


class ServingBindingError(ServingConfigError):
    """The serving directory belongs to another registry (or registered model) than the command's."""


@dataclasses.dataclass(frozen=True)
class Identity:
    registry_uri: str
    registered_model: str
    binding: str
    confirmed: bool = False  # the registry carries the binding id too

    def describe(self) -> str:
        return f"registry {self.registry_uri}, model {self.registered_model}"


def _here(registry: Registry) -> str:
    return f"registry {identity_uri(registry.tracking_uri)}, model {registry.model_name}"


def read_identity(serving_dir: Path) -> Identity | None:
    path = serving_dir / IDENTITY_FILE
    if not path.is_file():
        return None
    try:
        return Identity(**json.loads(path.read_text()))
    except (ValueError, TypeError) as err:
        raise ServingBindingError(
            f"{path} is not a torchtfx serving identity ({err}); nothing was changed. Put back the file from a "
            "backup of the serving directory: it names the registry that owns the directory"
        ) from None


def _write(serving_dir: Path, identity: Identity) -> None:
    write_text_atomic(serving_dir / IDENTITY_FILE, json.dumps(dataclasses.asdict(identity), indent=1) + "\n")


def _mismatch(serving_dir: Path, owner: str, registry: Registry, registry_side: str) -> ServingBindingError:
    return ServingBindingError(
        f"the serving directory {serving_dir} belongs to {owner}; this command uses {_here(registry)}, "
        f"{registry_side}. Nothing was changed. Use the registry that owns the directory (MLFLOW_TRACKING_URI, "
        "or the --pipeline-root whose runs created it), or give this registry its own --serving-dir"
    )


def _registry_side(tags: dict[str, str]) -> str:
    if BINDING_TAG not in tags:
        return "which serves no serving directory yet"
    return f"which serves {tags.get(SERVING_DIR_TAG, 'another serving directory')} (binding {tags[BINDING_TAG]})"


def _vouches(serving_dir: Path, registry: Registry) -> bool:
    """Does the registry's champion live here, in a folder that holds its registered fingerprint?"""
    champion = registry.alias_version(CHAMPION)
    folder = serving_dir / (champion.tags.get(SERVING_VERSION_TAG, "") if champion is not None else "")
    if champion is None or not (folder / "saved_model.pb").is_file() or folder == serving_dir:
        return False
    recorded = champion.tags.get(MODEL_FINGERPRINT_TAG)
    if recorded is None:
        logger.warning(
            "Registry version %s records no fingerprint (promoted before fingerprints); adopting %s on "
            "the strength of its serving version alone",
            champion.version,
            serving_dir,
        )
        return True
    return fingerprint.saved_model_fingerprint(folder) == recorded


def check(serving_dir: Path, registry: Registry) -> Identity | None:
    """Raise :class:`ServingBindingError` unless ``registry`` may use ``serving_dir``; reads only. Returns the
    directory's identity (None for a directory not bound yet)."""
    identity = read_identity(serving_dir)
    tags = registry.model_tags()
    if identity is not None:
        owned = identity.registered_model == registry.model_name and (
            tags.get(BINDING_TAG) == identity.binding or (BINDING_TAG not in tags and not identity.confirmed)
        )
        if not owned:
            owner = f"{identity.describe()} (binding {identity.binding})"
            raise _mismatch(serving_dir, owner, registry, _registry_side(tags))
        return identity
    if BINDING_TAG in tags:
        raise ServingBindingError(
            f"{_here(registry)} serves the serving directory {tags.get(SERVING_DIR_TAG, '(path not recorded)')} "
            f"(binding {tags[BINDING_TAG]}), not {serving_dir}. Nothing was changed. Give that directory "
            "(--serving-dir), or give this serving directory its own registry (MLFLOW_TRACKING_URI, --pipeline-root)"
        )
    on_disk = versions(serving_dir)
    if on_disk and not _vouches(serving_dir, registry):
        raise ServingBindingError(
            f"the serving directory {serving_dir} holds serving versions {on_disk} that {_here(registry)} did not "
            "promote (its champion is not served from there with its registered fingerprint). Nothing was changed. "
            "Use the registry that created them (MLFLOW_TRACKING_URI, or the --pipeline-root whose runs wrote "
            "them), or give this registry its own --serving-dir"
        )
    return None


def check_absent_registry(serving_dir: Path, registry: Registry, store: Path) -> None:
    """For a registry whose local ``store`` does not exist (reads only; MLflow would create it): raise
    :class:`ServingBindingError`, naming both sides, when ``serving_dir`` belongs to a registry."""
    identity = read_identity(serving_dir)
    if identity is not None:
        owner = f"{identity.describe()} (binding {identity.binding})"
        raise _mismatch(serving_dir, owner, registry, f"which does not exist ({store} is missing)")


def bind(serving_dir: Path, registry: Registry) -> Identity:
    """:func:`check`, then record whatever half of the binding is missing. Call under the promotion lock."""
    identity = check(serving_dir, registry)
    if identity is None:
        identity = Identity(identity_uri(registry.tracking_uri), registry.model_name, uuid.uuid4().hex[:16])
        _write(serving_dir, identity)  # first: a crash before the registry's tag is completed, not refused
        logger.info("Serving directory %s is now bound to %s", serving_dir, identity.describe())
    if not identity.confirmed:
        registry.set_model_tags({BINDING_TAG: identity.binding, SERVING_DIR_TAG: str(serving_dir)})
        identity = dataclasses.replace(identity, confirmed=True)
        _write(serving_dir, identity)
    return identity
