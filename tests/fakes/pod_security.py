"""A test double of Pod Security admission at level "restricted" (latest), and the pods that the Training Operator v1
and Kubeflow Trainer v2 controllers make from the jobs we create, so that every pod can be checked as a namespace
labelled ``pod-security.kubernetes.io/enforce: restricted`` would check it.

The checks follow k8s.io/pod-security-admission policy/ at v0.34.1 (staging/src/k8s.io/pod-security-admission in
kubernetes v1.34.1), file:line there; every container check visits initContainers, containers and
ephemeralContainers alike (policy/visitor.go:27-39). Not modelled: the user-namespace relaxation
(helpers.go:54, behind a feature gate) and Windows pods (no pod here sets spec.os).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

# policy/check_restrictedVolumes.go:88-101: the inline volume sources "restricted" allows (hostPath included in none).
ALLOWED_VOLUME_SOURCES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected"}
    | {"secret"}
)
# policy/check_sysctls.go:85-106 (the v1.32+ set)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
SECCOMP_TYPES = APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})


def _containers(spec: dict) -> Iterator[dict]:
    """policy/visitor.go:27-39."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _ctx(container: dict) -> dict:
    return container.get("securityContext") or {}


def _bad(spec: dict, test: Callable[[dict], bool]) -> list[str]:
    return [f"container {c['name']!r}" for c in _containers(spec) if test(c)]


def _inherited(spec: dict, field: str, good: Callable[[Any], bool]) -> list[str]:
    """Pod-level ``field`` with container overrides: a container is bad if its own value is bad, or it has none and
    the pod's is missing or bad (check_runAsNonRoot.go:61-120, check_seccompProfile_restricted.go:69-146)."""
    pod = (spec.get("securityContext") or {}).get(field)
    bad = ["pod"] if pod is not None and not good(pod) else []
    for c in _containers(spec):
        own = _ctx(c).get(field)
        if (own is not None and not good(own)) or (own is None and (pod is None or not good(pod))):
            bad.append(f"container {c['name']!r}")
    return bad


def _host_probe_hosts(container: dict) -> list[str]:
    """check_hostProbesAndhostLifecycle.go:86-165: probes and lifecycle handlers must not name a host."""
    handlers = [container.get(p) or {} for p in ("livenessProbe", "readinessProbe", "startupProbe")]
    handlers += [(container.get("lifecycle") or {}).get(h) or {} for h in ("postStart", "preStop")]
    return [h[k]["host"] for h in handlers for k in ("httpGet", "tcpSocket") if (h.get(k) or {}).get("host")]


