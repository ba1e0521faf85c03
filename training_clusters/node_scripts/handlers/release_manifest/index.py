"""Custom-resource handler: apply a Kubernetes manifest published at an HTTPS URL to an EKS cluster.

Some projects publish their install only as a release manifest (Kubeflow's MPI Operator has no helm chart).
CDK's kubectl handler applies manifests given inline, which would mean copying the publisher's file into
our repository; this handler downloads the pinned release at deploy time instead and applies it with the
kubectl of CDK's kubectl layer, server-side (large CRDs exceed client-side apply's annotation limit).

Runs in the Lambda Python runtime: standard library and boto3 only. Invoked by CDK's Provider framework
(``on_event``): return the physical id, raise to fail the deployment with the message.

Resource properties: ``ClusterName``, ``ManifestUrl`` (https only), ``Sha256`` (optional: checked when set),
``WaitForCrds`` ("true"/"false": wait until the manifest's CRDs are established, so objects of those kinds
can be applied right after), ``DeploymentPatches`` (optional: a JSON list of ``{"namespace", "name", "patch"}``,
each a strategic-merge patch applied to that Deployment of the manifest right after the manifest, e.g. the
tolerations that place its pods; the manifest's own server-side apply owns none of those fields, so a later
apply of the same or a new release leaves them in place, and the handler patches again after it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

KUBECTL = os.environ.get("KUBECTL", "/opt/kubectl/kubectl")
"""Where CDK's kubectl layer puts kubectl inside Lambda."""
MAX_MANIFEST_BYTES = 5 * 1024 * 1024
DOWNLOAD_TIMEOUT_SECONDS = 60
CRD_WAIT = "180s"
TOKEN_PREFIX = "k8s-aws-v1."
CRD_KIND_PREFIX = "customresourcedefinition.apiextensions.k8s.io/"


class ManifestError(RuntimeError):
    """A problem the deployment should report as is."""


def on_event(event: dict[str, Any], context: Any, session: Any = None) -> dict[str, Any]:
    """Create / Update: apply the manifest. Delete: remove what it created (unless the cluster is gone)."""
    props = event["ResourceProperties"]
    cluster_name = props["ClusterName"]
    url = props["ManifestUrl"]
    # One physical id for the life of the resource: a new URL is an in-place upgrade, never a replacement
    # (a replacement's clean-up Delete would remove the CRDs the new version has just applied).
    physical_id = event.get("PhysicalResourceId") or f"{cluster_name}:{url.rsplit('/', 1)[-1]}"
    session = session or boto3.session.Session()
    request = event["RequestType"]
    LOG.info("%s %s on cluster %s", request, url, cluster_name)
    if request == "Delete":
        _delete(session, cluster_name, url, props.get("Sha256"))
    else:
        _apply(
            session,
            cluster_name,
            url,
            props.get("Sha256"),
            props.get("WaitForCrds", "true") == "true",
            deployment_patches(props.get("DeploymentPatches")),
        )
    return {"PhysicalResourceId": physical_id}


def deployment_patches(text: str | None) -> list[dict[str, Any]]:
    """The ``DeploymentPatches`` property: a JSON list of ``{"namespace", "name", "patch"}`` (none when absent)."""
    if not text:
        return []
    patches = json.loads(text)
    if not isinstance(patches, list) or not all(
        isinstance(p, dict)
        and isinstance(p.get("namespace"), str)
        and isinstance(p.get("name"), str)
        and isinstance(p.get("patch"), dict)
        for p in patches
    ):
        raise ManifestError(
            f'DeploymentPatches must be a JSON list of {{"namespace", "name", "patch"}} objects, got {text!r}'
        )
    return patches


