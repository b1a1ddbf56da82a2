"""New-user trial 17 findings (issue 35) fixed here: a kind karpy models, under an API group it does
not know (``apiVersion: app/v1`` for a Deployment), was listed as "ignored (kind not modelled)" and
lost without a word, where kubectl refuses it; ``--explain`` of a large workload wrote counts
without thousands separators and a line listing every node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke_cli

TYPO = """apiVersion: app/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 2
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def test_a_modelled_kind_under_an_unknown_group_is_said(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(TYPO)
    said = (f"{path} doc 1 Deployment/inflate: apiVersion: karpy models Deployment in apps/v1, not app/v1: ignored "
            "(kubectl refuses it unless a CRD serves it); did you mean apps/v1?")
    validated = invoke_cli("validate", str(path))
    assert validated.exit_code == 0, validated.output
    assert f"ignored (kind not modelled in this apiVersion): app/v1 Deployment/inflate ({path} doc 1)" in validated.stdout
    assert f"warning: {said}" in validated.stdout
    from karpy_core.apis.loader import load_documents

    assert said in load_documents([path]).warnings


def test_an_unknown_kind_of_an_unknown_group_stays_quiet(tmp_path: Path) -> None:
    """A custom resource karpy does not model (cert-manager's Certificate) is ignored as before."""
    from karpy_core.apis.loader import load_documents

    path = tmp_path / "cert.yaml"
    path.write_text("apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: c}\nspec: {}\n")
    assert load_documents([path]).warnings == []


def test_explain_of_a_large_workload_writes_separators_and_a_short_last_line() -> None:
    """Trial 17: ``workload inflate, 20000 pods`` and ``+19980 more not shown (...108 nodes...)``, a
    3,256-character line."""
    from types import SimpleNamespace

    from karpy_core.cli import render_explain
    from karpy_core.sim.report import PodReport

    pods = [PodReport("default", f"inflate-x-{i:05d}", f"node-{i % 30:02d}", None, "inflate") for i in range(20_000)]
    nodes = [SimpleNamespace(name=f"node-{i:02d}", instance_type="m5.large", zone="z", capacity_type="on-demand", nodepool="d")
             for i in range(30)]
    lines = render_explain(SimpleNamespace(pods=pods, nodes=nodes, explanations={}), "inflate").splitlines()
    assert lines[0] == "default/inflate: workload inflate, 20,000 pods"
    assert lines[-1].startswith("+19,980 more not shown (666 on node-") and lines[-1].endswith(", +22 more nodes)")
    assert len(lines[-1]) < 200


def test_a_resource_the_nodepools_types_lack_is_said_of_the_nodepool() -> None:
    """Trial 17: ``no instance type offers resource nvidia.com/gpu`` where the catalog has GPU types
    and the NodePool's requirements left them out."""
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool
    from tests.scheduling.helpers import make_type, nodepool, pod

    res = Scheduler([template_from_nodepool(nodepool(), [make_type("m.large", 2, 8)])]).solve(
        [pod_info(pod("g", extra={"nvidia.com/gpu": "1"}))])
    assert res.errors["default/g"] == ("NodePool default: none of its instance types (those its requirements allow) offers "
                                       "resource nvidia.com/gpu")


def test_timeline_under_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    """Trial 17: ``--timeline FILE/x.png`` said ``directory FILE does not exist``."""
    from karpy_core.cli import _check_output_file
    from karpy_core.errors import ConfigurationError

    blocker = tmp_path / "noext"
    blocker.write_text("")
    with pytest.raises(ConfigurationError) as refused:
        _check_output_file("--timeline", str(blocker / "x.png"))
    assert str(refused.value) == f"--timeline {blocker}/x.png: directory {blocker} is a file, not a directory"


def test_a_resource_only_types_without_offerings_have_is_said_so() -> None:
    """Trial 18: a plugin listing its GPU type with no offering (no zone in common with the
    NodeClass) got "none of its instance types (those its requirements allow) offers resource
    nvidia.com/gpu", which reads as a requirements problem; the types that have the resource are
    named with why they are out. A NodePool that does not name zones keeps such a type in its
    table: there the reason named the largest type with an offering, which has no GPU."""
    from karpy_core.scheduling.infeasible import InfeasibleKind as K
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool
    from tests.scheduling.helpers import make_type, nodepool, pod

    gpu = {"nvidia.com/gpu": "1"}
    catalog = [make_type("m.large", 2, 8), make_type("g.xlarge", 4, 16, zones=(), extra={"nvidia.com/gpu": 1})]
    zoned = nodepool(requirements=[{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}])
    res = Scheduler([template_from_nodepool(zoned, catalog)]).solve([pod_info(pod("g", extra=gpu))])
    # trial 19: not "none of its instance types ... offers resource nvidia.com/gpu: those that do ...", self-contradictory
    assert res.errors["default/g"] == ("NodePool default: its instance types that offer resource nvidia.com/gpu (g.xlarge) "
                                       "have no offering (a zone and capacity type to launch in)")
    assert res.reasons["default/g"].pool("default").kinds == (K.NO_OFFERING,)
    res = Scheduler([template_from_nodepool(nodepool(), catalog)]).solve([pod_info(pod("g", extra=gpu))])
    assert res.errors["default/g"] == ("NodePool default: the instance types with room for the pod (g.xlarge) have no "
                                       "available offering")
    # with offerings, but left out by the NodePool's requirements
    catalog = [make_type("m.large", 2, 8), make_type("g.xlarge", 4, 16, arch="arm64", extra={"nvidia.com/gpu": 1})]
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    res = Scheduler([template_from_nodepool(pool, catalog)]).solve([pod_info(pod("g", extra=gpu))])
    assert res.errors["default/g"].endswith("offers resource nvidia.com/gpu: those that do (g.xlarge) are ruled out by "
                                            "its requirements")