def violations(metadata: dict, spec: dict) -> list[str]:
    """The "restricted" checks a pod fails, one line each ("<check id>: <what>"); empty: admitted."""
    pod_ctx = spec.get("securityContext") or {}
    out: list[str] = []

    def add(check: str, bad: list[str], what: str) -> None:
        if bad:
            out.append(f"{check}: {', '.join(bad)} {what}")

    # baseline (policy/check_*.go, each *_1_0 unless noted)
    host_ns = [k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    add("hostNamespaces", host_ns, "must not be true")  # check_hostNamespaces.go:58-82
    add("privileged", _bad(spec, lambda c: _ctx(c).get("privileged") is True), "privileged")  # :56-75
    ports = _bad(spec, lambda c: any(p.get("hostPort") for p in c.get("ports") or []))
    add("hostPorts", ports, "set hostPort")  # check_hostPorts.go:60-91
    proc = _bad(spec, lambda c: _ctx(c).get("procMount", "Default") != "Default")
    add("procMount", proc, "set a procMount other than Default")  # check_procMount.go:63-102
    sysctls = [s["name"] for s in pod_ctx.get("sysctls") or [] if s["name"] not in SAFE_SYSCTLS]
    add("sysctls", sysctls, "are not safe sysctls")  # check_sysctls.go:124-143
    selinux = [pod_ctx.get("seLinuxOptions") or {}] + [_ctx(c).get("seLinuxOptions") or {} for c in _containers(spec)]
    bad_selinux = [str(o) for o in selinux if o.get("type", "") not in SELINUX_TYPES or o.get("user") or o.get("role")]
    add("seLinuxOptions", bad_selinux, "not allowed")  # check_seLinuxOptions.go:86-172
    apparmor = [pod_ctx.get("appArmorProfile")] + [_ctx(c).get("appArmorProfile") for c in _containers(spec)]
    bad_apparmor = [str(p) for p in apparmor if p and p.get("type") not in APPARMOR_TYPES]
    add("appArmorProfile", bad_apparmor, "not allowed")  # check_appArmorProfile.go:83-143
    windows = _bad(spec, lambda c: (_ctx(c).get("windowsOptions") or {}).get("hostProcess") is True)
    add("windowsHostProcess", windows, "set hostProcess")  # check_windowsHostProcess.go:59-102
    add("hostProbesAndHostLifecycle", _bad(spec, _host_probe_hosts), "name a probe or lifecycle host")
    # restricted
    bad_volumes = [v["name"] for v in spec.get("volumes") or [] if not (set(v) - {"name"}) <= ALLOWED_VOLUME_SOURCES]
    add("restrictedVolumes", bad_volumes, "use a restricted volume type")  # check_restrictedVolumes.go:88-173
    escalation = _bad(spec, lambda c: _ctx(c).get("allowPrivilegeEscalation") is not False)
    add("allowPrivilegeEscalation", escalation, "must set securityContext.allowPrivilegeEscalation=false")  # :64-92
    no_drop = _bad(spec, lambda c: "ALL" not in ((_ctx(c).get("capabilities") or {}).get("drop") or []))
    add("capabilities_restricted", no_drop, 'must set securityContext.capabilities.drop=["ALL"]')  # :79-136
    adds = _bad(spec, lambda c: set((_ctx(c).get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"})
    add("capabilities_restricted", adds, "must not add capabilities other than NET_BIND_SERVICE")
    add("runAsNonRoot", _inherited(spec, "runAsNonRoot", lambda v: v is True), "must set runAsNonRoot=true")
    root = (["pod"] if pod_ctx.get("runAsUser") == 0 else []) + _bad(spec, lambda c: _ctx(c).get("runAsUser") == 0)
    add("runAsUser", root, "must not set runAsUser=0")  # check_runAsUser.go:62-104
    seccomp = _inherited(spec, "seccompProfile", lambda v: v.get("type") in SECCOMP_TYPES)
    add("seccompProfile_restricted", seccomp, 'must set seccompProfile.type "RuntimeDefault" or "Localhost"')
    return out


# ---------------------------------------------------------------- the pods the controllers make

# kubeflow/trainer pkg/controller.v1/pytorch/initcontainer.go:35-46@v1.9.2 with the default image
# (pkg/config/config.go:28@v1.9.2) and max tries (config.go:33@v1.9.2).
_INIT_PYTORCH_COMMAND = (
    "err=1;for i in $(seq 100); do if nslookup {master}; then err=0 && break; fi;echo waiting for master; "
    "sleep 2; done; exit $err"
)


def init_pytorch(job_name: str) -> dict:
    return {
        "name": "init-pytorch",
        "image": "alpine:3.10",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
        "command": ["sh", "-c", _INIT_PYTORCH_COMMAND.format(master=f"{job_name}-master-0")],
    }


def pytorchjob_pods(manifest: dict) -> list[tuple[str, dict, dict]]:
    """(pod name, metadata, spec) of each replica as the Training Operator v1.9 creates it: the template, plus the
    ``init-pytorch`` init container on every Worker when a Master exists (initcontainer.go:105-135@v1.9.2)."""
    name, replicas = manifest["metadata"]["name"], manifest["spec"]["pytorchReplicaSpecs"]
    pods = []
    for rtype, replica in replicas.items():
        for index in range(replica.get("replicas", 1)):
            template = copy.deepcopy(replica["template"])
            spec = template["spec"]
            if "Master" in replicas and rtype == "Worker":
                spec["initContainers"] = [*(spec.get("initContainers") or []), init_pytorch(name)]
            pods.append((f"{name}-{rtype.lower()}-{index}", template.get("metadata") or {}, spec))
    return pods


def _merge(base: Any, patch: Any) -> Any:
    """A strategic merge patch as far as pod templates need it: maps merge, lists of named items (containers,
    volumes, ...) merge by name (their patchMergeKey), other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _merge(base[k], v) if k in base else copy.deepcopy(v) for k, v in patch.items()}}
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(i, dict) and "name" in i for i in patch):
        merged = {item["name"]: item for item in base}
        for item in patch:
            merged[item["name"]] = _merge(merged[item["name"]], item) if item["name"] in merged else item
        return list(merged.values())
    return copy.deepcopy(patch)


# manifests/base/runtimes/torch_distributed.yaml:21-25@v2.1.0 (the same at v2.2.0 but the image)
RUNTIME_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
RUNTIME_POD_TEMPLATE = {"spec": {"containers": [{"name": "node", "image": RUNTIME_IMAGE}]}}


def trainjob_pods(manifest: dict) -> list[tuple[str, dict, dict]]:
    """The ``node`` pods Kubeflow Trainer v2 makes from a TrainJob on ``torch-distributed``: the runtime's pod
    template, the trainer's image/command/env/resources on the ``node`` container, then the pod overrides merged
    by a strategic merge patch (pkg/runtime/core/trainingruntime.go:190-238@v2.1.0, :226@v2.2.0)."""
    name, spec = manifest["metadata"]["name"], manifest["spec"]
    trainer = spec["trainer"]
    node = {k: trainer[k] for k in ("image", "command", "env") if k in trainer}
    node["resources"] = trainer.get("resourcesPerNode", {})
    template = _merge(RUNTIME_POD_TEMPLATE, {"spec": {"containers": [{"name": "node", **node}]}})
    for patch in spec.get("runtimePatches") or []:
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            template = _merge(template, job["template"]["spec"]["template"])
    for override in spec.get("podTemplateOverrides") or []:
        template = _merge(template, {k: override[k] for k in ("metadata", "spec") if k in override})
    for override in spec.get("podSpecOverrides") or []:
        template = _merge(template, {"spec": {k: v for k, v in override.items() if k != "targetJobs"}})
    metadata = template.get("metadata") or {}
    return [(f"{name}-node-0-{i}", metadata, template["spec"]) for i in range(trainer["numNodes"])]


def refused(pods: list[tuple[str, dict, dict]]) -> dict[str, list[str]]:
    """Pod name -> the "restricted" checks it fails, for the pods that would be refused."""
    return {name: v for name, metadata, spec in pods if (v := violations(metadata, spec))}
