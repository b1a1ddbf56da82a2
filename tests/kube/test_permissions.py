"""The permission list (karpy_core.kube.permissions) and the request recorder, on the in-memory cluster."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, cast

import pytest

from karpy_core.errors import KubeAPIError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.permissions import (
    CLOUDS,
    PERMISSIONS,
    SCOPE_CLUSTER,
    SCOPE_KUBE_SYSTEM,
    SCOPE_RELEASE,
    RecordedRequest,
    RecordingKubeClient,
    Rule,
    permitted,
    rules_for,
)
from karpy_core.kube.port import KINDS, WatchEvent

VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
KAKAO_VALUES = {"credentials": {"secretName": "kc-creds"}, "sigKey": {"secretName": "kc-keys"}}


def test_every_permission_is_explained_and_well_formed() -> None:
    plurals = {info.plural: info.group for info in KINDS.values()}
    for p in PERMISSIONS:
        assert p.who.strip() and len(p.why) > 20, p
        assert set(p.verbs) <= VERBS and len(set(p.verbs)) == len(p.verbs), p
        assert p.scope in (SCOPE_CLUSTER, SCOPE_RELEASE, SCOPE_KUBE_SYSTEM), p
        base, _, sub = p.resource.partition("/")
        assert plurals.get(base) == p.group, f"{p.group}/{base} is not a kind karpy knows"
        assert sub in ("", "status", "eviction", "finalizers"), p
        assert "*" not in (p.group, p.resource, *p.verbs)


def test_rules_per_cloud() -> None:
    aws = rules_for("aws")
    assert Rule(SCOPE_CLUSTER, "", "pods", "delete") in aws
    assert Rule(SCOPE_CLUSTER, "karpenter.sh", "nodepools/finalizers", "update") in aws
    assert not [r for r in aws if r.group == "karpenter.kakaocloud.com" or r.resource == "secrets"]
    kakao = rules_for("kakaocloud", KAKAO_VALUES)
    assert Rule(SCOPE_RELEASE, "", "secrets", "get", ("kc-creds", "kc-keys")) in kakao
    assert Rule(SCOPE_KUBE_SYSTEM, "", "secrets", "create") in kakao
    assert not [r for r in kakao if r.group == "karpenter.k8s.aws"]
    with pytest.raises(ValueError, match=r"credentials\.secretName"):
        rules_for("kakaocloud")
    with pytest.raises(ValueError, match="cloud must be"):
        rules_for("simulated")


@pytest.mark.parametrize(
    ("req", "cloud", "allowed"),
    [
        (RecordedRequest("delete", "", "pods", "default", "web-1"), "aws", True),
        (RecordedRequest("create", "", "pods/binding", "default", "web-1"), "aws", False),
        (RecordedRequest("update", "coordination.k8s.io", "leases", "karpy", "lease"), "aws", True),
        (RecordedRequest("update", "coordination.k8s.io", "leases", "default", "lease"), "aws", False),  # Role: its namespace only
        (RecordedRequest("get", "", "secrets", "karpy", "kc-creds"), "kakaocloud", True),
        (RecordedRequest("get", "", "secrets", "karpy", "other"), "kakaocloud", False),  # resourceNames
        (RecordedRequest("list", "", "secrets", "karpy"), "kakaocloud", False),
        (RecordedRequest("create", "", "secrets", "kube-system"), "kakaocloud", True),
        (RecordedRequest("create", "", "secrets", "karpy"), "kakaocloud", False),
        (RecordedRequest("watch", "karpenter.k8s.aws", "ec2nodeclasses"), "kakaocloud", False),
    ],
)
def test_permitted_matches_like_the_rbac_authorizer(req: RecordedRequest, cloud: str, allowed: bool) -> None:
    assert permitted(req, cloud, "karpy", KAKAO_VALUES) is allowed


async def test_recorder_maps_calls_to_the_requests_the_authorizer_sees() -> None:
    cluster = InMemoryCluster()
    rec = RecordingKubeClient(cluster)
    await rec.create("NodePool", {"metadata": {"name": "pool"}, "spec": {}})
    await rec.create("NodeClaim", {"metadata": {"name": "nc", "ownerReferences": [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "pool", "blockOwnerDeletion": True}]}, "spec": {}})
    await rec.patch("NodeClaim", "nc", {"status": {"providerID": "x"}}, status=True)
    await rec.create("Node", {"metadata": {"name": "n1"}})
    await rec.patch("Node", "n1", {"metadata": {"ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "nc"}]}})
    await rec.create("Pod", {"metadata": {"name": "p", "namespace": "apps"}, "spec": {"nodeName": "n1"}})
    await rec.evict({"metadata": {"name": "p", "namespace": "apps"}})
    await rec.create("Lease", {"metadata": {"name": "l", "namespace": "karpy"}, "spec": {}})
    lease = await rec.get("Lease", "l", "karpy")
    await rec.replace("Lease", lease)
    await rec.list("Pod")
    with pytest.raises(KubeAPIError):
        await rec.get("Pod", "missing", "apps")
    got = [(r.verb, r.group, r.resource, r.namespace, r.name, r.status, r.implied) for r in rec.requests]
    assert got == [
        ("create", "karpenter.sh", "nodepools", "", "", 200, False),
        ("create", "karpenter.sh", "nodeclaims", "", "", 200, False),
        ("update", "karpenter.sh", "nodepools/finalizers", "", "pool", 200, True),  # blockOwnerDeletion
        ("patch", "karpenter.sh", "nodeclaims/status", "", "nc", 200, False),
        ("create", "", "nodes", "", "", 200, False),
        ("patch", "", "nodes", "", "n1", 200, False),
        ("delete", "", "nodes", "", "n1", 200, True),  # changing ownerReferences
        ("create", "", "pods", "apps", "", 200, False),
        ("create", "", "pods/eviction", "apps", "p", 200, False),
        ("create", "coordination.k8s.io", "leases", "karpy", "", 200, False),
        ("get", "coordination.k8s.io", "leases", "karpy", "l", 200, False),
        ("update", "coordination.k8s.io", "leases", "karpy", "l", 200, False),
        ("list", "", "pods", "", "", 200, False),
        ("get", "", "pods", "apps", "missing", 404, False),
    ]


class _Forbidding:
    """A KubeClient whose every call is refused as RBAC refuses it."""

    def _deny(self, *_: Any, **__: Any) -> Any:
        raise KubeAPIError('pods is forbidden: User "system:serviceaccount:karpy:karpy" cannot delete', status=403,
                           reason="Forbidden")

    async def delete(self, *a: Any, **kw: Any) -> None:
        self._deny()

    async def watch(self, kind: str) -> Any:
        self._deny()
        yield  # pragma: no cover - makes this an async generator


async def test_recorder_keeps_403s_and_reraises() -> None:
    rec = RecordingKubeClient(_Forbidding())  # type: ignore[arg-type]
    with pytest.raises(KubeAPIError):
        await rec.delete("Pod", "web-1", "default")
    with pytest.raises(KubeAPIError):
        async for _ in rec.watch("PodDisruptionBudget"):
            pass
    assert [(r.verb, r.resource, r.status) for r in rec.denied()] == [
        ("delete", "pods", 403), ("list", "poddisruptionbudgets", 403)]


async def test_recorder_records_a_watch_as_list_then_watch() -> None:
    cluster = InMemoryCluster()
    await cluster.create("Node", {"metadata": {"name": "n1"}})
    rec = RecordingKubeClient(cluster)
    seen = []

    async def consume() -> None:
        # watch is an async generator annotated AsyncIterator (no aclose in its type)
        async with contextlib.aclosing(cast(AsyncGenerator[WatchEvent, None], rec.watch("Node"))) as events:
            async for ev in events:
                seen.append(ev.type)
                if ev.type == "SYNCED":
                    return

    await asyncio.wait_for(consume(), 5)
    assert seen == ["ADDED", "SYNCED"]
    assert [(r.verb, r.resource) for r in rec.requests] == [("list", "nodes"), ("watch", "nodes")]


# --- the list against the code ----------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
_VERB_OF = {"list": "list", "get": "get", "create": "create", "patch": "patch", "replace": "update", "delete": "delete"}
CLOUD_OF_TREE = {"karpy_core": set(CLOUDS), "providers/aws/karpy_aws": {"aws"}, "providers/kakaocloud/karpy_kakaocloud": {"kakaocloud"}}
"""The controller's code per cloud: karpy_core and each plugin's package (not its tests beside it)."""
NOT_THE_CONTROLLER = ("karpy_core/sim/", "karpy_core/kube/memory.py", "karpy_core/kube/cache.py", "karpy_core/apis/crds.py")
"""The simulator and the in-memory cluster (never against a real cluster), the informer cache
(forwards calls with variable kinds; its watches are checked from Operator.CACHED_KINDS), and
``karpy install-crds`` (an admin command, not the controller)."""


def _code_calls() -> set[tuple[str, str, str, str]]:
    """``(cloud, group, resource, verb)`` of every KubeClient call in the controller's code whose
    kind is a literal (``kube.patch("NodeClaim", ..., status=True)`` -> nodeclaims/status patch)."""
    found: set[tuple[str, str, str, str]] = set()
    for tree, clouds in CLOUD_OF_TREE.items():
        for path in sorted((REPO / tree).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(NOT_THE_CONTROLLER):
                continue
            module = ast.parse(path.read_text())
            loop_kinds: dict[str, list[str]] = {}  # `for kind in ("PersistentVolume", ...)`: the names a loop variable takes
            for node in ast.walk(module):
                if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Tuple | ast.List):
                    values = [e.value for e in node.iter.elts if isinstance(e, ast.Constant) and e.value in KINDS]
                    loop_kinds.setdefault(node.target.id, []).extend(values)
            for node in ast.walk(module):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if "kube" not in ast.unparse(node.func.value):
                    continue
                method = node.func.attr
                if method == "evict":
                    calls = [("", "pods/eviction", "create")]
                elif method == "bind":
                    calls = [("", "pods/binding", "create")]
                elif method in _VERB_OF and node.args:
                    arg = node.args[0]
                    if isinstance(arg, ast.Constant) and arg.value in KINDS:
                        kinds = [arg.value]
                    elif isinstance(arg, ast.Name):
                        kinds = loop_kinds.get(arg.id, [])
                    else:
                        continue
                    status = any(k.arg == "status" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords)
                    calls = [(KINDS[k].group, f"{KINDS[k].plural}/status" if status else KINDS[k].plural, _VERB_OF[method])
                             for k in kinds]
                else:
                    continue
                for cloud in clouds:
                    found.update((cloud, *c) for c in calls)
    return found


def _watched() -> set[tuple[str, str, str, str]]:
    """The informer cache's list+watch of Operator.CACHED_KINDS (and BUFFER_KINDS, CapacityBuffer gate; GATED_KINDS,
    NodeOverlay gate) and of each cloud's NodeClass."""
    from karpy_core.operator import Operator

    node_class = {"aws": "EC2NodeClass", "kakaocloud": "KCNodeClass"}
    out = set()
    for cloud in CLOUDS:
        for kind in (*Operator.CACHED_KINDS, *Operator.BUFFER_KINDS, *Operator.GATED_KINDS, node_class[cloud]):
            info = KINDS[kind]
            out |= {(cloud, info.group, info.plural, "list"), (cloud, info.group, info.plural, "watch")}
    return out


IMPLIED = {(cloud, "karpenter.sh", "nodepools/finalizers", "update") for cloud in CLOUDS}
"""Admission (OwnerReferencesPermissionEnforcement): NodeClaims are created with a blockOwnerDeletion
owner reference to their NodePool (provisioner.nodeclaim_from_plan), checked below."""


def _listed() -> set[tuple[str, str, str, str]]:
    return {(cloud, p.group, p.resource, verb) for p in PERMISSIONS for cloud in p.clouds for verb in p.verbs}


def test_every_call_in_the_code_is_in_the_list() -> None:
    missing = sorted((_code_calls() | _watched()) - _listed())
    assert not missing, "KubeClient calls without a grant in karpy_core/kube/permissions.py:\n" + "\n".join(map(str, missing))


def test_every_grant_in_the_list_is_used_by_the_code() -> None:
    from karpy_core.controllers.provisioning import provisioner

    assert "block_owner_deletion=True" in Path(provisioner.__file__).read_text()  # what IMPLIED stands for
    unused = sorted(_listed() - _code_calls() - _watched() - IMPLIED)
    assert not unused, "grants in karpy_core/kube/permissions.py no code calls:\n" + "\n".join(map(str, unused))
