"""The release-manifest handler, run as Lambda would run it, offline.

AWS calls go through botocore's Stubber (checked against the EKS service model); kubectl is a recording
stub script; the download is served from memory.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from training_clusters.node_scripts.handlers.release_manifest import index

CLUSTER = "training"
URL = "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.7.0/deploy/v2beta1/mpi-operator.yaml"
MANIFEST = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mpi-operator\n"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n").decode()
CLUSTER_DESCRIPTION = {
    "cluster": {
        "name": CLUSTER,
        "endpoint": "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
        "certificateAuthority": {"data": CA},
    }
}


class FakeSession:
    """A boto3 session whose EKS client is stubbed; STS presigning works offline with fake keys."""

    def __init__(self) -> None:
        self._session = boto3.session.Session(
            aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
        )
        self.region_name = "us-east-1"
        self.eks = self._session.client("eks")
        self.stub = Stubber(self.eks)

    def client(self, name: str, **kwargs: Any) -> Any:
        return self.eks if name == "eks" else self._session.client(name, **kwargs)


@pytest.fixture
def session() -> Iterator[FakeSession]:
    fake = FakeSession()
    with fake.stub:
        yield fake
        fake.stub.assert_no_pending_responses()


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubectl stub: records each call's arguments and KUBECONFIG, answers ``get -o name``."""
    log = tmp_path / "kubectl.log"
    script = tmp_path / "kubectl"
    script.write_text(
        "#!/bin/bash\n"
        f'echo "$* | $KUBECONFIG" >> {log}\n'
        'if [[ "$1" == get ]]; then\n'
        "  echo namespace/mpi-operator\n"
        "  echo customresourcedefinition.apiextensions.k8s.io/mpijobs.kubeflow.org\n"
        "fi\n"
        'if [[ -n "${KUBECTL_FAIL:-}" && "$1" == "$KUBECTL_FAIL" ]]; then echo "boom: forbidden" >&2; exit 1; fi\n'
    )
    script.chmod(0o755)
    monkeypatch.setattr(index, "KUBECTL", str(script))
    return log


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Serve MANIFEST for any URL; returns the URLs requested."""
    requested: list[str] = []

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        requested.append(url)
        return io.BytesIO(MANIFEST)

    monkeypatch.setattr(index.urllib.request, "urlopen", urlopen)
    return requested


def _event(request: str, **props: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request,
        "ResourceProperties": {"ClusterName": CLUSTER, "ManifestUrl": URL, "WaitForCrds": "true", **props},
    }
    if request != "Create":
        event["PhysicalResourceId"] = f"{CLUSTER}:mpi-operator.yaml"
    return event


def _calls(log: Path) -> list[str]:
    return [line.split(" | ")[0] for line in log.read_text().splitlines()]


def test_create_applies_server_side_and_waits_for_the_crds(
    session: FakeSession, kubectl: Path, served: list[str]
) -> None:
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    result = index.on_event(_event("Create"), None, session=session)
    assert result == {"PhysicalResourceId": f"{CLUSTER}:mpi-operator.yaml"}
    assert served == [URL]
    apply, get, wait = _calls(kubectl)
    assert apply.startswith("apply --server-side --force-conflicts -f ") and apply.endswith("manifest.yaml")
    assert get.startswith("get -f ")
    assert wait == (
        "wait --for=condition=established --timeout=180s "
        "customresourcedefinition.apiextensions.k8s.io/mpijobs.kubeflow.org"
    )


PATCH = {
    "spec": {"template": {"spec": {"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}}}
}


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_deployment_patches_follow_the_manifest_on_create_and_update(
    session: FakeSession, kubectl: Path, served: list[str], request_type: str
) -> None:
    """Each patch, strategic-merge, on its Deployment right after the server-side apply (which owns none of
    the patched fields, so it never takes them back)."""
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    patches = json.dumps([{"namespace": "mpi-operator", "name": "mpi-operator", "patch": PATCH}])
    index.on_event(_event(request_type, DeploymentPatches=patches), None, session=session)
    apply, patch, get, _wait = _calls(kubectl)
    assert apply.startswith("apply --server-side --force-conflicts -f ")
    assert patch == (
        "patch deployment mpi-operator --namespace mpi-operator --type=strategic --patch "
        + json.dumps(PATCH, sort_keys=True)
    )
    assert get.startswith("get -f ")


def test_no_deployment_patches_no_patch_call(session: FakeSession, kubectl: Path, served: list[str]) -> None:
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    index.on_event(_event("Create"), None, session=session)
    assert not [c for c in _calls(kubectl) if c.startswith("patch")]


@pytest.mark.parametrize(
    "text",
    [
        '{"namespace": "a", "name": "b", "patch": {}}',
        '[{"name": "b", "patch": {}}]',
        '[{"namespace": "a", "patch": {}}]',
        '[{"namespace": "a", "name": "b", "patch": "tolerations"}]',
        '[{"namespace": "a", "name": 1, "patch": {}}]',
    ],
)
def test_malformed_deployment_patches_are_refused_before_anything_is_applied(text: str) -> None:
    with pytest.raises(index.ManifestError) as caught:
        index.deployment_patches(text)
    assert str(caught.value) == (
        f'DeploymentPatches must be a JSON list of {{"namespace", "name", "patch"}} objects, got {text!r}'
    )


def test_kubeconfig_points_at_the_cluster_with_a_signed_token(
    session: FakeSession, kubectl: Path, served: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    original = index._Kubectl.run

    def capture(self: Any, *args: str) -> str:
        seen.update(json.loads(Path(self._env["KUBECONFIG"]).read_text()))
        seen["ca"] = Path(seen["clusters"][0]["cluster"]["certificate-authority"]).read_bytes()
        return original(self, *args)

    monkeypatch.setattr(index._Kubectl, "run", capture)
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    index.on_event(_event("Create", WaitForCrds="false"), None, session=session)
    assert seen["clusters"][0]["cluster"]["server"] == CLUSTER_DESCRIPTION["cluster"]["endpoint"]
    assert seen["ca"] == base64.b64decode(CA)
    token = seen["users"][0]["user"]["token"]
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert url.startswith("https://sts.us-east-1.amazonaws.com/")
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Signature"]
    assert len(_calls(kubectl)) == 1  # WaitForCrds false: apply only


def test_update_keeps_the_physical_id(session: FakeSession, kubectl: Path, served: list[str]) -> None:
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    new_url = URL.replace("v0.7.0", "v0.8.0")
    result = index.on_event(_event("Update", ManifestUrl=new_url), None, session=session)
    assert result["PhysicalResourceId"] == f"{CLUSTER}:mpi-operator.yaml"
    assert served == [new_url]


def test_delete_removes_the_objects(session: FakeSession, kubectl: Path, served: list[str]) -> None:
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    index.on_event(_event("Delete"), None, session=session)
    (delete,) = _calls(kubectl)
    assert delete.startswith("delete --ignore-not-found --wait=false -f ")


def test_delete_after_the_cluster_is_gone_succeeds_without_kubectl(
    session: FakeSession, kubectl: Path, served: list[str]
) -> None:
    session.stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found")
    index.on_event(_event("Delete"), None, session=session)
    assert not kubectl.exists()
    assert served == []


def test_checksum_mismatch_refuses_to_apply(session: FakeSession, kubectl: Path, served: list[str]) -> None:
    wrong = "0" * 64
    with pytest.raises(index.ManifestError, match=f"expected {wrong}: refusing to apply it"):
        index.on_event(_event("Create", Sha256=wrong), None, session=session)
    assert not kubectl.exists()


def test_matching_checksum_applies(session: FakeSession, kubectl: Path, served: list[str]) -> None:
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    index.on_event(_event("Create", Sha256=hashlib.sha256(MANIFEST).hexdigest()), None, session=session)
    assert _calls(kubectl)[0].startswith("apply ")


def test_plain_http_is_refused(session: FakeSession, kubectl: Path) -> None:
    with pytest.raises(index.ManifestError, match="must be an https:// URL"):
        index.on_event(_event("Create", ManifestUrl="http://example.com/x.yaml"), None, session=session)


def test_download_failure_names_the_url_and_the_likely_cause(
    session: FakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(url: str, timeout: float) -> io.BytesIO:
        raise OSError("timed out")

    monkeypatch.setattr(index.urllib.request, "urlopen", unreachable)
    with pytest.raises(index.ManifestError, match=f"could not download {URL}: timed out.*NAT gateway"):
        index.on_event(_event("Create"), None, session=session)


def test_kubectl_failure_fails_the_deployment_with_its_stderr(
    session: FakeSession, kubectl: Path, served: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECTL_FAIL", "apply")
    session.stub.add_response("describe_cluster", CLUSTER_DESCRIPTION, {"name": CLUSTER})
    with pytest.raises(index.ManifestError, match=r"kubectl apply failed \(1\): boom: forbidden"):
        index.on_event(_event("Create"), None, session=session)


def test_oversized_manifest_is_refused(
    session: FakeSession, monkeypatch: pytest.MonkeyPatch, kubectl: Path
) -> None:
    monkeypatch.setattr(
        index.urllib.request,
        "urlopen",
        lambda url, timeout: io.BytesIO(b"x" * (index.MAX_MANIFEST_BYTES + 1)),
    )
    with pytest.raises(index.ManifestError, match="larger than"):
        index.on_event(_event("Create"), None, session=session)


@pytest.mark.parametrize(
    ("region", "host"),
    [("us-east-1", "sts.us-east-1.amazonaws.com"), ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn")],
)
def test_token_is_signed_for_the_regional_sts_endpoint_of_the_partition(region: str, host: str) -> None:
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=region
    )
    token = index.eks_token(session, CLUSTER)
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    assert urllib.parse.urlparse(url).hostname == host
