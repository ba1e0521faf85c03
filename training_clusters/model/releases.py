"""What the stacks install, pinned: versions, charts, images, release manifests and their digests (build side,
free of CDK).

One home for every version the library defaults to, so a bump is one edit here; the constructs take these as
defaults and the operate side (acceptance, preflight) imports them, never the reverse.
:data:`VERSION_DEFAULTS` lists each version-bearing default with its source and, where the vendor publishes
one, the end of its standard support; :mod:`training_clusters.rules.versions` turns the calendars below into
the advice a synth and ``training-clusters preflight`` give.

A tag is not a pin: a release's files can be replaced under the same tag. Every manifest the stacks apply
is named here with the SHA-256 of its bytes, which the applying handler checks before anything reaches the
cluster (``training_clusters.node_scripts.handlers.release_manifest``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

# --------------------------------------------------------------------------------------------------
# Kubernetes on Amazon EKS

#: The end of standard support of each Kubernetes version on Amazon EKS ("Understand the Kubernetes version
#: lifecycle on EKS", https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html). After it a
#: cluster runs in extended support for 12 more months, at the extended-support price.
EKS_STANDARD_SUPPORT_ENDS: Mapping[str, date] = {
    "1.29": date(2025, 3, 23),
    "1.30": date(2025, 7, 23),
    "1.31": date(2025, 11, 26),
    "1.32": date(2026, 3, 23),
    "1.33": date(2026, 7, 29),
    "1.34": date(2026, 12, 2),
    "1.35": date(2027, 3, 27),
    "1.36": date(2027, 8, 2),
}
#: What an EKS cluster costs an hour in standard support and in extended support, USD ("Amazon EKS pricing",
#: https://aws.amazon.com/eks/pricing/).
EKS_STANDARD_SUPPORT_USD_PER_CLUSTER_HOUR = 0.10
EKS_EXTENDED_SUPPORT_USD_PER_CLUSTER_HOUR = 0.60
#: The Kubernetes version new EKS clusters get: the newest one the kubectl layer below drives, every pinned
#: chart admits (no ``kubeVersion`` of theirs excludes it) and SageMaker HyperPod supports.
EKS_KUBERNETES_VERSION = "1.35"
#: The kubectl Lambda layer that applies manifests and charts (PyPI ``aws-cdk.lambda-layer-kubectl-v35``
#: 2.2.2: kubectl 1.35.2 and helm 4.1.4). kubectl drives one minor version either side of its own
#: (https://kubernetes.io/releases/version-skew-policy/#kubectl).
KUBECTL_LAYER_VERSION = "1.35"
#: The Kubernetes versions SageMaker HyperPod supports as its EKS orchestrator ("Getting started with Amazon EKS
#: support in SageMaker HyperPod",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html).
HYPERPOD_KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
#: HyperPod on EKS: the newest version HyperPod documents.
HYPERPOD_EKS_KUBERNETES_VERSION = "1.35"

# --------------------------------------------------------------------------------------------------
# Slurm

#: The first release of each Slurm series with the fixes for the 2026 Slurm CVEs (CVE-2026-65107 and seven
#: more): every Slurm before 25.05.9, 25.11.8 and 26.05.4 is affected, and series before 25.05 got no fix
#: (https://github.com/aws/aws-parallelcluster/issues/7601).
SLURM_CVE_2026_FIXED: Mapping[str, str] = {"25.05": "25.05.9", "25.11": "25.11.8", "26.05": "26.05.4"}
#: The ParallelCluster release whose CloudFormation provider and schema the library targets. 3.16.1 ships
#: Slurm 25.11.8 (aws/aws-parallelcluster#7601: "All ParallelCluster versions <=3.16.0 ... are impacted").
PARALLELCLUSTER_VERSION = "3.16.1"
#: The Slurm :data:`PARALLELCLUSTER_VERSION` installs.
PARALLELCLUSTER_SLURM = "25.11.8"
#: The first ParallelCluster release whose Slurm has the 2026 CVE fixes.
PARALLELCLUSTER_CVE_2026_FIXED = "3.16.1"
#: The Slurm series new PCS clusters get ("Slurm versions in AWS PCS",
#: https://docs.aws.amazon.com/pcs/latest/userguide/slurm-versions.html). PCS picks the patch release itself.
PCS_SLURM_VERSION = "25.11"
#: The Slurm HyperPod's Slurm AMIs ship: 24.11.0 in the AMI of January 2026 (the oldest AMI HyperPod's API-driven
#: Slurm configuration accepts), 25.11 on clusters since July 2026 ("SageMaker HyperPod AMI releases",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami.html). HyperPod chooses
#: the AMI, not this library; update a cluster's AMI with ``UpdateClusterSoftware``.
HYPERPOD_SLURM_AMI_SLURM = "24.11.0"
#: The oldest HyperPod Slurm AMI release API-driven Slurm configuration (``slurm_config: api``) runs on: January
#: 2026 ("Migrating to API-driven Slurm configuration",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html). It cannot be
#: pinned or checked here: HyperPod gives a new Slurm cluster its newest AMI, and the AWS::SageMaker::Cluster schema
#: takes an ``ImageReleaseVersion`` for EKS-orchestrated clusters only. A custom ``image_id`` must be built from an
#: AMI of this month or later; an older cluster is brought up to date with ``UpdateClusterSoftware`` first.
HYPERPOD_API_SLURM_MIN_AMI = date(2026, 1, 1)
#: HyperPod's external accounting database (``Orchestrator.Slurm.AccountingDatabase``) needs AMIs released after
#: 30 August 2026 ("Using an external accounting database with SageMaker HyperPod Slurm clusters",
#: https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html).
HYPERPOD_ACCOUNTING_DATABASE_MIN_AMI = date(2026, 8, 31)

# --------------------------------------------------------------------------------------------------
# Helm charts


@dataclass(frozen=True)
class HelmChartSpec:
    """Where a chart comes from and which version we install.

    For a chart published as an OCI artifact, ``repository`` is the whole chart reference
    (``oci://registry/path/chart``): CDK's helm handler pulls exactly that, anonymously.
    """

    chart: str
    repository: str
    version: str
    namespace: str
    release: str


#: NVIDIA's device plugin (advertises ``nvidia.com/gpu``): https://github.com/NVIDIA/k8s-device-plugin
NVIDIA_DEVICE_PLUGIN_CHART = HelmChartSpec(
    chart="nvidia-device-plugin",
    repository="https://nvidia.github.io/k8s-device-plugin",
    version="0.19.0",
    namespace="nvidia-device-plugin",
    release="nvidia-device-plugin",
)
#: AWS's EFA device plugin (advertises ``vpc.amazonaws.com/efa``), chart ``aws-efa-k8s-device-plugin`` v0.5.20
#: from https://github.com/aws/eks-charts (``stable/aws-efa-k8s-device-plugin``). The version is the
#: chart's, not the plugin's: chart v0.5.20 ships plugin image v0.5.13 (its ``appVersion`` and its values'
#: ``image.tag``), which :data:`EFA_DEVICE_PLUGIN_IMAGE_TAG` sets explicitly. Plugin v0.5.20 comes with
#: later charts (v0.5.29 on); move chart and image together, after checking that chart's values.
EFA_DEVICE_PLUGIN_CHART = HelmChartSpec(
    chart="aws-efa-k8s-device-plugin",
    repository="https://aws.github.io/eks-charts",
    version="v0.5.20",
    namespace="kube-system",
    release="aws-efa-k8s-device-plugin",
)
#: The EFA device plugin image the chart above ships (``appVersion`` of chart v0.5.20), set in its values.
EFA_DEVICE_PLUGIN_IMAGE_TAG = "v0.5.13"
#: The plugin's repository in each region's EKS registry (:func:`eks_registry`).
EFA_DEVICE_PLUGIN_REPOSITORY = "eks/aws-efa-k8s-device-plugin"
#: AWS Neuron's chart (device plugin advertising ``aws.amazon.com/neuron`` / ``neuroncore``), published as an
#: OCI artifact on ECR Public: https://github.com/aws-neuron/neuron-helm-charts (1.9.0 = Neuron SDK 2.31).
NEURON_HELM_CHART = HelmChartSpec(
    chart="neuron-helm-chart",
    repository="oci://public.ecr.aws/neuron/neuron-helm-chart",
    version="1.9.0",
    namespace="kube-system",
    release="neuron-helm-chart",
)
#: NVIDIA GPU Operator: DCGM metrics and, where a nodegroup asks for MIG, the MIG manager (the EKS AMI
#: carries driver and toolkit).
GPU_OPERATOR_CHART = HelmChartSpec(
    chart="gpu-operator",
    repository="https://helm.ngc.nvidia.com/nvidia",
    version="v25.3.4",
    namespace="gpu-operator",
    release="gpu-operator",
)
#: Prometheus Operator, Prometheus, Alertmanager and Grafana.
KUBE_PROMETHEUS_STACK_CHART = HelmChartSpec(
    chart="kube-prometheus-stack",
    repository="https://prometheus-community.github.io/helm-charts",
    version="82.6.0",
    namespace="monitoring",
    release="kube-prometheus-stack",
)


@dataclass(frozen=True)
class ImagePin:
    """A container image a chart runs, set in its values rather than inherited from the chart's defaults."""

    repository: str
    tag: str

    @property
    def reference(self) -> str:
        """``repository:tag``."""
        return f"{self.repository}:{self.tag}"


#: Kueue (quotas, queues and all-or-nothing admission): https://github.com/kubernetes-sigs/kueue, chart
#: ``charts/kueue`` of tag v0.19.2, published as an OCI artifact on registry.k8s.io.
KUEUE_CHART = HelmChartSpec(
    chart="kueue",
    repository="oci://registry.k8s.io/kueue/charts/kueue",
    version="0.19.2",
    namespace="kueue-system",
    release="kueue",
)
#: The controller image the published 0.19.2 chart runs (its release script, ``hack/helm-chart-package.sh``,
#: writes it into the packaged values; the tag's own values name a staging image).
KUEUE_IMAGE = ImagePin("registry.k8s.io/kueue/kueue", "v0.19.2")
#: Kubeflow Trainer v2 (``TrainJob`` and ``ClusterTrainingRuntime``, run as JobSets):
#: https://github.com/kubeflow/trainer, chart ``charts/kubeflow-trainer`` of tag v2.3.0 on ghcr.io. It
#: installs JobSet 0.12.0 as its dependency.
KUBEFLOW_TRAINER_CHART = HelmChartSpec(
    chart="kubeflow-trainer",
    repository="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
    version="2.3.0",
    namespace="kubeflow-system",
    release="kubeflow-trainer",
)
#: The Trainer controller image of release v2.3.0 (``ghcr.io`` + ``image.repository`` + the chart's version).
KUBEFLOW_TRAINER_IMAGE = ImagePin("ghcr.io/kubeflow/trainer/trainer-controller-manager", "v2.3.0")
#: JobSet's controller, release v0.12.0: what the Trainer chart's ``jobset`` dependency (chart 0.12.0) runs.
JOBSET_IMAGE = ImagePin("registry.k8s.io/jobset/jobset", "v0.12.0")
#: The default image of the torchrun runtimes: AWS's Deep Learning Container for PyTorch 2.6 training on EC2
#: and EKS (CUDA 12.6, NCCL, the EFA installer's libfabric and aws-ofi-nccl), the tag
#: github.com/aws-samples/awsome-distributed-training builds its EKS Slurm nodes from
#: (``1.architectures/7.sagemaker-hyperpod-eks/slinky-slurm/dlc-slurmd.Dockerfile``). AWS publishes it in each
#: region's DLC registry; nodes elsewhere pull it across regions with their ECR read access. A TrainJob sets
#: its own image (``spec.trainer.image``) to run other code.
PYTORCH_EFA_IMAGE = ImagePin(
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training", "2.6.0-gpu-py312-cu126-ubuntu22.04-ec2"
)

# --------------------------------------------------------------------------------------------------
# Images

#: The registry EKS replicates its add-on images to, by region ("View Amazon container image registries for
#: Amazon EKS add-ons", https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html). Pulling from the
#: stack's own region keeps image pulls on that region's ECR (and its VPC endpoint, when the VPC has one)
#: instead of crossing to us-west-2, the registry the EFA chart's values name.
EKS_ADDON_REGISTRIES: dict[str, str] = {
    **{
        region: f"602401143452.dkr.ecr.{region}.amazonaws.com"
        for region in (
            "ap-northeast-1",
            "ap-northeast-2",
            "ap-northeast-3",
            "ap-south-1",
            "ap-southeast-1",
            "ap-southeast-2",
            "ca-central-1",
            "eu-central-1",
            "eu-north-1",
            "eu-west-1",
            "eu-west-2",
            "eu-west-3",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
        )
    },
    "af-south-1": "877085696533.dkr.ecr.af-south-1.amazonaws.com",
    "ap-east-1": "800184023465.dkr.ecr.ap-east-1.amazonaws.com",
    "ap-south-2": "900889452093.dkr.ecr.ap-south-2.amazonaws.com",
    "ap-southeast-3": "296578399912.dkr.ecr.ap-southeast-3.amazonaws.com",
    "ap-southeast-4": "491585149902.dkr.ecr.ap-southeast-4.amazonaws.com",
    "ap-southeast-5": "151610086707.dkr.ecr.ap-southeast-5.amazonaws.com",
    "ap-southeast-7": "121268973566.dkr.ecr.ap-southeast-7.amazonaws.com",
    "ca-west-1": "761377655185.dkr.ecr.ca-west-1.amazonaws.com",
    "cn-north-1": "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "cn-northwest-1": "961992271922.dkr.ecr.cn-northwest-1.amazonaws.com.cn",
    "eu-central-2": "900612956339.dkr.ecr.eu-central-2.amazonaws.com",
    "eu-south-1": "590381155156.dkr.ecr.eu-south-1.amazonaws.com",
    "eu-south-2": "455263428931.dkr.ecr.eu-south-2.amazonaws.com",
    "me-central-1": "759879836304.dkr.ecr.me-central-1.amazonaws.com",
    "me-south-1": "558608220178.dkr.ecr.me-south-1.amazonaws.com",
    "us-gov-east-1": "151742754352.dkr.ecr.us-gov-east-1.amazonaws.com",
    "us-gov-west-1": "013241004608.dkr.ecr.us-gov-west-1.amazonaws.com",
}


def eks_registry(region: str) -> str | None:
    """The EKS add-on image registry of ``region``, or None for a region not listed here."""
    return EKS_ADDON_REGISTRIES.get(region)


DEFAULT_NCCL_TESTS_IMAGE = (
    "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9"
)
"""AWS's public NCCL test image, pinned by version: CUDA 12.8.1, EFA installer 1.43.2 (libfabric, Open MPI 4),
aws-ofi-nccl 1.16.3, NCCL 2.27.7-1 (the release the Slurm jobs build) and nccl-tests 2.16.9.

Source: github.com/aws-samples/awsome-distributed-training, ``micro-benchmarks/nccl-tests/``: its
``nccl-tests.Dockerfile`` defaults to exactly these versions, its README names the prebuilt images at
``public.ecr.aws/hpc-cloud/nccl-tests`` and the tag recipe ``efa<v>-ofi<v>-nccl<v>-tests<v>`` (published with a
``cuda<v>-`` prefix); public EKS and Slurm validation scripts pin this tag. The Dockerfile sets the layout
the job relies on: ``/opt/amazon/openmpi/bin/mpirun``, ``/opt/nccl-tests/build/all_reduce_perf``, NCCL in
``/opt/nccl/build/lib`` and the plugin in ``/opt/aws-ofi-nccl/install/lib``, all on the image's
``LD_LIBRARY_PATH``.
No digest: the registry was not reachable when this was pinned. For byte-for-byte repeatable runs set
``eks.nccl_test.image`` to ``...@sha256:<digest>`` (``crane digest <image>`` or ``docker buildx imagetools
inspect <image>`` prints it).
"""

#: DCGM's image at the version GPU Operator v25.3.4 pins (its values' ``dcgm.version``), for the DCGM
#: diagnostics acceptance job (``dcgmi diag``).
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.3.1-1-ubuntu22.04"
#: NVIDIA's CUDA base image (``nvidia-smi`` from the host driver, no toolkit) for the MIG acceptance pod:
#: https://catalog.ngc.nvidia.com/orgs/nvidia/containers/cuda, tag ``12.8.1-base-ubuntu22.04``.
CUDA_BASE_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04"

#: busybox from the Docker official images' mirror on ECR Public, for the EFA counter sidecar
#: (:mod:`training_clusters.monitoring.efa`): ``sh``, ``cat``, ``sleep`` and nothing else.
BUSYBOX_IMAGE = "public.ecr.aws/docker/library/busybox:1.37.0"

# --------------------------------------------------------------------------------------------------
# Release manifests

#: The MPI Operator release the EKS stacks install (MPIJob ``kubeflow.org/v2beta1``).
MPI_OPERATOR_VERSION = "v0.7.0"
#: SHA-256 of ``deploy/v2beta1/mpi-operator.yaml`` at each pinned tag of github.com/kubeflow/mpi-operator.
MPI_OPERATOR_SHA256 = {
    "v0.7.0": "507d5dc8e12bcef43be5b9c89bc93c450581fedb316c62282d7831720ef7b5c4",
}


def mpi_operator_manifest_url(version: str = MPI_OPERATOR_VERSION) -> str:
    """Where Kubeflow publishes the MPI Operator's release manifest for tag ``version``."""
    return (
        f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"
    )


MPI_OPERATOR_MANIFEST_URL = mpi_operator_manifest_url()


# --------------------------------------------------------------------------------------------------
# SageMaker HyperPod on EKS

#: HyperPod's health-monitoring agent: the registry account of each region AWS publishes the image in, and
#: the tag, as ``helm_chart/HyperPodHelmChart/charts/health-monitoring-agent/templates/_helpers.tpl`` of
#: github.com/aws/sagemaker-hyperpod-cli (commit 011ca92, 2026-06) maps them. A region missing here has no
#: published image: refused at synth.
HEALTH_MONITORING_AGENT_REGISTRIES: Mapping[str, str] = {
    "us-east-1": "767398015722",
    "us-west-2": "905418368575",
    "us-east-2": "851725546812",
    "us-west-1": "011528288828",
    "eu-central-1": "211125453373",
    "eu-north-1": "654654141839",
    "eu-west-1": "533267293120",
    "eu-west-2": "011528288831",
    "eu-south-2": "626887787726",
    "ap-northeast-1": "533267052152",
    "ap-south-1": "011528288864",
    "ap-southeast-1": "905418428165",
    "ap-southeast-2": "851725636348",
    "ap-southeast-3": "971422672635",
    "ap-southeast-4": "084375568333",
    "ca-central-1": "843976229209",
    "sa-east-1": "025066253954",
}
HEALTH_MONITORING_AGENT_REPOSITORY = "hyperpod-health-monitoring-agent"
HEALTH_MONITORING_AGENT_TAG = "1.0.1892.0_1.0.424.0"
#: The Amazon VPC CNI add-on installed: the EKS add-on version for Kubernetes 1.28 to 1.33 in "Assign IPs to
#: Pods with the Amazon VPC CNI" (https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html).
#: That page, as read for this pin, lists no version for 1.34 or 1.35: check ``aws eks describe-addon-versions
#: --addon-name vpc-cni --kubernetes-version 1.35`` before relying on it there (botocore's ``eks`` model
#: describes the API, not the versions).
HYPERPOD_VPC_CNI_VERSION = "v1.20.1-eksbuild.3"
#: SageMaker HyperPod task governance, the EKS add-on that runs HyperPod's Kueue and turns the
#: ``ClusterSchedulerConfig`` and each ``ComputeQuota`` into Kueue objects: the version "Upgrade the task
#: governance add-on" names for v1.6, which packages Kueue v0.19.2 and requires that no other Kueue is installed
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html).
#: EKS publishes no standard-support end for an add-on version.
HYPERPOD_TASK_GOVERNANCE_ADDON = "amazon-sagemaker-hyperpod-taskgovernance"
HYPERPOD_TASK_GOVERNANCE_VERSION = "v1.6.0-eksbuild.1"
#: The Kueue inside :data:`HYPERPOD_TASK_GOVERNANCE_VERSION` (the same page).
HYPERPOD_TASK_GOVERNANCE_KUEUE_VERSION = "0.19.2"
_TASK_GOVERNANCE_UPGRADE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade.html"


