"""Every ```python block of README.md and of the guide pages under docs/ runs as written and builds what its
section says it builds.

Blocks are named by the heading they sit under (on their page). Each runs with ``exec`` in a fresh namespace, inside its own
temporary working directory (examples may write files), except a block preceded by
``<!-- continues the example above -->``: it runs after the python block before it, in that block's
namespace (a continuation stays on its page). A block that is deliberately not runnable is preceded by ``<!-- not-tested: reason -->``; at most
:data:`MAX_NOT_TESTED` may be.

A chain of blocks (an example and its continuations) is executed once and its app synthesized once: CDK
refuses to add constructs after a synth. Each block's section then has a check below that looks at the
result, mostly the template of the ``stack`` the example built.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3

from training_clusters.gates.compliance import Finding, add_compliance_checks, synth_with_checks

from .assertions import text, values_of
from .readme.blocks import ROOT, pages

CONTINUES = "<!-- continues the example above -->"
NOT_TESTED = re.compile(r"^<!--\s*not-tested:\s*(?P<reason>.*?)\s*-->$")
MAX_NOT_TESTED = 2
ADMIN_ROLE = "arn:aws:iam::111122223333:role/Admin"


# --------------------------------------------------------------------------------------------------
# reading the pages


@dataclass(frozen=True)
class Block:
    """One fenced python block of a page (README.md or a guide page)."""

    index: int
    page: str
    line: int
    headings: tuple[str, ...]
    code: str
    continues: bool
    not_tested: str | None

    @property
    def heading(self) -> str:
        return self.headings[-1]

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.heading).strip("-")[:40]
        return f"{self.index:02d}-{slug}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def read_page(
    text: str, page: str = "README.md", first_index: int = 0
) -> tuple[list[Block], list[tuple[str, ...]]]:
    """The python blocks and every heading path (outside code fences) of a Markdown text; blocks are numbered
    from ``first_index``."""
    blocks: list[Block] = []
    headings: list[tuple[str, ...]] = []
    path: list[str] = []
    fence: tuple[int, str, str] | None = None  # (first line, language, marker line before it)
    body: list[str] = []
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.startswith("```"):
                start, language, marker = fence
                if language == "python":
                    found = NOT_TESTED.match(marker)
                    blocks.append(
                        Block(
                            index=first_index + len(blocks),
                            page=page,
                            line=start + 1,
                            headings=tuple(path),
                            code="\n".join(body) + "\n",
                            continues=marker == CONTINUES,
                            not_tested=found["reason"] if found else None,
                        )
                    )
                fence, body = None, []
            else:
                body.append(line)
            continue
        if line.startswith("```"):
            fence = (number, line[3:].strip(), previous)
        elif heading := re.match(r"^(#{1,6}) (.+)$", line):
            level = len(heading[1])
            path = [*path[: level - 1], *[""] * (level - 1 - len(path)), heading[2].strip()]
            headings.append(tuple(path))
        if line.strip():
            previous = line.strip()
    return blocks, headings


def read_pages() -> list[Block]:
    """The python blocks of every page, numbered across pages in page order."""
    found: list[Block] = []
    for path in pages():
        blocks, _ = read_page(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix(), len(found))
        found.extend(blocks)
    return found


BLOCKS = read_pages()
TESTED = [b for b in BLOCKS if b.not_tested is None]


# --------------------------------------------------------------------------------------------------
# running examples


@dataclass
class Run:
    """What one block left behind: its namespace, working directory and (lazily) its stack's template."""

    block: Block
    namespace: dict[str, Any]
    workdir: Path
    examples: Examples
    findings: list[Finding] = field(default_factory=list)
    _template: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def stack(self) -> cdk.Stack:
        stack = self.namespace.get("stack")
        assert isinstance(stack, cdk.Stack), f"{self.block.where}: the example defines no `stack`"
        return stack

    @property
    def template(self) -> dict[str, Any]:
        """The stack's template, as its chain's synth wrote it into the app's cloud assembly."""
        if self._template is None:
            stage = cdk.Stage.of(self.stack)
            assert stage is not None
            path = Path(stage.outdir) / self.stack.template_file
            self._template = json.loads(path.read_text())
        return self._template

    def resolve(self, value: Any) -> Any:
        return self.stack.resolve(value)

    def ref(self, construct: Any) -> str:
        """The logical id of an L1, or of an L2's default child."""
        element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
        logical_id: str = self.stack.resolve(self.stack.get_logical_id(element))
        return logical_id

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}


@dataclass
class Chain:
    runs: dict[int, Run]
    failed: Block | None = None
    error: BaseException | None = None
    synth_error: BaseException | None = None


