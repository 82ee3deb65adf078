"""Submit a compiled pipeline to Kubeflow Pipelines (a separate step from compiling).

Authentication never comes from the spec or the command line: a bearer token from ``KFP_TOKEN``, a
projected service-account token file from ``KF_PIPELINES_SA_TOKEN_PATH``, the in-cluster token when run
inside the cluster, or none (a port-forwarded or open endpoint)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchtfx.components.stage_failure import StageFailure
from torchtfx.data.config.strict import load_yaml_text
from torchtfx.pipeline.kfp.package_info import recorded, version_of
from torchtfx.pipeline.kfp.run_id import RUN_ID_PARAMETER

logger = logging.getLogger(__name__)

TOKEN_ENV = "KFP_TOKEN"
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"


class SubmitError(StageFailure):
    """The package or the submission is invalid, or the KFP API refused it; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Submission:
    run_id: str
    run_name: str
    experiment: str
    url: str | None
    pipeline_root: str | None = None


def read_package(package: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pipeline spec and PlatformSpec documents, checked for what the KFP backend requires."""
    if not package.is_file():
        raise SubmitError(f"{package} does not exist: run `torchtfx compile` first")
    docs = load_yaml_text(package.read_text(), str(package), SubmitError, documents=True)  # the guarded loader
    spec = docs[0] if docs else None
    if not isinstance(spec, dict) or spec.get("schemaVersion") != "2.1.0":
        raise SubmitError(f"{package} is not a pipeline spec with schemaVersion 2.1.0; recompile it")
    return spec, (docs[1] if len(docs) > 1 else {})


def pipeline_root(spec: dict[str, Any], package: Path) -> str | None:
    """The root the run must carry itself: the KFP backend takes the run's pipeline root, else the namespace's
    kfp-launcher ConfigMap, and never reads the spec's (driver.go at 2.1.0, root_dag.go at 2.14.3). It is the
    spec's ``defaultPipelineRoot``, or a per-namespace root's template from the package record (compile keeps
    ``{namespace}`` out of the spec: compile.py ``_set_root``). None when there is neither (the namespace's
    default then applies)."""
    from torchtfx.pipeline.kfp.values import is_bucket_uri

    root = spec.get("defaultPipelineRoot") or recorded(spec).root_template
    if root and not is_bucket_uri(root):
        raise SubmitError(
            f"{package}: its pipeline root {root!r} is not a gs://, s3:// or minio:// bucket, the only roots the "
            "KFP launcher stores artifacts in; set pipeline_root in the Kubeflow config to one and recompile"
        )
    return root or None


def namespaced_root(root: str, namespace: str | None, client: Any) -> str:
    """The run's pipeline root in its namespace: ``{namespace}`` filled in with ``--namespace``, else the kfp
    client's context namespace (``kfp.Client.get_user_namespace``); a root of another namespace is refused."""
    from torchtfx.pipeline.kfp.pipeline_root import NAMESPACE_PLACEHOLDER, root_for_namespace

    if not namespace and NAMESPACE_PLACEHOLDER in root and hasattr(client, "get_user_namespace"):
        namespace = client.get_user_namespace() or None
    try:
        return root_for_namespace(root, namespace)
    except ValueError as err:
        raise SubmitError(str(err)) from None


def run_arguments(spec: dict[str, Any], params: dict[str, str], run_name: str) -> dict[str, str]:
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise SubmitError(f"unknown pipeline parameters {unknown}; this pipeline takes {sorted(declared)}")
    arguments = dict(params)
    if RUN_ID_PARAMETER in declared:
        # A package for backend 2.1-2.4, whose driver substitutes no placeholder: the run id is passed in
        # (from 2.5 the steps take the run's UUID instead and the parameter is gone: run_id.py).
        arguments.setdefault(RUN_ID_PARAMETER, f"{run_name}-{uuid.uuid4().hex[:8]}")
    return arguments


def server_version(client: Any) -> str | None:
    """The API server's release: ``tag_name`` of ``GET /apis/v2beta1/healthz`` (the image's ``TAG_NAME``,
    "unknown" when the build set none: backend/src/apiserver/main.go:362-365@2.15.0, :381-384@2.16.0,
    :465-491@2.17.0; backend/Dockerfile:66-67@2.16.0). kfp 2.5.0's model of the answer keeps only
    ``multi_user``, so the raw JSON is read, through the client's own healthz call (same host and token)."""
    try:
        response = client._healthz_api.get_healthz(_preload_content=False)
        return str(json.loads(response.data).get("tag_name") or "") or None
    except Exception as err:  # any failure only means the version is unknown: the caller says so
        logger.debug("healthz tag_name unreadable: %s", err)
        return None


def check_backend(spec: dict[str, Any], client: Any, package: Path) -> None:
    """Refuse a package compiled for a newer backend than the server runs, before the run is created.

    From 2.14 the API server compiles each run's Kubernetes executor configs with a strict ``protojson.Unmarshal``
    (backend/src/v2/compiler/argocompiler/container.go:285@2.14.0, :309@2.15.0, :320@2.16.0, :326@2.17.0) and
    refuses the run on a field it does not know ("failed to unmarshal kubernetes config"); 2.1-2.4 fail the step
    on it. When the server's version cannot be read (a build without TAG_NAME, a proxy), the run goes ahead with
    a warning: refusing would block every such server outright, and a mismatch is still refused by the server
    before anything runs."""
    from torchtfx.pipeline.kfp.values import OLDEST_BACKEND

    compiled = recorded(spec).kfp_backend
    wanted = version_of(compiled)
    if wanted is None:
        logger.warning("%s records no kfp_backend (compiled by an older torchtfx): recompile it to check it", package)
        return
    if wanted <= OLDEST_BACKEND:
        return  # every supported server knows the 2.1 fields
    tag = server_version(client)
    have = version_of(tag)
    if have is None:
        logger.warning(
            "could not read the Kubeflow Pipelines server's version (healthz tag_name %r); %s was compiled for "
            "backend %s, which an older server refuses: if the run is refused, recompile with "
            "`torchtfx compile --kfp-backend <server version>`",
            tag,
            package,
            compiled,
        )
        return
    if wanted > have:
        server = f"{have[0]}.{have[1]}"
        raise SubmitError(
            f"{package} was compiled for Kubeflow Pipelines backend {compiled}, but the server runs {tag}: it "
            f"refuses PlatformSpec fields it does not know. Recompile for the server: "
            f'`torchtfx compile --kfp-backend {server}` (or kfp_backend: "{server}" in pools.yaml)'
        )


def refused(err: Exception, what: str) -> SubmitError:
    """The KFP API's refusal (kfp_server_api's ApiException) as a SubmitError; any other error is re-raised."""
    if type(err).__name__ != "ApiException":
        raise err
    hint = " (set KFP_TOKEN or KF_PIPELINES_SA_TOKEN_PATH)" if getattr(err, "status", None) in (401, 403) else ""
    status, reason = getattr(err, "status", None), getattr(err, "reason", None)
    return SubmitError(f"Kubeflow Pipelines refused the {what}: {status} {reason}{hint}")


def kfp_client(host: str | None, namespace: str | None):
    import kfp

    token = os.environ.get(TOKEN_ENV)
    if token:
        return kfp.Client(host=host, namespace=namespace, existing_token=token)
    token_path = os.environ.get(TOKEN_PATH_ENV)
    if token_path:
        from kfp.client.set_volume_credentials import ServiceAccountTokenVolumeCredentials

        return kfp.Client(host=host, namespace=namespace, credentials=ServiceAccountTokenVolumeCredentials(token_path))
    return kfp.Client(host=host, namespace=namespace)


def connect(host: str | None, namespace: str | None):
    """A ``kfp.Client``; the client checks the API's health on creation."""
    try:
        return kfp_client(host, namespace)
    except TimeoutError as err:
        where = host or "(in-cluster)"
        raise SubmitError(f"Kubeflow Pipelines at {where} did not answer its health check: {err}") from None


def submit(
    package: Path,
    *,
    host: str | None,
    experiment: str,
    run_name: str | None = None,
    params: dict[str, str] | None = None,
    namespace: str | None = None,
    enable_caching: bool | None = None,
    client: Any = None,
) -> Submission:
    """Create (or reuse) ``experiment`` and start one run of ``package``."""
    run = prepare_run(package, run_name, params, host, namespace, client)
    try:
        result = run.client.create_run_from_pipeline_package(
            str(package),
            arguments=run.arguments,
            run_name=run.name,
            experiment_name=experiment,
            namespace=namespace,
            pipeline_root=run.root,
            enable_caching=enable_caching,
        )
    except Exception as err:
        raise refused(err, "run") from None
    url = f"{host.rstrip('/')}/#/runs/details/{result.run_id}" if host else None
    logger.info("Submitted run %s (%s) to experiment %s", run.name, result.run_id, experiment)
    return Submission(result.run_id, run.name, experiment, url, run.root)


@dataclasses.dataclass(frozen=True)
class PreparedRun:
    """What a run or a recurring run of a package is created with, every check done."""

    name: str
    arguments: dict[str, str]
    client: Any
    root: str | None


def prepare_run(
    package: Path,
    run_name: str | None,
    params: dict[str, str] | None,
    host: str | None,
    namespace: str | None,
    client: Any,
    kind: str = "",
    check: Callable[[dict[str, Any]], None] | None = None,
) -> PreparedRun:
    """The package read and checked (``check(spec)`` too) before the server is contacted, then the server's
    backend checked and the pipeline root namespaced. The default name: the pipeline's, ``kind``, a timestamp."""
    spec, _ = read_package(package)
    if check is not None:
        check(spec)
    root = pipeline_root(spec, package)
    name = run_name or f"{spec['pipelineInfo']['name']}{kind}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    arguments = run_arguments(spec, params or {}, name)
    client = client or connect(host, namespace)
    check_backend(spec, client, package)
    return PreparedRun(name, arguments, client, namespaced_root(root, namespace, client) if root else root)