# --------------------------------------------------------------------------------------------------
# What the HyperPod Slurm lifecycle scripts install on the nodes

#: enroot, installed from its release packages (https://github.com/NVIDIA/enroot/releases): the default of
#: ``TC_ENROOT_VERSION`` in ``node_scripts/hyperpod/lib/enroot_pyxis.sh``.
ENROOT_VERSION = "3.5.0"
#: Pyxis, built on the node from its source tag (https://github.com/NVIDIA/pyxis/tags): the default of
#: ``TC_PYXIS_VERSION`` in ``node_scripts/hyperpod/lib/enroot_pyxis.sh``.
PYXIS_VERSION = "0.20.0"
#: NVIDIA's DCGM exporter, run in Docker by HyperPod's opt-in observability (``enable_observability``): the
#: default of ``TC_DCGM_EXPORTER_IMAGE`` in ``node_scripts/hyperpod/lib/observability.sh``.
HYPERPOD_DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04"


# --------------------------------------------------------------------------------------------------
# Every version-bearing default, in one table


@dataclass(frozen=True)
class VersionDefault:
    """A version the library chooses when the user does not: what it is, where it comes from and, where the
    vendor publishes one, when its standard support ends."""

    what: str
    version: str
    source: str
    standard_support_ends: date | None = None


