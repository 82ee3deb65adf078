"""A fake Kubernetes API server with a fake Kubeflow Trainer v2 controller behind it, for the TrainJob path.

Served (as the real API server and controllers answer): discovery of trainer.kubeflow.org/v1alpha1 and
kubeflow.org/v1 (GET /apis/<group>/<version>, an APIResourceList), the TrainJob schema (GET /openapi/v3/apis/
trainer.kubeflow.org/v1alpha1) with the pod-override field of the chosen Trainer release line, trainjobs
create/get/delete, and the TrainJob's pods (list by label, log). The controller starts one REAL local process per
node with the container command of ``spec.trainer`` and the environment the torch-distributed runtime gives it
(kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go:135-158@v2.1.0): PET_NNODES = numNodes,
PET_NPROC_PER_NODE = numProcPerNode, PET_NODE_RANK = the node's index, PET_MASTER_ADDR and PET_MASTER_PORT (the real
ones are ``<name>-node-0-0.<name>`` and 29500; here 127.0.0.1 and a free port, as no pod DNS exists). Conditions
and counts follow the JobSet's (Complete/Failed, reasons AllJobsCompleted/FailedJobs: jobset
pkg/constants/constants.go:47-52@v0.10.1) and pods carry JobSet's labels.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

TRAINER_GROUP, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"
RESERVED_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
_JOB = re.compile(r"/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs(?:/([^/]+))?")
_PODS = re.compile(r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)/log)?")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(code: int, message: str) -> tuple[int, dict]:
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}


def resource_list(group_version: str, plurals: list[str]) -> dict:
    resources = [
        {"name": p, "singularName": "", "namespaced": True, "kind": p.title(), "verbs": ["create", "get"]}
        for p in plurals
    ]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def trainjob_openapi(override_field: str) -> dict:
    """The OpenAPI v3 document of trainer.kubeflow.org/v1alpha1 as a CRD publishes it, cut to the TrainJob."""
    spec_fields = ["runtimeRef", "initializer", "trainer", "suspend", "managedBy", override_field]
    if override_field == "runtimePatches":
        spec_fields.append("activeDeadlineSeconds")
    schema = {
        "type": "object",
        "x-kubernetes-group-version-kind": [{"group": TRAINER_GROUP, "kind": "TrainJob", "version": TRAINER_VERSION}],
        "properties": {"spec": {"type": "object", "properties": {f: {"type": "object"} for f in spec_fields}}},
    }
    return {"openapi": "3.0.0", "components": {"schemas": {"org.kubeflow.trainer.v1alpha1.TrainJob": schema}}}


class LocalTrainer:
    """The API server and the Trainer v2 controller: each TrainJob node is a local process."""

    def __init__(self, log_dir: Path, served: tuple[str, ...] = ("trainjobs",), shape: str = "runtimePatches"):
        self.log_dir, self.served, self.shape = log_dir, served, shape
        self.jobs: dict[str, dict] = {}
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self.requests: list[tuple[str, str]] = []

    def handle(self, method: str, url: str, body: bytes, headers: dict) -> tuple[int, str | dict]:
        parsed = urllib.parse.urlsplit(url)
        path, query = parsed.path, dict(urllib.parse.parse_qsl(parsed.query))
        self.requests.append((method, path))
        if path == f"/apis/{TRAINER_GROUP}/{TRAINER_VERSION}":
            if "trainjobs" not in self.served:
                return _status(404, "the server could not find the requested resource")
            return 200, resource_list(f"{TRAINER_GROUP}/{TRAINER_VERSION}", ["trainjobs", "trainjobs/status"])
        if path == "/apis/kubeflow.org/v1":  # Kubeflow's Notebook/Profile CRDs serve this group without PyTorchJob
            return 200, resource_list(
                "kubeflow.org/v1", ["notebooks", "profiles", *(["pytorchjobs"] if "pytorchjobs" in self.served else [])]
            )
        if path == f"/openapi/v3/apis/{TRAINER_GROUP}/{TRAINER_VERSION}" and "trainjobs" in self.served:
            return 200, trainjob_openapi(self.shape)
        job, pods = _JOB.fullmatch(path), _PODS.fullmatch(path)
        if job:
            return self._job(method, job.group(2), body)
        if pods and pods.group(2):
            return self._log(pods.group(2), int(query.get("tailLines", "40")))
        if pods:
            return 200, {"kind": "PodList", "apiVersion": "v1", "items": self._pods(query.get("labelSelector", ""))}
        return _status(404, f"no route {method} {path}")

    def _job(self, method: str, name: str | None, body: bytes) -> tuple[int, dict]:
        if method == "POST":
            return self._create(json.loads(body))
        if name not in self.jobs:
            return _status(404, f'trainjobs.trainer.kubeflow.org "{name}" not found')
        if method == "GET":
            return 200, {**self.jobs[name], "status": self._job_status(name)}
        if method == "DELETE":
            self.stop(name)
            del self.jobs[name]
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return _status(405, method)

    def _create(self, manifest: dict) -> tuple[int, dict]:
        """The webhook's checks that matter here, then the controller's start of the nodes."""
        spec, name = manifest["spec"], manifest["metadata"]["name"]
        reserved = sorted(e["name"] for e in spec["trainer"].get("env", []) if e["name"] in RESERVED_ENV)
        if reserved:  # torch.go:73-84@v2.1.0
            return _status(422, f"spec.trainer.env: must not have reserved envs, invalid envs configured: {reserved}")
        if spec["runtimeRef"]["name"] != "torch-distributed":
            return _status(422, "spec.runtimeRef: specified clusterTrainingRuntime must be created first")
        unknown = [
            k
            for k in spec
            if k
            not in trainjob_openapi(self.shape)["components"]["schemas"]["org.kubeflow.trainer.v1alpha1.TrainJob"][
                "properties"
            ]["spec"]["properties"]
        ]
        if unknown:  # fieldValidation=Strict's answer; the default (Warn) would drop them silently
            return _status(400, f"strict decoding error: unknown field(s) {['spec.' + k for k in unknown]}")
        self.jobs[name] = manifest
        self._start(name, spec["trainer"])
        return 201, manifest

    def _start(self, name: str, trainer: dict) -> None:
        port, nodes = free_port(), trainer["numNodes"]
        env = {**os.environ, **{e["name"]: e["value"] for e in trainer.get("env", []) if "value" in e}}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the image's python
        self.procs[name] = []
        for rank in range(nodes):
            env.update(
                PET_NNODES=str(nodes),
                PET_NPROC_PER_NODE=str(trainer["numProcPerNode"]),
                PET_NODE_RANK=str(rank),
                PET_MASTER_ADDR="127.0.0.1",
                PET_MASTER_PORT=str(port),
            )
            log = (self.log_dir / f"{name}-node-0-{rank}.log").open("w")
            self.procs[name].append(subprocess.Popen(trainer["command"], env=dict(env), stdout=log, stderr=log))

    def _job_status(self, name: str) -> dict:
        codes = [p.poll() for p in self.procs.get(name, [])]
        failed = sum(1 for c in codes if c not in (None, 0))
        counts = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        if failed:  # the JobSet fails as soon as one of its Jobs does (no failurePolicy: maxRestarts 0)
            counts.update(failed=failed, active=len(codes) - failed)
            cond = {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
            }
            return {"conditions": [cond], "jobsStatus": [counts]}
        if codes and all(c == 0 for c in codes):
            counts.update(succeeded=len(codes))
            cond = {
                "type": "Complete",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
            }
            return {"conditions": [cond], "jobsStatus": [counts]}
        counts.update(active=len(codes), ready=len(codes))
        return {"jobsStatus": [counts]}

    def _pods(self, selector: str) -> list[dict]:
        wanted = dict(kv.split("=") for kv in selector.split(",") if kv)
        items = []
        for name, procs in self.procs.items():
            for rank, proc in enumerate(procs):
                labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "node"}
                if wanted.items() <= labels.items():
                    items.append(self._pod(f"{name}-node-0-{rank}", labels, proc.poll()))
        return items

    @staticmethod
    def _pod(name: str, labels: dict, code: int | None) -> dict:
        state = {"running": {}} if code is None else {"terminated": {"exitCode": code, "reason": "Error"}}
        status = {
            "name": "node",
            "image": "img",
            "imageID": "",
            "ready": code is None,
            "restartCount": 0,
            "state": state,
        }
        return {"metadata": {"name": name, "labels": labels}, "status": {"containerStatuses": [status]}}

    def _log(self, pod: str, tail: int) -> tuple[int, str]:
        path = self.log_dir / f"{pod}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return 200, "\n".join(lines[-tail:]) + "\n"

    def stop(self, name: str) -> None:
        for proc in self.procs.pop(name, []):
            proc.kill()
            proc.wait()
