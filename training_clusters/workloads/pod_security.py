"""The Pod Security Standards, as data: what Kubernetes' Pod Security admission checks a pod against.

A team namespace carries ``pod-security.kubernetes.io/enforce: baseline`` (or ``restricted``); the API server's
Pod Security admission then refuses a pod that breaks one of that level's controls. No API server runs where
this library is built and tested, so :func:`violations` judges a pod spec against the same controls, one
:class:`Control` per row of the tables of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(the Kubernetes 1.33 page: Baseline, then Restricted), each naming the row it implements. It is what the tests
use to show that a privileged, hostPath or hostNetwork pod is refused in a team namespace and that every pod this
library creates there (acceptance jobs, the training runtimes' templates) is admitted.

>>> violations({"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": True}}]},
...            PodSecurityLevel.BASELINE)
['Privileged Containers: containers[0].securityContext.privileged is true']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from training_clusters.model.options import PodSecurityLevel

#: The page every control cites.
STANDARDS_PAGE = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"

#: Baseline "Capabilities": what ``capabilities.add`` may name (the container runtime's default set).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
#: Baseline "SELinux": the ``seLinuxOptions.type`` values allowed (besides none).
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
#: Baseline "Sysctls": the safe set (Kubernetes 1.29 and later).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
#: Restricted "Volume Types": the only volume sources allowed.
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"

#: A pod spec and its metadata's annotations -> one line per breach.
Check = Callable[[Mapping[str, Any], Mapping[str, str]], Iterator[str]]


@dataclass(frozen=True)
class Control:
    """One row of the Pod Security Standards' tables."""

    name: str
    """The row's name on the page, e.g. ``Host Namespaces``."""
    level: PodSecurityLevel
    """The table it is in: ``baseline`` controls bind both levels, ``restricted`` ones restricted only."""
    fields: tuple[str, ...]
    """The restricted fields the page lists."""
    check: Check

    def breaches(self, spec: Mapping[str, Any], annotations: Mapping[str, str]) -> list[str]:
        """``<name>: <field> <what is wrong>`` for each breach of this control by the pod."""
        return [f"{self.name}: {problem}" for problem in self.check(spec, annotations)]


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in _CONTAINER_LISTS:
        for index, container in enumerate(spec.get(kind) or []):
            yield f"{kind}[{index}]", container


