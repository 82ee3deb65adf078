"""Find the current champion: the registry's ``champion`` alias, else the serving directory; only in a serving
directory that belongs to that registry (``components.shared.serving_identity``) and whose models.config parses."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from torchtfx.components.shared import serving_identity
from torchtfx.components.shared.mlflow_client import CHAMPION, Registry
from torchtfx.components.shared.served_interface import SERVING_SIGNATURE
from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.tf_serving import layout, model_config


class ChampionError(StageFailure):
    """The champion named by the registry or serving config cannot be used as a baseline."""


@dataclasses.dataclass(frozen=True)
class Champion:
    saved_model_dir: Path
    serving_version: int
    registry_version: str | None
    source: str  # "registry" or "serving_dir"


def checked_version(
    serving_dir: Path, version: int, registry_version: str | None, source: str, what: str = "the champion"
) -> Champion:
    """Serving version ``version`` of ``serving_dir``, if it holds a readable SavedModel with ``serving_default``
    (``what`` names it in the errors: the champion, or a version a command was given)."""
    path = serving_dir / str(version)
    fix = "restore it or run `torchtfx promote --version N --reason ...` to name another champion"
    if not (path / "saved_model.pb").is_file():
        raise ChampionError(
            f"{what} (serving version {version}, from the {source}) has no saved_model.pb at {path}; {fix}"
        )
    problem = _unreadable(path)
    if problem:
        raise ChampionError(
            f"{what} (serving version {version}, from the {source}) at {path} is unreadable ({problem}); "
            f"nothing was evaluated or promoted. {fix}"
        )
    return Champion(path, version, registry_version, source)


def _unreadable(path: Path) -> str | None:
    """Why the SavedModel cannot serve as a baseline (corrupt proto, no serving signature), else None."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    try:
        with warnings.catch_warnings():  # some protobuf backends only warn on garbage
            warnings.simplefilter("ignore", RuntimeWarning)
            saved_model.ParseFromString((path / "saved_model.pb").read_bytes())
    except DecodeError as err:
        return f"saved_model.pb is not a SavedModel: {err}"
    if not saved_model.meta_graphs:
        return "saved_model.pb is not a SavedModel (corrupt or truncated)"
    signatures = {k for graph in saved_model.meta_graphs for k in graph.signature_def}
    if SERVING_SIGNATURE not in signatures:
        return f"no {SERVING_SIGNATURE} signature (found {sorted(signatures) or 'none'})"
    if not (path / "variables").is_dir():
        return "the variables/ folder is missing"
    return None


def resolve_champion(serving_dir: Path, registry: Registry | None) -> Champion | None:
    """None on a first run (no champion anywhere). Raises ServingBindingError when the serving directory is
    another registry's, ServingConfigError when its models.config does not parse."""
    model_config.read_models_config(serving_dir)
    if registry is not None:
        serving_identity.check(serving_dir, registry)
        version = registry.alias_version(CHAMPION)
        # serving_version looks the alias up again: None only if it was removed in between.
        serving = registry.serving_version(CHAMPION) if version is not None else None
        if version is not None and serving is not None:
            return checked_version(serving_dir, serving, str(version.version), "registry")
    stable = model_config.read_stable_version(serving_dir)
    if stable is not None:
        return checked_version(serving_dir, stable, None, "serving_dir")
    on_disk = layout.versions(serving_dir)
    if on_disk:
        return checked_version(serving_dir, on_disk[-1], None, "serving_dir")
    return None