def _apply(
    session: Any,
    cluster_name: str,
    url: str,
    sha256: str | None,
    wait_for_crds: bool,
    patches: Sequence[dict[str, Any]] = (),
) -> None:
    manifest = download(url, sha256)
    with _kubeconfig(session, cluster_name) as kubectl:
        path = kubectl.write("manifest.yaml", manifest)
        kubectl.run("apply", "--server-side", "--force-conflicts", "-f", path)
        for patch in patches:
            kubectl.run(
                "patch",
                "deployment",
                patch["name"],
                "--namespace",
                patch["namespace"],
                "--type=strategic",
                "--patch",
                json.dumps(patch["patch"], sort_keys=True),
            )
        if wait_for_crds:
            crds = [
                name
                for name in kubectl.run("get", "-f", path, "-o", "name").split()
                if name.startswith(CRD_KIND_PREFIX)
            ]
            if crds:
                kubectl.run("wait", "--for=condition=established", f"--timeout={CRD_WAIT}", *crds)


def _delete(session: Any, cluster_name: str, url: str, sha256: str | None) -> None:
    eks = session.client("eks")
    try:
        eks.describe_cluster(name=cluster_name)
    except eks.exceptions.ResourceNotFoundException:
        LOG.info("cluster %s no longer exists: nothing to delete", cluster_name)
        return
    manifest = download(url, sha256)
    with _kubeconfig(session, cluster_name) as kubectl:
        path = kubectl.write("manifest.yaml", manifest)
        kubectl.run("delete", "--ignore-not-found", "--wait=false", "-f", path)


def download(url: str, sha256: str | None) -> bytes:
    """The manifest at ``url`` (https only, at most 5 MiB), checked against ``sha256`` when given."""
    if not url.startswith("https://"):
        raise ManifestError(f"ManifestUrl must be an https:// URL, got {url!r}")
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            body: bytes = response.read(MAX_MANIFEST_BYTES + 1)
    except OSError as error:
        raise ManifestError(
            f"could not download {url}: {error}. The handler runs in the cluster's private subnets and "
            "needs a route to the internet (a NAT gateway)."
        ) from None
    if len(body) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{url} is larger than {MAX_MANIFEST_BYTES} bytes; refusing to apply it")
    if sha256 and hashlib.sha256(body).hexdigest() != sha256.lower():
        raise ManifestError(
            f"{url} has sha256 {hashlib.sha256(body).hexdigest()}, expected {sha256}: refusing to apply it"
        )
    return body


def eks_token(session: Any, cluster_name: str) -> str:
    """A bearer token for the cluster's API: a presigned STS GetCallerIdentity URL, as aws-iam-authenticator makes."""
    region = session.region_name
    # The regional endpoint of the region's partition (aws, aws-cn, aws-us-gov), resolved by botocore; the
    # function sets AWS_STS_REGIONAL_ENDPOINTS=regional for botocore versions that default to global.
    sts = session.client("sts", region_name=region)

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers["x-k8s-aws-id"] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class _Kubectl:
    """kubectl pointed at one cluster through a private kubeconfig in a temporary directory."""

    def __init__(self, directory: Path, kubeconfig: Path) -> None:
        self._directory = directory
        self._env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(directory)}

    def write(self, name: str, content: bytes) -> str:
        path = self._directory / name
        path.write_bytes(content)
        return str(path)

    def run(self, *args: str) -> str:
        command = [KUBECTL, *args]
        LOG.info("running %s", " ".join(command))
        result = subprocess.run(command, env=self._env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ManifestError(
                f"kubectl {' '.join(args[:1])} failed ({result.returncode}): {result.stderr.strip()[-2000:]}"
            )
        return result.stdout


@contextmanager
def _kubeconfig(session: Any, cluster_name: str) -> Iterator[_Kubectl]:
    """kubectl for ``cluster_name``, authenticated as the handler's role, in a throw-away directory."""
    cluster = session.client("eks").describe_cluster(name=cluster_name)["cluster"]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ca = directory / "ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificateAuthority"]["data"]))
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(
            kubeconfig_text(cluster["endpoint"], str(ca), eks_token(session, cluster_name), cluster_name)
        )
        kubeconfig.chmod(0o600)
        yield _Kubectl(directory, kubeconfig)


def kubeconfig_text(endpoint: str, ca_path: str, token: str, name: str) -> str:
    """A one-cluster kubeconfig (JSON is valid YAML; no YAML library in the Lambda runtime)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority": ca_path}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return json.dumps(config)