_EKS_VERSIONS = "https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html"


#: Every Helm chart the stacks install, in one place (the version table and the chart tests read it).
HELM_CHARTS: tuple[HelmChartSpec, ...] = (
    NVIDIA_DEVICE_PLUGIN_CHART,
    EFA_DEVICE_PLUGIN_CHART,
    NEURON_HELM_CHART,
    GPU_OPERATOR_CHART,
    KUBE_PROMETHEUS_STACK_CHART,
    KUEUE_CHART,
    KUBEFLOW_TRAINER_CHART,
)
#: Every version-bearing default: Kubernetes (EKS and HyperPod on EKS), the kubectl layer, ParallelCluster, PCS's
#: Slurm, the Slurm in HyperPod's AMI, and each chart. No standard-support date where the vendor publishes none
#: (charts; ParallelCluster and PCS publish theirs per release on pages not read here).
VERSION_DEFAULTS: tuple[VersionDefault, ...] = (
    VersionDefault(
        "Kubernetes on Amazon EKS",
        EKS_KUBERNETES_VERSION,
        _EKS_VERSIONS,
        EKS_STANDARD_SUPPORT_ENDS[EKS_KUBERNETES_VERSION],
    ),
    VersionDefault(
        "Kubernetes of SageMaker HyperPod on EKS",
        HYPERPOD_EKS_KUBERNETES_VERSION,
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html",
        EKS_STANDARD_SUPPORT_ENDS[HYPERPOD_EKS_KUBERNETES_VERSION],
    ),
    VersionDefault(
        "kubectl Lambda layer (aws-cdk.lambda-layer-kubectl-v35)",
        KUBECTL_LAYER_VERSION,
        "https://pypi.org/project/aws-cdk.lambda-layer-kubectl-v35/",
    ),
    VersionDefault(
        "AWS ParallelCluster",
        PARALLELCLUSTER_VERSION,
        "https://github.com/aws/aws-parallelcluster/issues/7601",
    ),
    VersionDefault(
        "Slurm of AWS PCS clusters",
        PCS_SLURM_VERSION,
        "https://docs.aws.amazon.com/pcs/latest/userguide/slurm-versions.html",
    ),
    VersionDefault(
        "Slurm in SageMaker HyperPod's Slurm AMI",
        HYPERPOD_SLURM_AMI_SLURM,
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami.html",
    ),
    *(VersionDefault(f"Helm chart {spec.chart}", spec.version, spec.repository) for spec in HELM_CHARTS),
    VersionDefault(
        f"EKS add-on {HYPERPOD_TASK_GOVERNANCE_ADDON} (SageMaker HyperPod task governance)",
        HYPERPOD_TASK_GOVERNANCE_VERSION,
        _TASK_GOVERNANCE_UPGRADE,
    ),
    VersionDefault(
        "MPI Operator release manifest",
        MPI_OPERATOR_VERSION,
        "https://github.com/kubeflow/mpi-operator/releases",
    ),
)