class Examples:
    """Runs each chain of blocks once, in a working directory of its own, and remembers the result."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._chains: dict[int, Chain] = {}
        self.apps: list[cdk.App] = []

    def run(self, block: Block) -> Run:
        head = chain_head(block)
        if head.index not in self._chains:
            self._chains[head.index] = self._execute(head)
        chain = self._chains[head.index]
        if chain.failed is not None and block.index >= chain.failed.index:
            if block is chain.failed:
                assert chain.error is not None
                raise chain.error
            pytest.fail(f"the example this block continues failed ({chain.failed.where})")
        if chain.synth_error is not None:
            raise chain.synth_error
        return chain.runs[block.index]

    def execute(
        self,
        code: str,
        namespace: dict[str, Any],
        workdir: Path,
        first_line: int = 1,
        page: str = "README.md",
    ) -> None:
        """Run ``code`` as if it stood at ``first_line`` of ``page``, so tracebacks point into the page."""
        with contextlib.chdir(workdir):
            exec(compile("\n" * (first_line - 1) + code, str(ROOT / page), "exec"), namespace)
        app = namespace.get("app")
        if isinstance(app, cdk.App) and app not in self.apps:
            self.apps.append(app)

    def _execute(self, head: Block) -> Chain:
        workdir = self._tmp.mktemp(head.id)
        chain = Chain(runs={})
        namespace: dict[str, Any] = {"__name__": "readme_example"}
        for block in [head, *continuations_of(head)]:
            namespace = dict(namespace)
            try:
                self.execute(block.code, namespace, workdir, block.line, block.page)
            except Exception as error:
                chain.failed, chain.error = block, error
                break
            chain.runs[block.index] = Run(block, namespace, workdir, self)
        app = namespace.get("app")
        if isinstance(app, cdk.App):
            # Once, after the whole chain: the same cdk-nag gate as the environments (a no-op for an app the
            # example synthesized itself: its cached assembly is returned).
            add_compliance_checks(app)
            try:
                _, findings = synth_with_checks(app)
            except Exception as error:
                chain.synth_error = error
                return chain
            for run in chain.runs.values():
                run.findings = findings
        return chain

    def remove_outdirs(self) -> None:
        """Delete the temporary cloud assemblies the examples' ``cdk.App()`` wrote (and nothing else)."""
        temp = Path(tempfile.gettempdir()).resolve()
        for app in self.apps:
            outdir = Path(app.outdir).resolve()
            if outdir.parent == temp and outdir.name.startswith("cdk.out"):
                shutil.rmtree(outdir, ignore_errors=True)


def chain_head(block: Block) -> Block:
    while block.continues:
        before = BLOCKS[block.index - 1] if block.index > 0 else None
        assert before is not None and before.page == block.page, (
            f"{block.where} continues, but no python block comes before it on its page"
        )
        block = before
    return block


def continuations_of(head: Block) -> Iterator[Block]:
    for block in BLOCKS[head.index + 1 :]:
        if not block.continues:
            return
        yield block


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Examples]:
    runner = Examples(tmp_path_factory)
    yield runner
    runner.remove_outdirs()


# --------------------------------------------------------------------------------------------------
# what each section's example must have built

Check = Callable[[Run], None]
CHECKS: dict[str, Check] = {}


def check(heading_prefix: str) -> Callable[[Check], Check]:
    """Register the check of the blocks under the heading that starts with ``heading_prefix``."""

    def register(function: Check) -> Check:
        CHECKS[heading_prefix] = function
        return function

    return register


def checks_for(block: Block) -> list[str]:
    return [prefix for prefix in CHECKS if block.heading.startswith(prefix)]


def get_att(logical_id: str, attribute: str = "GroupId") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


def allows(run: Run, target: Any, source: Any, port: int) -> bool:
    """Whether security group ``target`` admits ``source`` on TCP ``port`` (a separate ingress resource)."""
    wanted = (run.resolve(target.security_group_id), run.resolve(source.security_group_id))
    return any(
        (rule["Properties"]["GroupId"], rule["Properties"].get("SourceSecurityGroupId")) == wanted
        and rule["Properties"]["IpProtocol"] == "tcp"
        and rule["Properties"]["FromPort"] <= port <= rule["Properties"]["ToPort"]
        for rule in run.of_type("AWS::EC2::SecurityGroupIngress").values()
    )


