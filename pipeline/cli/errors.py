"""What the command line treats as the user's mistake (a message, no traceback) and its exit codes.

Its own module, so that every command group imports it and none imports another group."""

from __future__ import annotations

from torchtfx.components.promoter.promotion import PromotionError
from torchtfx.components.shared.mlflow_client import TrackingUnavailableError
from torchtfx.components.shared.serving_config import ServingConfigError
from torchtfx.data.config.strict import ConfigError
from torchtfx.data.sources import DataSourceError

# Errors whose message already tells the user what is wrong and what to do: no traceback. Every config
# family's error is a ConfigError (dataset, gates, hyperparameters, batching, Kubeflow, PyTorchJob, local).
USER_ERRORS = (
    ConfigError,
    DataSourceError,
    PromotionError,
    ServingConfigError,
    TrackingUnavailableError,
    LookupError,
)
# Exit code of `torchtfx run` when the candidate was evaluated and rejected by a gate.
REJECTED_EXIT_CODE = 3
