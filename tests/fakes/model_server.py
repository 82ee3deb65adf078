"""A TF Serving ModelService for the tests: a real gRPC server on localhost that implements
``HandleReloadConfigRequest`` and ``GetModelStatus`` with TF Serving's documented rules.

TEST DOUBLE: no tensorflow_model_server binary can run on these machines. The rules are those of
tensorflow/serving's ServerCore (model_servers/server_core.cc, 2.16):
- only a ``model_config_list`` config is accepted, each model on platform ``tensorflow``;
- ``UpdateModelVersionLabelMap`` runs *before* the new versions are handed to the loader, and refuses a
  label on a version that is not AVAILABLE with FAILED_PRECONDITION "Request to assign label to version
  V of model M, which is not currently available for inference"; with
  ``--allow_version_labels_for_unavailable_models`` only a *new* label may point at such a version, never
  an existing label moved; a refused config changes nothing that is served;
- versions of ``model_version_policy.specific`` are loaded (START -> LOADING -> AVAILABLE, or END with an
  error when ``<base_path>/<version>/saved_model.pb`` is missing or is not a SavedModel); versions no longer
  listed are unloaded (END, status OK); a reload returns without waiting for the new versions;
- ``GetModelStatus`` answers NOT_FOUND for a model with no version seen.
Deviation: the real server also waits for a brand-new model's first version before it answers the reload;
this one answers at once, so the promoter's own wait (GetModelStatus) is what the tests exercise.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
)
from tensorflow_serving.config import model_server_config_pb2

State = get_model_status_pb2.ModelVersionStatus.State
FAILED_PRECONDITION, INVALID_ARGUMENT, NOT_FOUND = 9, 3, 5  # tensorflow error codes


class FakeModelServer(model_service_pb2_grpc.ModelServiceServicer):
    """``load_seconds``: how long a version takes to load; ``never_load``: versions that stay LOADING."""

    def __init__(
        self, load_seconds: float = 0.2, never_load: set[int] | None = None, allow_labels_for_unavailable: bool = False
    ) -> None:
        self.load_seconds = load_seconds
        self.never_load = set(never_load or ())
        self.allow_labels_for_unavailable = allow_labels_for_unavailable
        self.lock = threading.Lock()
        self.states: dict[str, dict[int, tuple[int, str]]] = {}  # model -> version -> (state, error)
        self.labels: dict[str, dict[str, int]] = {}
        self.history: list[tuple[str, str]] = []  # (config as one line, "OK" or the refusal)
        self.label_moves: list[tuple[str, int, int]] = []  # (label, version, state of the version when moved)
        self._server = None
        self.address = ""

    # -- gRPC ------------------------------------------------------------------------------------
    def start(self) -> FakeModelServer:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.address = f"127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)

    def HandleReloadConfigRequest(self, request, context):
        code, message = self.reload(request.config)
        response = model_management_pb2.ReloadConfigResponse()
        response.status.error_code = code
        response.status.error_message = message
        return response

    def GetModelStatus(self, request, context):
        name = request.model_spec.name
        with self.lock:
            versions = dict(self.states.get(name, {}))
        if request.model_spec.HasField("version"):
            wanted = request.model_spec.version.value
            versions = {v: s for v, s in versions.items() if v == wanted}
        if not versions:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {name}")
        response = get_model_status_pb2.GetModelStatusResponse()
        for version, (state, error) in sorted(versions.items()):
            status = response.model_version_status.add(version=version, state=state)
            if error:
                status.status.error_code, status.status.error_message = 2, error
        return response

    # -- ServerCore::ReloadConfig ----------------------------------------------------------------
    def reload(self, config: model_server_config_pb2.ModelServerConfig) -> tuple[int, str]:
        with self.lock:
            code, message = self._validate(config) or self._update_labels(config) or (0, "")
            self.history.append((text_format.MessageToString(config, as_one_line=True), message or "OK"))
            if code == 0:
                for model in config.model_config_list.config:
                    self._aspire(model)
        return code, message

    def reload_file(self, path: Path) -> tuple[int, str]:
        """What a server started with --model_config_file does when its poll sees the file."""
        config = model_server_config_pb2.ModelServerConfig()
        text_format.Parse(path.read_text(), config)
        return self.reload(config)

    def _validate(self, config) -> tuple[int, str] | None:
        if config.WhichOneof("config") != "model_config_list":
            return INVALID_ARGUMENT, "It is only legal to transition from one ModelConfigList to another."
        for model in config.model_config_list.config:
            if model.model_platform != "tensorflow":
                return INVALID_ARGUMENT, f"Model {model.name} requests unsupported platform {model.model_platform}"
        return None

    def _update_labels(self, config) -> tuple[int, str] | None:
        new_map: dict[str, dict[str, int]] = {}
        for model in config.model_config_list.config:
            states = self.states.get(model.name, {})
            for label, version in model.version_labels.items():
                existing = self.labels.get(model.name, {}).get(label)
                allowed = self.allow_labels_for_unavailable and existing in (None, version)
                if not allowed and states.get(version, (State.UNKNOWN, ""))[0] != State.AVAILABLE:
                    return FAILED_PRECONDITION, (
                        f"Request to assign label to version {version} of model {model.name}, "
                        "which is not currently available for inference"
                    )
                new_map.setdefault(model.name, {})[label] = version
        for name, labels in new_map.items():
            for label, version in sorted(labels.items()):
                if self.labels.get(name, {}).get(label) != version:
                    self.label_moves.append((label, version, self.states[name].get(version, (0, ""))[0]))
        self.labels = new_map
        return None

    def _aspire(self, model) -> None:
        states = self.states.setdefault(model.name, {})
        wanted = set(model.model_version_policy.specific.versions)
        for version in list(states):
            if version not in wanted and states[version][0] != State.END:
                states[version] = (State.END, "")  # unloaded
        for version in wanted:
            if version not in states or states[version][0] == State.END:
                states[version] = (State.LOADING, "")
                threading.Thread(
                    target=self._load, args=(model.name, Path(model.base_path), version), daemon=True
                ).start()

    def _load(self, name: str, base_path: Path, version: int) -> None:
        time.sleep(self.load_seconds)
        if version in self.never_load:
            return  # stays LOADING, as a server stuck on a slow volume or a hung load would
        result = (State.AVAILABLE, "")
        path = base_path / str(version) / "saved_model.pb"
        try:
            saved_model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
            if not saved_model.meta_graphs:
                result = (State.END, f"{path} holds no MetaGraph")
        except (OSError, DecodeError) as err:
            result = (State.END, f"Failed to load servable {name} version {version}: {err}")
        with self.lock:
            if self.states.get(name, {}).get(version, (None,))[0] == State.LOADING:
                self.states[name][version] = result
