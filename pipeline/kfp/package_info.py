"""What ``torchtfx compile`` records in the package for ``torchtfx submit``: the KFP backend it was compiled for
(``kfp_backend``) and, for a per-namespace root, the root with ``{namespace}`` in it.

It is kept in ``pipelineInfo.description``: a field every supported backend's PipelineSpec has
(api/v2alpha1/pipeline_spec.proto:628@2.1.0, :671@2.15.0, :675@2.17.0), so the API server's strict
``protojson.Unmarshal`` of the spec (backend/src/apiserver/template/template.go:113@2.15.0) accepts it, and the
kfp client (2.5.0) parses it into ``PipelineSpec`` and sends it with the run. A new top-level key would be
refused by both. TFX writes no description of its own."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

PREFIX = "torchtfx "
_BACKEND = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?")


@dataclasses.dataclass(frozen=True)
class PackageInfo:
    kfp_backend: str | None = None
    root_template: str | None = None

    @property
    def backend_version(self) -> tuple[int, int] | None:
        return version_of(self.kfp_backend)


def version_of(text: str | None) -> tuple[int, int] | None:
    """``"2.15"``, ``"2.15.0"`` or ``"v2.15.1"`` -> (2, 15); None for anything else (e.g. ``"unknown"``)."""
    match = _BACKEND.match((text or "").strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def describe(kfp_backend: str, root_template: str | None = None) -> str:
    """The description ``compile`` writes: human-readable and parsed back by ``recorded``."""
    record: dict[str, str] = {"kfp_backend": kfp_backend}
    if root_template:
        record["pipeline_root"] = root_template
    return PREFIX + json.dumps(record, sort_keys=True)


def recorded(spec: dict[str, Any]) -> PackageInfo:
    """What the package records; an empty PackageInfo for a package compiled before this record existed."""
    description = str(spec.get("pipelineInfo", {}).get("description") or "")
    if not description.startswith(PREFIX):
        return PackageInfo()
    try:
        record = json.loads(description[len(PREFIX) :])
    except ValueError:
        return PackageInfo()
    if not isinstance(record, dict):
        return PackageInfo()
    return PackageInfo(record.get("kfp_backend"), record.get("pipeline_root"))