def assert_closed_to_the_internet(run: Run) -> None:
    """docs/security.md's first defaults: no ingress from 0.0.0.0/0 or ::/0, no subnet hands out public IPs."""
    rules = [r["Properties"] for r in run.of_type("AWS::EC2::SecurityGroupIngress").values()]
    for group in run.of_type("AWS::EC2::SecurityGroup").values():
        rules += group["Properties"].get("SecurityGroupIngress", [])
    open_rules = [r for r in rules if r.get("CidrIp") == "0.0.0.0/0" or r.get("CidrIpv6") == "::/0"]
    assert open_rules == []
    subnets = run.of_type("AWS::EC2::Subnet").values()
    assert not any(s["Properties"].get("MapPublicIpOnLaunch") for s in subnets)


@check("The constructs in your own app")
def _readme_cluster(run: Run) -> None:
    """README's example: one stack, a ParallelCluster mounting the file system it may reach, nothing else open."""
    ns = run.namespace
    assert [s.stack_name for s in ns["app"].synth().stacks] == ["Training"]
    (fsx,) = run.of_type("AWS::FSx::FileSystem").values()
    assert fsx["DeletionPolicy"] == "Retain"  # "stateful resources are kept when the stack is destroyed"
    lustre = fsx["Properties"]["LustreConfiguration"]
    assert (lustre["DeploymentType"], fsx["Properties"]["StorageCapacity"]) == ("SCRATCH_2", 1200)
    config = ns["cluster"].concrete_configuration()
    (storage,) = config["SharedStorage"]
    assert (storage["MountDir"], storage["StorageType"]) == ("/fsx", "FsxLustre")
    (queue,) = config["Scheduling"]["SlurmQueues"]
    (resource,) = queue["ComputeResources"]
    assert (queue["Name"], resource["InstanceType"], resource["MaxCount"]) == ("efa", "c5n.18xlarge", 4)
    assert resource["Efa"]["Enabled"] is True
    # fs.allow_clients_from(cluster): Lustre's port 988 opened to the cluster's nodes (and the file servers
    # to each other), to nothing else
    fs_group = run.resolve(ns["fs"].connections.security_groups[0].security_group_id)
    cluster_groups = [run.resolve(g.security_group_id) for g in ns["cluster"].connections.security_groups]
    to_lustre = [
        r["Properties"]
        for r in run.of_type("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == fs_group
        and r["Properties"]["FromPort"] <= 988 <= r["Properties"]["ToPort"]
    ]
    sources = {json.dumps(rule["SourceSecurityGroupId"], sort_keys=True) for rule in to_lustre}
    assert sources == {
        json.dumps(group, sort_keys=True) for group in [fs_group, *cluster_groups]
    }  # and the servers


@check("Gate your own app's CI on cdk-nag")
def _gate(run: Run) -> None:
    # The example's own app.synth() passed the gate; the cached assembly holds the network.
    assembly = run.namespace["app"].synth()
    assert run.of_type("AWS::EC2::VPC")
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    assert [r for r in report["pluginReports"] if r.get("violations")] == []
    # The gate is real: the same app plus a bucket without access logs must fail its synth.
    broken = run.block.code.replace(
        "add_compliance_checks(app)", 'aws_s3.Bucket(stack, "Unlogged")\nadd_compliance_checks(app)', 1
    )
    assert broken != run.block.code
    namespace: dict[str, Any] = {"aws_s3": aws_s3}
    with pytest.raises(RuntimeError, match=r"ValidationFailed"):
        run.examples.execute(broken, namespace, run.workdir, run.block.line, run.block.page)


@check("Use the constructs in your own app")
def _own_app(run: Run) -> None:
    ns = run.namespace
    assembly = ns["app"].synth()  # the example's own synth, cached
    templates = {s.stack_name: s.template for s in assembly.stacks}
    assert set(templates) == {"Network", "Storage", "HyperPod", "Pcluster", "Eks"}
    # the shared storage stack imports only the network's values: no cluster's group, so no cycle
    imports = {text(name) for name in values_of(templates["Storage"], "Fn::ImportValue")}
    assert imports and {name.split(":")[0] for name in imports} == {"Network"}, imports
    for name in ("HyperPod", "Pcluster", "Eks"):
        rules = [
            r["Properties"]
            for r in templates[name]["Resources"].values()
            if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        ]
        assert any(r.get("FromPort") == 988 for r in rules), (
            f"{name}: the Lustre rule lives in the client's stack"
        )
    (fsx,) = [r for r in templates["Storage"]["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert fsx["Properties"]["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"  # given as a string
    assert fsx["DeletionPolicy"] == "Retain"
    (group,) = [
        g
        for r in templates["HyperPod"]["Resources"].values()
        if r["Type"] == "AWS::SageMaker::Cluster"
        for g in r["Properties"]["InstanceGroups"]
        if g["InstanceGroupName"] == "workers"
    ]
    assert group["InstanceType"] == "ml.p5.48xlarge"
    assert group["TrainingPlanArn"] == "arn:aws:sagemaker:us-east-1:111122223333:training-plan/p5-plan"
    # GpuEksCluster installed the device plugins its p5 EFA nodegroup needs, scheduled on p5 only
    charts = {
        r["Properties"]["Chart"]: json.loads(r["Properties"]["Values"])
        for r in templates["Eks"]["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    assert set(charts) == {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"}
    assert charts["aws-efa-k8s-device-plugin"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]
    (term,) = charts["nvidia-device-plugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["p5.48xlarge"]
    assert [f for f in run.findings if f.plugin.startswith("AwsSolutions")] == []
    for template in templates.values():
        for rule in (
            r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        ):
            assert rule.get("CidrIp") != "0.0.0.0/0"


@check("Instance catalogue")
def _catalogue(run: Run) -> None:
    p5 = run.namespace["p5"]
    assert (p5.max_efa_interfaces, p5.gpudirect_rdma, p5.quota_family.quota_code) == (32, True, "L-417A185B")
    assert run.namespace["lookup"]("ml.p5.48xlarge") == p5


# --------------------------------------------------------------------------------------------------
# tests


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(
            b, id=b.id, marks=[pytest.mark.skip(reason=f"not-tested: {b.not_tested}")] if b.not_tested else []
        )
        for b in BLOCKS
    ],
)
def test_readme_example_runs_and_builds_what_it_says(block: Block, examples: Examples) -> None:
    matching = checks_for(block)
    assert len(matching) == 1, (
        f"{block.where} under '{block.heading}' needs exactly one check in this file, found {matching}"
    )
    run = examples.run(block)
    CHECKS[matching[0]](run)
    if "stack" in run.namespace:
        assert_closed_to_the_internet(run)
        nag = [str(f) for f in run.findings if f.plugin.startswith("AwsSolutions")]
        assert nag == [], "unacknowledged cdk-nag findings"


def test_every_check_has_its_readme_example() -> None:
    unused = [prefix for prefix in CHECKS if not any(b.heading.startswith(prefix) for b in TESTED)]
    assert unused == [], "checks whose example is gone from the pages"


def test_the_constructs_guide_names_every_public_construct() -> None:
    from constructs import Construct

    import training_clusters.constructs as package

    public = {
        name
        for name in package.__all__
        if isinstance(getattr(package, name), type) and issubclass(getattr(package, name), Construct)
    }
    text = (ROOT / "docs" / "constructs.md").read_text()
    listed = set(re.findall(r"`(\w+)`", text[text.index("The constructs:") :].split("\n\n")[0]))
    assert public - {"ReleaseManifest"} <= listed, "constructs docs/constructs.md does not name"
    assert listed <= public, "names in docs/constructs.md's construct list that are not public constructs"


def test_continuations_follow_a_tested_example() -> None:
    for block in BLOCKS:
        if block.continues:
            before = BLOCKS[block.index - 1]
            assert block.index > 0 and before.page == block.page and before.not_tested is None, block.where


def test_at_most_two_blocks_are_not_tested_and_each_says_why() -> None:
    skipped = [b for b in BLOCKS if b.not_tested is not None]
    assert len(skipped) <= MAX_NOT_TESTED, [b.where for b in skipped]
    assert all(b.not_tested for b in skipped)


def test_the_reader_finds_fences_and_markers() -> None:
    blocks, headings = read_page(
        "# A\n## B\n```bash\n# not a heading\n```\n<!-- not-tested: needs credentials -->\n"
        "```python\nx = 1\n```\n### C\n```python\ny = 2\n```\n\n" + CONTINUES + "\n```python\nz = y\n```\n",
        "docs/guide.md",
        5,
    )
    assert headings == [("A",), ("A", "B"), ("A", "B", "C")]
    assert [(b.index, b.where, b.headings, b.code, b.continues, b.not_tested) for b in blocks] == [
        (5, "docs/guide.md:8", ("A", "B"), "x = 1\n", False, "needs credentials"),
        (6, "docs/guide.md:12", ("A", "B", "C"), "y = 2\n", False, None),
        (7, "docs/guide.md:17", ("A", "B", "C"), "z = y\n", True, None),
    ]


def test_the_examples_are_read_from_the_readme_and_the_guide_pages() -> None:
    assert {(b.page, b.heading) for b in BLOCKS} >= {
        ("README.md", "The constructs in your own app"),
        ("docs/constructs.md", "Use the constructs in your own app"),
        ("docs/constructs.md", "Gate your own app's CI on cdk-nag"),
        ("docs/constructs.md", "Instance catalogue"),
    }
    assert [b.index for b in BLOCKS] == list(range(len(BLOCKS)))