def _security_contexts(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The pod's security context, then each container's, with where they are."""
    yield "securityContext", spec.get("securityContext") or {}
    for where, container in _containers(spec):
        yield f"{where}.securityContext", container.get("securityContext") or {}


def _host_process(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, context in _security_contexts(spec):
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            yield f"{where}.windowsOptions.hostProcess is true"


def _host_namespaces(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield f"{field} is true"


def _privileged(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        if (container.get("securityContext") or {}).get("privileged"):
            yield f"{where}.securityContext.privileged is true"


def _baseline_capabilities(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        added = ((container.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        beyond = [c for c in added if c not in BASELINE_CAPABILITIES]
        if beyond:
            yield f"{where}.securityContext.capabilities.add has {', '.join(beyond)}"


def _host_path(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for index, volume in enumerate(spec.get("volumes") or []):
        if "hostPath" in volume:
            yield f"volumes[{index}].hostPath is set ({volume.get('name')})"


def _host_ports(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        for index, port in enumerate(container.get("ports") or []):
            if port.get("hostPort"):
                yield f"{where}.ports[{index}].hostPort is {port['hostPort']}"


def _app_armor(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> Iterator[str]:
    for where, context in _security_contexts(spec):
        profile = (context.get("appArmorProfile") or {}).get("type")
        if profile not in (None, "RuntimeDefault", "Localhost"):
            yield f"{where}.appArmorProfile.type is {profile}"
    for key, value in annotations.items():
        if (
            key.startswith(_APPARMOR_ANNOTATION)
            and value != "runtime/default"
            and not value.startswith("localhost/")
        ):
            yield f"metadata.annotations[{key}] is {value}"


def _se_linux(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, context in _security_contexts(spec):
        options = context.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            yield f"{where}.seLinuxOptions.type is {options['type']}"
        for field in ("user", "role"):
            if options.get(field):
                yield f"{where}.seLinuxOptions.{field} is {options[field]}"


def _proc_mount(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        mount = (container.get("securityContext") or {}).get("procMount")
        if mount not in (None, "Default"):
            yield f"{where}.securityContext.procMount is {mount}"


def _baseline_seccomp(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, context in _security_contexts(spec):
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"{where}.seccompProfile.type is Unconfined"


def _sysctls(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for index, sysctl in enumerate((spec.get("securityContext") or {}).get("sysctls") or []):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"securityContext.sysctls[{index}].name is {sysctl.get('name')}"


def _volume_types(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for index, volume in enumerate(spec.get("volumes") or []):
        sources = [key for key in volume if key != "name"]
        if not all(source in RESTRICTED_VOLUMES for source in sources):
            yield f"volumes[{index}] ({volume.get('name')}) is of type {', '.join(sources)}"


def _privilege_escalation(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        if (container.get("securityContext") or {}).get("allowPrivilegeEscalation") is not False:
            yield f"{where}.securityContext.allowPrivilegeEscalation is not false"


def _non_root(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    if pod is False:
        yield "securityContext.runAsNonRoot is false"
    for where, container in _containers(spec):
        own = (container.get("securityContext") or {}).get("runAsNonRoot")
        if own is False or (own is None and pod is not True):
            yield f"{where}.securityContext.runAsNonRoot is not true (nor the pod's)"


def _non_root_user(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, context in _security_contexts(spec):
        if context.get("runAsUser") == 0:
            yield f"{where}.runAsUser is 0"


def _restricted_seccomp(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    allowed = ("RuntimeDefault", "Localhost")
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    for where, container in _containers(spec):
        own = ((container.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
        if (own or pod) not in allowed:
            yield f"{where}.securityContext.seccompProfile.type is {own or pod or 'unset'} (nor the pod's)"


def _restricted_capabilities(spec: Mapping[str, Any], _: Mapping[str, str]) -> Iterator[str]:
    for where, container in _containers(spec):
        capabilities = (container.get("securityContext") or {}).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"{where}.securityContext.capabilities.drop does not include ALL"
        beyond = [c for c in capabilities.get("add") or [] if c != "NET_BIND_SERVICE"]
        if beyond:
            yield f"{where}.securityContext.capabilities.add has {', '.join(beyond)}"


_B = PodSecurityLevel.BASELINE
_R = PodSecurityLevel.RESTRICTED
_CONTAINER = "spec.containers[*].securityContext"
_EACH = f"{_CONTAINER}, spec.initContainers[*].securityContext, spec.ephemeralContainers[*].securityContext"

#: The rows of the page's tables, in its order.
CONTROLS: tuple[Control, ...] = (
    Control("HostProcess", _B, ("spec.securityContext.windowsOptions.hostProcess", _EACH), _host_process),
    Control("Host Namespaces", _B, ("spec.hostNetwork", "spec.hostPID", "spec.hostIPC"), _host_namespaces),
    Control("Privileged Containers", _B, (f"{_CONTAINER}.privileged",), _privileged),
    Control("Capabilities", _B, (f"{_CONTAINER}.capabilities.add",), _baseline_capabilities),
    Control("HostPath Volumes", _B, ("spec.volumes[*].hostPath",), _host_path),
    Control("Host Ports", _B, ("spec.containers[*].ports[*].hostPort",), _host_ports),
    Control(
        "AppArmor",
        _B,
        ("spec.securityContext.appArmorProfile.type", f"{_CONTAINER}.appArmorProfile.type", "annotations"),
        _app_armor,
    ),
    Control(
        "SELinux", _B, ("spec.securityContext.seLinuxOptions", f"{_CONTAINER}.seLinuxOptions"), _se_linux
    ),
    Control("/proc Mount Type", _B, (f"{_CONTAINER}.procMount",), _proc_mount),
    Control(
        "Seccomp",
        _B,
        ("spec.securityContext.seccompProfile.type", f"{_CONTAINER}.seccompProfile.type"),
        _baseline_seccomp,
    ),
    Control("Sysctls", _B, ("spec.securityContext.sysctls[*].name",), _sysctls),
    Control("Volume Types", _R, ("spec.volumes[*]",), _volume_types),
    Control("Privilege Escalation", _R, (f"{_CONTAINER}.allowPrivilegeEscalation",), _privilege_escalation),
    Control(
        "Running as Non-root",
        _R,
        ("spec.securityContext.runAsNonRoot", f"{_CONTAINER}.runAsNonRoot"),
        _non_root,
    ),
    Control(
        "Running as Non-root user",
        _R,
        ("spec.securityContext.runAsUser", f"{_CONTAINER}.runAsUser"),
        _non_root_user,
    ),
    Control(
        "Seccomp (restricted)",
        _R,
        ("spec.securityContext.seccompProfile.type", f"{_CONTAINER}.seccompProfile.type"),
        _restricted_seccomp,
    ),
    Control("Capabilities (restricted)", _R, (f"{_CONTAINER}.capabilities",), _restricted_capabilities),
)


def controls(level: PodSecurityLevel | str) -> tuple[Control, ...]:
    """The controls a namespace at ``level`` enforces: baseline's, and restricted's too at restricted."""
    wanted = PodSecurityLevel.parse(level)
    return tuple(c for c in CONTROLS if wanted is _R or c.level is _B)


def violations(
    spec: Mapping[str, Any], level: PodSecurityLevel | str, annotations: Mapping[str, str] | None = None
) -> list[str]:
    """Every breach of ``level``'s controls by a pod spec (empty: admitted), one line each."""
    return [line for control in controls(level) for line in control.breaches(spec, annotations or {})]


def pod_templates(manifest: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], Mapping[str, str]]]:
    """``(where, pod spec, annotations)`` of each pod ``manifest`` makes: a Pod, a workload's template (Job,
    Deployment, DaemonSet ...), each replica of an MPIJob, each replicated job of a JobSet or a
    (Cluster)TrainingRuntime. Pod Security admission judges the pods these templates become."""
    kind = manifest.get("kind")
    spec = manifest.get("spec") or {}
    if kind == "Pod":
        return [("spec", spec, (manifest.get("metadata") or {}).get("annotations") or {})]
    if kind == "MPIJob":
        return [
            (f"spec.mpiReplicaSpecs.{role}.template", *_template(replica["template"]))
            for role, replica in spec["mpiReplicaSpecs"].items()
        ]
    if kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        return _replicated_jobs("spec.template.spec", spec["template"]["spec"])
    if kind == "JobSet":
        return _replicated_jobs("spec", spec)
    if "template" in spec:
        return [("spec.template", *_template(spec["template"]))]
    return []


def _template(template: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, str]]:
    return template.get("spec") or {}, (template.get("metadata") or {}).get("annotations") or {}


def _replicated_jobs(
    where: str, spec: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any], Mapping[str, str]]]:
    return [
        (
            f"{where}.replicatedJobs[{job['name']}].template.spec.template",
            *_template(job["template"]["spec"]["template"]),
        )
        for job in spec.get("replicatedJobs") or []
    ]
