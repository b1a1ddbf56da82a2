"""The typed NodeClaim a plan becomes (``planned_nodeclaim``, Karpenter's ``ToNodeClaim``) against
the dict the provisioner built from the raw NodePool before it (kept below, verbatim, as the
reference), field by field, on the example NodePools and the test helpers' ones.

The serialised claim differs from the old dict in one way only, Go ``omitempty`` behaviour: empty
``taints``/``startupTaints`` lists are left out. (A ``nodeClassRef.group`` written with a version,
once read as the group alone, is refused since val48, as Karpenter's CRD refuses it.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.apis.hashing import HASH_VERSION, nodepool_hash
from karpy_core.apis.labels import (
    ANNOTATION_MIN_VALUES_RELAXED,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    ANNOTATION_NOMINATED_PODS,
    LABEL_NODEPOOL,
    nodeclass_label_key,
)
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan, planned_nodeclaim
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.resources import format_resource_list
from karpy_core.scheduling.scheduler import PlannedNodeClaim, Scheduler
from karpy_core.scheduling.template import template_from_nodepool
from karpy_core.state.views import NodeClaimView, NodePoolView
from tests.scheduling.helpers import nodepool as helper_nodepool
from tests.scheduling.helpers import pod

REPO = Path(__file__).resolve().parents[2]


def old_nodeclaim_dict(plan: PlannedNodeClaim, nodepool: NodePoolView | None = None) -> dict[str, Any]:
    """provisioner.nodeclaim_from_plan as it was before the typed NodeClaim (commit eb367a7)."""
    np_obj = nodepool.raw if nodepool is not None else plan.template.raw
    meta = np_obj.get("metadata") or {}
    tmpl = (np_obj.get("spec") or {}).get("template") or {}
    tmeta = tmpl.get("metadata") or {}
    tspec = tmpl.get("spec") or {}
    labels = dict(tmeta.get("labels") or {})
    labels[LABEL_NODEPOOL] = plan.nodepool
    ref = tspec.get("nodeClassRef") or {}
    if ref.get("group") and ref.get("kind") and ref.get("name"):
        labels[nodeclass_label_key(str(ref["group"]), str(ref["kind"]))] = str(ref["name"])
    annotations = dict(tmeta.get("annotations") or {})
    annotations[ANNOTATION_NODEPOOL_HASH] = nodepool.hash if nodepool is not None else nodepool_hash(np_obj)
    annotations[ANNOTATION_NODEPOOL_HASH_VERSION] = HASH_VERSION
    if plan.min_values_relaxed:
        annotations[ANNOTATION_MIN_VALUES_RELAXED] = "true"
    if plan.pods:
        annotations[ANNOTATION_NOMINATED_PODS] = ",".join(sorted({p.key for p in plan.pods}))
    spec: dict[str, Any] = {
        "requirements": plan.spec_requirements(),
        "resources": {"requests": format_resource_list(plan.requests)},
        "nodeClassRef": dict(tspec.get("nodeClassRef") or {}),
    }
    for key in ("taints", "startupTaints", "expireAfter", "terminationGracePeriod"):
        if tspec.get(key) is not None:
            spec[key] = tspec[key]
    spec.setdefault("expireAfter", "720h")
    owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": plan.nodepool, "blockOwnerDeletion": True}
    if meta.get("uid"):
        owner["uid"] = meta["uid"]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"generateName": f"{plan.nodepool}-", "labels": labels, "annotations": annotations,
                         "ownerReferences": [owner]},
            "spec": spec}


def example_nodepools() -> list[tuple[str, dict[str, Any]]]:
    pools = []
    for path in sorted((REPO / "examples" / "nodepools").glob("*.yaml")):
        text = path.read_text(encoding="utf-8").replace("${CLUSTER_NAME}", "demo")
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and doc.get("kind") == "NodePool":
                pools.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return pools


def helper_pools() -> list[tuple[str, dict[str, Any]]]:
    tainted = helper_nodepool("tainted", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
                              startup_taints=[{"key": "cni", "effect": "NoSchedule"}], labels={"team": "a"})
    tainted["metadata"]["uid"] = "uid-tainted"
    tainted["spec"]["template"]["metadata"]["annotations"] = {"example.com/owner": "team-a"}
    tainted["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h"
    tainted["spec"]["template"]["spec"]["expireAfter"] = "Never"
    return [("helper:default", helper_nodepool()), ("helper:tainted", tainted)]


POOLS = example_nodepools() + helper_pools()


def plan_for(pool_obj: dict[str, Any]) -> PlannedNodeClaim | None:
    """One planned NodeClaim of ``pool_obj`` for two small pods that tolerate everything, or None
    when the simulated catalog has nothing for it (a Windows or GPU-only pool)."""
    provider = load_provider("simulated", {})
    view = NodePoolView.of(pool_obj)
    assert not view.error, view.error
    types = asyncio.run(provider.get_instance_types(view.model))
    pods = [pod_info(pod(f"p{i}", "500m", "512Mi", tolerations=[{"operator": "Exists"}])) for i in range(2)]
    results = Scheduler([template_from_nodepool(pool_obj, types)], [], []).solve(pods)
    return results.new_claims[0] if results.new_claims else None


def expected_from_old(old: dict[str, Any]) -> dict[str, Any]:
    """The old dict with the documented difference applied."""
    spec = dict(old["spec"])
    for key in ("taints", "startupTaints"):
        if spec.get(key) == []:
            del spec[key]
    return {**old, "spec": spec}


@pytest.mark.parametrize(("name", "pool_obj"), POOLS, ids=[n for n, _ in POOLS])
def test_typed_nodeclaim_matches_the_old_dict_field_by_field(name: str, pool_obj: dict[str, Any]) -> None:
    plan = plan_for(pool_obj)
    if plan is None:
        pytest.skip(f"{name}: no instance type of the simulated catalog fits")
    view = NodePoolView.of(pool_obj)
    for pool in (view, None):  # with the snapshot's view, and from the plan's template alone
        old = expected_from_old(old_nodeclaim_dict(plan, pool))
        new = nodeclaim_from_plan(plan, pool)
        assert new.keys() == old.keys()
        for section in ("apiVersion", "kind"):
            assert new[section] == old[section]
        assert new["metadata"].keys() == old["metadata"].keys()
        for key in old["metadata"]:
            assert new["metadata"][key] == old["metadata"][key], (name, key)
        assert new["spec"].keys() == old["spec"].keys(), name
        for key in old["spec"]:
            assert new["spec"][key] == old["spec"][key], (name, key)
        # what the lifecycle controller hands the provider reads the same from either
        assert NodeClaimView.of(new).model == NodeClaimView.of(old).model


def test_planned_nodeclaim_is_typed_and_carries_karpenters_template_fields() -> None:
    _, pool_obj = POOLS[-1]
    plan = plan_for(pool_obj)
    assert plan is not None
    claim = planned_nodeclaim(plan, NodePoolView.of(pool_obj))
    assert isinstance(claim, NodeClaim)
    assert claim.metadata.generate_name == "tainted-"
    assert claim.metadata.labels["team"] == "a" and claim.metadata.labels[LABEL_NODEPOOL] == "tainted"
    assert claim.metadata.labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert claim.metadata.annotations["example.com/owner"] == "team-a"
    assert claim.metadata.annotations[ANNOTATION_NODEPOOL_HASH] == nodepool_hash(pool_obj)
    assert claim.metadata.annotations[ANNOTATION_NOMINATED_PODS] == "default/p0,default/p1"
    owner = claim.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.block_owner_deletion) == ("NodePool", "tainted", "uid-tainted", True)
    assert [(t.key, t.value, t.effect) for t in claim.spec.taints] == [("team", "a", "NoSchedule")]
    assert [(t.key, t.effect) for t in claim.spec.startup_taints] == [("cni", "NoSchedule")]
    assert (claim.spec.expire_after, claim.spec.termination_grace_period) == ("Never", "1h")
    assert claim.spec.resources.requests == format_resource_list(plan.requests)
