"""A live TF Serving model server, driven through its ModelService gRPC API.

``HandleReloadConfigRequest`` hands the server a new ModelServerConfig (the same one written to models.config,
which a server started with ``--model_config_file`` also polls); ``GetModelStatus`` says which versions are
AVAILABLE. TF Serving refuses a config whose labels point at a version that is not AVAILABLE (ServerCore::
UpdateModelVersionLabelMap), and a reload of an existing model returns before its new versions have loaded,
so a promotion polls the status until the version is up (or the wait runs out).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable

from torchtfx.components.tf_serving.errors import ModelServerError, VersionNotAvailableError

logger = logging.getLogger(__name__)

AVAILABLE = "AVAILABLE"
END = "END"  # unloaded, or a load that failed (its status then carries the error)


@dataclasses.dataclass(frozen=True)
class VersionStatus:
    state: str
    error: str = ""


class ModelServer:
    """One TF Serving instance at ``host:port`` (its gRPC port, 8500 by default)."""

    def __init__(self, address: str, rpc_timeout_s: float = 10.0) -> None:
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc

        self.address = address
        self.rpc_timeout_s = rpc_timeout_s
        self._channel = grpc.insecure_channel(address)
        self._stub = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def _error(self, err, what: str) -> ModelServerError:
        return ModelServerError(
            f"TF Serving at {self.address} did not answer {what} ({err.code().name}: {err.details()}); "
            "check --serving-address (the server's gRPC port) and that the server runs"
        )

    def _call(self, method, request, what: str):
        import grpc

        try:
            return method(request, timeout=self.rpc_timeout_s)
        except grpc.RpcError as err:
            raise self._error(err, what) from None

    def reload(self, config) -> None:
        """Send a ModelServerConfig; raise with the server's own message when it refuses it."""
        from tensorflow_serving.apis import model_management_pb2

        request = model_management_pb2.ReloadConfigRequest(config=config)
        response = self._call(self._stub.HandleReloadConfigRequest, request, "HandleReloadConfigRequest")
        if response.status.error_code != 0:
            raise ModelServerError(
                f"TF Serving at {self.address} refused the config: {response.status.error_message} "
                f"(error code {response.status.error_code})"
            )

    def statuses(self, model_name: str) -> dict[int, VersionStatus]:
        """Every version the server knows of ``model_name``; empty when it knows none yet."""
        import grpc
        from tensorflow_serving.apis import get_model_status_pb2, model_pb2

        request = get_model_status_pb2.GetModelStatusRequest(model_spec=model_pb2.ModelSpec(name=model_name))
        try:
            response = self._stub.GetModelStatus(request, timeout=self.rpc_timeout_s)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:  # the model has no version the server has seen
                return {}
            raise self._error(err, "GetModelStatus") from None
        states = get_model_status_pb2.ModelVersionStatus.State
        return {
            status.version: VersionStatus(states.Name(status.state), status.status.error_message)
            for status in response.model_version_status
        }

    def wait_available(self, model_name: str, versions: Iterable[int], timeout_s: float, poll_s: float = 1.0) -> None:
        """Return once every version is AVAILABLE; raise when one fails to load or the wait runs out."""
        waiting = sorted(set(versions))
        deadline = time.monotonic() + timeout_s
        while True:
            statuses = self.statuses(model_name)
            failed = {v: statuses[v] for v in waiting if v in statuses and statuses[v].state == END}
            if failed:
                details = "; ".join(f"version {v}: {s.error or 'unloaded'}" for v, s in failed.items())
                raise VersionNotAvailableError(f"TF Serving at {self.address} could not load {model_name} {details}")
            pending = [v for v in waiting if statuses.get(v, VersionStatus("UNKNOWN")).state != AVAILABLE]
            if not pending:
                return
            if time.monotonic() >= deadline:
                seen = ", ".join(f"{v}: {statuses[v].state if v in statuses else 'not seen'}" for v in pending)
                raise VersionNotAvailableError(
                    f"{model_name} version(s) {pending} did not become AVAILABLE on TF Serving at {self.address} "
                    f"within {timeout_s:g} s ({seen})"
                )
            logger.info("Waiting for TF Serving to load %s version(s) %s", model_name, pending)
            time.sleep(poll_s)
