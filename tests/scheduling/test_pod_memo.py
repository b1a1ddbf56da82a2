"""pod_info's memo of parsed parts (resources, node selector and affinity, spread, tolerations):
pods of one ReplicaSet share their template's parse, a pod that differs from its template gets its
own, and a memoized parse is the fresh one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy_core.scheduling import pod as pod_module
from karpy_core.scheduling.pod import PodInfo, effective_requests, pod_info
from karpy_core.scheduling.requirements import Requirement


def _rs_pod(name: str, *, cpu: str = "500m", zone_spread: bool = True, anti_key: str = "kubernetes.io/hostname",
            labels: dict[str, str] | None = None, match_label_keys: bool = False) -> dict[str, Any]:
    """A pod of ReplicaSet ``web-5d8f`` (same owner uid, same pod-template-hash), built as a new
    dict each time, as the API server serves each pod."""
    sel = {"matchLabels": {"app": "web"}}
    spread: dict[str, Any] = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                              "labelSelector": sel}
    if match_label_keys:
        spread["matchLabelKeys"] = ["pod-template-hash"]
    spec: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                                        "values": ["zone-a"]}]}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": anti_key, "labelSelector": sel}]},
        },
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
    }
    if zone_spread:
        spec["topologySpreadConstraints"] = [spread]
    return {"metadata": {"name": name, "namespace": "shop", "labels": labels or {"app": "web", "pod-template-hash": "5d8f"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f", "uid": "rs-uid-1", "controller": True}]},
            "spec": spec, "status": {"phase": "Running"}}


def _fresh(pod: dict[str, Any]) -> PodInfo:
    """The parse with every memo emptied first (what pod_info gave before it memoized)."""
    for memo in pod_module.MEMOS:
        memo.clear()
    return pod_info(pod)


def _same(a: PodInfo, b: PodInfo) -> None:
    assert a.requests == b.requests
    assert [list(t) for t in a.requirement_terms] == [list(t) for t in b.requirement_terms]
    assert [list(t) for t in a.preferred_node_terms] == [list(t) for t in b.preferred_node_terms]
    assert (a.tolerations, a.spread, a.affinity, a.preferred_affinity, a.unsupported, a.host_ports) == (
        b.tolerations, b.spread, b.affinity, b.preferred_affinity, b.unsupported, b.host_ports)
    assert a.signature() == b.signature()


def test_two_pods_of_one_replicaset_with_different_requests_keep_their_own() -> None:
    """A VPA sets requests per pod: the second pod's template-equal rest is shared, its requests are its own."""
    first = pod_info(_rs_pod("web-1", cpu="500m"))
    second = pod_info(_rs_pod("web-2", cpu="1500m"))
    again = pod_info(_rs_pod("web-3", cpu="500m"))
    assert (first.requests["cpu"], second.requests["cpu"], again.requests["cpu"]) == (500, 1500, 500)
    assert first.spread == second.spread and first.affinity == second.affinity
    assert first.signature() != second.signature() and first.signature() == again.signature()
    _same(second, _fresh(_rs_pod("web-2", cpu="1500m")))


def test_two_pods_of_one_replicaset_with_different_affinity_and_spread_keep_their_own() -> None:
    """A webhook changed one pod's anti-affinity key and dropped its spread: same owner, same hash, other rules."""
    first = pod_info(_rs_pod("web-1"))
    second = pod_info(_rs_pod("web-2", zone_spread=False, anti_key="topology.kubernetes.io/zone"))
    assert [t.key for t in first.affinity] == ["kubernetes.io/hostname"]
    assert [t.key for t in second.affinity] == ["topology.kubernetes.io/zone"]
    assert len(first.spread) == 1 and second.spread == ()
    _same(second, _fresh(_rs_pod("web-2", zone_spread=False, anti_key="topology.kubernetes.io/zone")))


def test_match_label_keys_read_each_pods_labels() -> None:
    """Same template text, other labels: with matchLabelKeys the selector folds in the pod's own value."""
    a = pod_info(_rs_pod("web-1", match_label_keys=True))
    b = pod_info(_rs_pod("web-2", match_label_keys=True, labels={"app": "web", "pod-template-hash": "77aa"}))
    assert '"5d8f"' in a.spread[0].selector and '"77aa"' in b.spread[0].selector
    _same(b, _fresh(_rs_pod("web-2", match_label_keys=True, labels={"app": "web", "pod-template-hash": "77aa"})))


def test_a_memoized_parse_is_the_fresh_parse_and_owns_what_it_may_change() -> None:
    """Every part of a memo hit equals a fresh parse; requests and requirement terms are the pod's
    own objects (narrowing one pod's terms in place, or its requests, leaves the next pod's alone)."""
    first = pod_info(_rs_pod("web-1"))
    first.requirement_terms[0].add(Requirement.new("topology.kubernetes.io/zone", "In", ["zone-b"]))
    first.requests["cpu"] = 1
    hit = pod_info(_rs_pod("web-2"))
    _same(hit, _fresh(_rs_pod("web-2")))
    assert "topology.kubernetes.io/zone" not in hit.requirement_terms[0]
    assert hit.requests["cpu"] == 500
    assert hit.requirement_terms[0] is not first.requirement_terms[0]


def test_errors_are_raised_on_every_parse_and_not_memoized() -> None:
    bad = _rs_pod("web-1", cpu="lots")
    for _ in range(2):
        with pytest.raises(ValueError, match="lots"):
            pod_info(copy.deepcopy(bad))
    weight = _rs_pod("web-2")
    weight["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] = "heavy"
    for _ in range(2):
        with pytest.raises(ValueError, match="heavy"):
            pod_info(copy.deepcopy(weight))
    assert pod_info(_rs_pod("web-3")).requests["cpu"] == 500


def test_effective_requests_memo_returns_a_copy() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}}]}
    one = effective_requests(spec)
    one["cpu"] = 0
    assert effective_requests(copy.deepcopy(spec)) == {"cpu": 250, "memory": 2**30, "pods": 1}


def test_a_memo_empties_itself_when_full() -> None:
    memo = pod_module._Memo(cap=2)
    memo.put("a", 1)
    memo.put("b", 2)
    memo.put("c", 3)
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (None, None, 3)
