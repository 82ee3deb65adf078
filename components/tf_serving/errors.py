"""The errors of the TF Serving package: a file that cannot be used, a server that refused or could not be reached,
a change that was undone. The batching settings' own error is a config error (``batching.BatchingConfigError``)."""

from __future__ import annotations

from torchtfx.components.stage_failure import StageFailure


class ServingConfigError(ValueError):
    """A serving directory cannot be used: its models.config does not parse, or it belongs to another registry
    (``components.shared.serving_identity.ServingBindingError``). The message says the way out."""


class ModelServerError(StageFailure):
    """The model server refused a request or could not be reached."""


class VersionNotAvailableError(ModelServerError):
    """A version did not become AVAILABLE within the wait."""


class ServingChangeError(StageFailure):
    """The server refused a config or did not load a version; what it served before is restored."""