# --------------------------------------------------------------------------------------------------
# What the node scripts download as root at boot, and how each is verified

#: How a boot-time download is verified: a SHA-256 the scripts check, a signed apt repository, or nothing but
#: TLS to a name and a tag (trusted on first use: whatever the server sends the first time is used).
PINNED = "pinned"
SIGNED = "signed"
TRUSTED_ON_FIRST_USE = "trusted on first use"

#: The pin option the HyperPod Slurm lifecycle scripts read (``lib/common.sh`` ``tc_download``).
_PIN_OPTION = (
    "`hyperpod: {download_sha256: {URL: SHA-256}}` (`LifecycleOptions(extra={'download_sha256': ...})`)"
)


@dataclass(frozen=True)
class BootDownload:
    """One download a node script makes as root at boot: what it is, the script (under ``training_clusters/``)
    and the exact line that fetches it, the URL pattern, the step that needs it, how it is verified today and
    how a user pins it. ``lifecycle_option``: the HyperPod ``LifecycleOptions`` flag that turns on the step
    making a download the environment file can pin (``download_sha256``), whose synth warns while it is unpinned.
    """

    what: str
    script: str
    call: str
    url: str
    step: str
    verified: str
    how: str
    pin: str
    lifecycle_option: str | None = None


#: Every download the node scripts make as root (HyperPod's lifecycle scripts, ParallelCluster's custom
#: actions, PCS user data). ParallelCluster's ``pyxis.sh`` and ``users.sh`` and PCS's user data download
#: nothing; packages installed with ``apt-get`` come from the AMI's distribution repositories, which apt
#: verifies by their signatures.
BOOT_DOWNLOADS: tuple[BootDownload, ...] = (
    BootDownload(
        "enroot's `enroot` and `enroot+caps` .debs",
        "node_scripts/hyperpod/lib/enroot_pyxis.sh",
        'tc_download "${TC_ENROOT_BASE_URL}/v${TC_ENROOT_VERSION}/${package}_${TC_ENROOT_VERSION}-1_${arch}.deb" \\',
        f"https://github.com/NVIDIA/enroot/releases/download/v{ENROOT_VERSION}/enroot[+caps]_{ENROOT_VERSION}-1_<arch>.deb",
        "HyperPod `enable_enroot_pyxis`, workers without enroot",
        TRUSTED_ON_FIRST_USE,
        "HTTPS by release tag; a warning in the node's log that nothing verified it",
        _PIN_OPTION,
        "enable_enroot_pyxis",
    ),
    BootDownload(
        "Pyxis' source",
        "node_scripts/hyperpod/lib/enroot_pyxis.sh",
        'tc_download "$TC_PYXIS_TARBALL_URL" "${build}.tar.gz"',
        f"https://github.com/NVIDIA/pyxis/archive/refs/tags/v{PYXIS_VERSION}.tar.gz",
        "HyperPod `enable_enroot_pyxis`, nodes without `spank_pyxis.so`",
        TRUSTED_ON_FIRST_USE,
        "HTTPS by source tag, built on the node; a warning in the node's log that nothing verified it",
        _PIN_OPTION,
        "enable_enroot_pyxis",
    ),
    BootDownload(
        "NVIDIA's container toolkit apt key",
        "node_scripts/hyperpod/lib/enroot_pyxis.sh",
        'if ! tc_download "$TC_NVIDIA_CONTAINER_KEY_URL" "$key"; then',
        "https://nvidia.github.io/libnvidia-container/gpgkey",
        "HyperPod `enable_enroot_pyxis`, GPU workers without `nvidia-container-cli`",
        TRUSTED_ON_FIRST_USE,
        "HTTPS; the packages then installed (`libnvidia-container-tools`) are checked by apt against this key",
        _PIN_OPTION,
        "enable_enroot_pyxis",
    ),
    BootDownload(
        "Slurm's source, to build `pam_slurm_adopt.so`",
        "node_scripts/hyperpod/lib/pam_slurm_adopt.sh",
        'tc_download "${TC_SLURM_SOURCE_URL}/slurm-${version}.tar.bz2" "${TC_PAM_BUILD_DIR}/slurm-${version}.tar.bz2"',
        "https://download.schedmd.com/slurm/slurm-<installed version>.tar.bz2",
        "HyperPod `enable_pam_slurm_adopt`, only on an AMI without the module (the AMI's own is used first)",
        TRUSTED_ON_FIRST_USE,
        "HTTPS by version; a warning in the node's log that nothing verified it",
        _PIN_OPTION,
        "enable_pam_slurm_adopt",
    ),
    BootDownload(
        "Amazon RDS certificate bundle",
        "node_scripts/hyperpod/lib/accounting.sh",
        "if ! answer=\"$(curl --fail --silent --show-error --location --proto '=https,file' --proto-redir '=https' \\",
        "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem",
        "HyperPod `accounting.mode: external`, controller",
        TRUSTED_ON_FIRST_USE,
        "HTTPS from AWS; checked to hold PEM certificates and nothing else",
        "none in the environment file (the scripts' `TC_RDS_CA_BUNDLE_URL` takes a `file://` URL)",
    ),
    BootDownload(
        "NVIDIA's DCGM exporter image",
        "node_scripts/hyperpod/lib/observability.sh",
        'docker run --detach --name "$TC_DCGM_EXPORTER_NAME" --restart unless-stopped \\',
        HYPERPOD_DCGM_EXPORTER_IMAGE,
        "HyperPod `enable_observability`, GPU nodes with Docker",
        TRUSTED_ON_FIRST_USE,
        "pulled by tag from nvcr.io over TLS",
        "none in the environment file (the scripts' `TC_DCGM_EXPORTER_IMAGE` takes an `image@sha256:` reference)",
    ),
    BootDownload(
        "Distribution packages (`apt-get install`)",
        "node_scripts/hyperpod/lib/common.sh",
        "",
        "the AMI's apt sources",
        "every step that installs a package",
        SIGNED,
        "apt checks each repository's signed Release file and each package's hash",
        "not needed",
    ),
)


def render_boot_downloads() -> str:
    """``docs/downloads.md``: :data:`BOOT_DOWNLOADS` as a Markdown page."""
    lines = [
        "# What the nodes download as root at boot",
        "",
        "Generated from `training_clusters.model.releases.BOOT_DOWNLOADS` (a test keeps them equal). *Pinned*: a",
        "SHA-256 the scripts check; *signed*: a signed apt repository; *trusted on first use*: HTTPS to a name",
        "and a tag, nothing checks the bytes (a release's files can be replaced under the same tag). A synth",
        "warns (`training-clusters:unpinned-download`) when a file enables a step that makes an unpinned one.",
        "A pinned download with other bytes is deleted and fails its step with one line.",
        "",
        "| What | URL | Needed by | Verified | How | How to pin it |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {d.what} | `{d.url}` | {d.step} | {d.verified} | {d.how} | {d.pin} |" for d in BOOT_DOWNLOADS
    ]
    return "\n".join(lines) + "\n"
