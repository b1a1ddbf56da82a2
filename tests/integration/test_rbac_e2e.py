"""The controller under exactly the chart's RBAC, on the real API server (issue 10, section 6).

The chart's ServiceAccount, ClusterRole, Role and bindings are rendered by ``helm template`` and
created for real; the operator runs in-process with a token of that ServiceAccount (TokenRequest
API), through a :class:`~karpy_core.kube.permissions.RecordingKubeClient`, with the simulated
provider in kwok mode standing in for AWS (its Nodes are created with the admin client: in a real
cluster the kubelet registers them). The test drives launch, drift (an EC2NodeClass edit) with a
PodDisruptionBudget that blocks every eviction, so the drained node's pods are deleted at the
NodePool's ``terminationGracePeriod`` deadline, and node repair (a Node NotReady past the
provider's 10 minute toleration). It fails on any 403: recorded by the client, or in the
operator's logs; and every request the operator made must be in
``karpy_core.kube.permissions.PERMISSIONS``.

The API server runs with the ``OwnerReferencesPermissionEnforcement`` admission plugin (see
conftest.py), so the ``blockOwnerDeletion`` owner references karpy writes are authorized too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.permissions import RecordingKubeClient, permitted, rules_for, unique
from karpy_core.operator import ControllerSettings, LeaderSettings, Operator
from karpy_core.sim.kwok_nodes import KWOK_ANNOTATION, KwokNodeBackend
from karpy_core.state.cluster import condition

from .karpy_env import install_crds, wait_for
from .test_chart_apply import CLOUD_VALUES, _create_all, _delete, helm_bin, render  # noqa: F401 - fixtures
from .test_controller_e2e import claims_of, deployment, nodeclass, nodepool, nodes_of, pods_of, stop_operator

pytestmark = pytest.mark.devcluster

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
TERMINATION_GRACE = 15
"""Seconds: the NodePool's terminationGracePeriod, the drain deadline after a NodeClaim's deletion."""
REPAIR_TOLERATION = 600
"""Seconds: the simulated provider's repair toleration (Karpenter KWOK's Ready False/Unknown 10 min)."""


_FORBIDDEN = re.compile(r"(?<![\w.])403(?![\w.])|forbidden", re.IGNORECASE)


class _LogScan(logging.Handler):
    """Keeps every log record (INFO and up) that mentions a 403/Forbidden answer."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" {exc!r} {getattr(exc, 'status', '')}"
        if _FORBIDDEN.search(text):
            self.hits.append(f"{record.name}: {text[:400]}")


@pytest.fixture
def log_scan() -> Iterator[_LogScan]:
    handler = _LogScan()
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO if old == logging.NOTSET or old > logging.INFO else old)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


@pytest.fixture
def release_namespace(devcluster: Any) -> Iterator[str]:
    name = f"karpy-rbac-{uuid.uuid4().hex[:8]}"
    devcluster.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        _delete(devcluster.api, f"/api/v1/namespaces/{name}")


def _token_kubeconfig(devcluster: Any, namespace: str, service_account: str, path: Path) -> Path:
    """A kubeconfig for ``service_account`` with a one-hour token from the TokenRequest API."""
    review = devcluster.api("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    config = json.loads(Path(devcluster.kubeconfig).read_text())
    config["users"] = [{"name": service_account, "user": {"token": review["status"]["token"]}}]
    for ctx in config["contexts"]:
        ctx["context"]["user"] = service_account
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_controller_runs_under_the_chart_rbac_without_a_403(  # noqa: C901
    devcluster: Any, render: Any, release_namespace: str, log_scan: _LogScan, tmp_path: Path,  # noqa: F811 - fixture
) -> None:
    api = devcluster.api
    ns = release_namespace
    values = CLOUD_VALUES["aws"]
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"rbac-{tag}", f"rbac-{tag}"
    objects = [o for o in render(f"karpy-{tag}", ns, values) if o["kind"] in RBAC_KINDS]
    created: list[str] = []
    admin = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    sa_client: AsyncKubeClient | None = None
    task: asyncio.Task[None] | None = None
    recorder: RecordingKubeClient | None = None
    started = time.monotonic()
    try:
        await install_crds(admin)
        created = _create_all(api, objects, dry_run=False)
        (sa,) = [o for o in objects if o["kind"] == "ServiceAccount"]
        sa_client = await AsyncKubeClient.from_config(str(_token_kubeconfig(devcluster, ns, sa["metadata"]["name"], tmp_path / "sa.kubeconfig")))
        recorder = RecordingKubeClient(sa_client)

        def no_denial() -> None:
            denied = recorder.denied() if recorder else []
            assert not denied, "403 Forbidden under the chart's RBAC:\n" + "\n".join(map(str, unique(denied)))

        async def settled(pred: Any, timeout: float, what: str) -> Any:
            async def check() -> Any:
                no_denial()  # fail at once on a 403 instead of waiting for the timeout
                return await pred()

            return await wait_for(check, timeout, what)

        # --- launch ------------------------------------------------------------------------------
        await admin.create("EC2NodeClass", nodeclass(pool))
        np_obj = nodepool(pool, tag, types=["m5.large"])
        np_obj["spec"]["template"]["spec"]["terminationGracePeriod"] = f"{TERMINATION_GRACE}s"
        await admin.create("NodePool", np_obj)
        # Every eviction is refused (minAvailable = replicas): only the deadline can drain the node.
        await admin.create("PodDisruptionBudget", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                                   "metadata": {"name": app, "namespace": "default"},
                                                   "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}})
        provider = load_provider("simulated", {"node_backend": KwokNodeBackend(admin), "kube": recorder,
                                               "node_classes": ["EC2NodeClass"]})
        operator = Operator(kube=recorder, provider=provider, settings=ControllerSettings.model_validate(dict(
            leader=LeaderSettings.model_validate(dict(namespace=ns, lease_name=f"karpy-{tag}")), health_port=0,
            health_host="127.0.0.1", resync_seconds=2.0)))
        task = asyncio.create_task(operator.run())
        await settled(lambda: asyncio.sleep(0, operator.started), 30, "the operator to lead and start")
        await admin.create("Deployment", deployment(app, tag, 2, cpu="500m"))

        async def running_on(expect_claims: int | None = None) -> list[dict[str, Any]] | None:
            pods = [p for p in await pods_of(admin, app) if not p["metadata"].get("deletionTimestamp")]
            claims = [c for c in await claims_of(admin, pool) if not c["metadata"].get("deletionTimestamp")]
            nodes = {n["metadata"]["name"] for n in await nodes_of(admin, pool)}
            ok = (len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
                  and {p["spec"].get("nodeName") for p in pods} <= nodes
                  and (expect_claims is None or len(claims) == expect_claims)
                  and all((condition(c, "Initialized") or {}).get("status") == "True" for c in claims))
            return claims if ok else None

        (first,) = await settled(lambda: running_on(1), 90, "2 pods Running on one launched NodeClaim")
        launched_at = time.monotonic()

        # --- drift, drained at the terminationGracePeriod deadline (pods deleted) ------------------
        await admin.patch("EC2NodeClass", pool, {"spec": {"tags": {"rbac-e2e": tag}}})

        async def replaced() -> list[dict[str, Any]] | None:
            names = {c["metadata"]["name"] for c in await claims_of(admin, pool)}
            if first["metadata"]["name"] in names:
                return None
            return await running_on(1)

        (second,) = await settled(replaced, 120, "the drifted NodeClaim replaced and its pods deleted at the deadline")
        drifted_at = time.monotonic()
        forced = [r for r in recorder.requests if (r.verb, r.resource) == ("delete", "pods") and r.status == 200]
        assert forced, "the drifted node drained without a pod deletion: the PDB should have blocked every eviction"
        assert [r for r in recorder.requests if r.resource == "pods/eviction" and r.status == 429], "no eviction was refused"

        # --- repair: the replacement's Node goes NotReady past the toleration -------------------------
        (node,) = [n for n in await nodes_of(admin, pool) if n["metadata"]["name"] == second["status"]["nodeName"]]
        name = node["metadata"]["name"]
        # kwok would report it Ready again at once: take the Node away from it, as if its kubelet died.
        await admin.patch("Node", name, {"metadata": {"annotations": {KWOK_ANNOTATION: "stopped"}}})
        conds = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
        since = _iso(time.time() - REPAIR_TOLERATION - 60)
        conds.append({"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "rbac e2e",
                      "lastHeartbeatTime": since, "lastTransitionTime": since})
        await admin.patch("Node", name, {"status": {"conditions": conds}}, status=True)

        async def repaired() -> list[dict[str, Any]] | None:
            names = {c["metadata"]["name"] for c in await claims_of(admin, pool)}
            if second["metadata"]["name"] in names:
                return None
            return await running_on(1)

        await settled(repaired, 90, "the NotReady node repaired and its pods running elsewhere")
        repaired_at = time.monotonic()
        repairs = sum(s.value for f in operator.metrics.registry.collect() for s in f.samples
                      if s.name == "karpenter_nodeclaims_disrupted_total" and s.labels.get("reason") == "unhealthy"
                      and s.labels.get("nodepool") == pool)
        assert repairs == 1.0
    finally:
        if recorder is not None:
            try:
                await admin.delete("PodDisruptionBudget", app, "default")
            except Exception:
                pass
            try:
                await admin.delete("Deployment", app, "default")
            except Exception:
                pass
            for c in await claims_of(admin, pool):
                try:
                    await admin.delete("NodeClaim", c["metadata"]["name"])
                except Exception:
                    pass
            if task is not None and not task.done():
                async def gone() -> bool:
                    return not await claims_of(admin, pool) and not await nodes_of(admin, pool)

                try:
                    await wait_for(gone, 60, "NodeClaims and Nodes to be finalized")
                finally:
                    await stop_operator(task)
        for kind in ("NodePool", "EC2NodeClass"):
            try:
                await admin.delete(kind, pool)
            except Exception:
                pass
        for path in reversed(created):
            _delete(api, path)
        if sa_client is not None:
            await sa_client.close()
        await admin.close()

    # --- every request allowed, and in the list --------------------------------------------------
    assert recorder is not None
    denied = recorder.denied()
    assert not denied, "403 Forbidden under the chart's RBAC:\n" + "\n".join(map(str, unique(denied)))
    assert not log_scan.hits, "the operator logged 403s:\n" + "\n".join(log_scan.hits[:20])
    unlisted = sorted({(r.verb, r.group, r.resource, r.namespace, r.name if r.resource == "secrets" else "")
                       for r in recorder.requests if not permitted(r, "aws", ns, values)})
    assert not unlisted, "requests outside karpy_core.kube.permissions.PERMISSIONS:\n" + "\n".join(map(str, unlisted))
    seen = {(r.verb, r.group, r.resource) for r in recorder.requests}
    for need in [("delete", "", "pods"), ("create", "", "pods/eviction"), ("update", "coordination.k8s.io", "leases"),
                 ("update", "karpenter.sh", "nodepools/finalizers"), ("patch", "karpenter.sh", "nodeclaims/status"),
                 ("delete", "karpenter.sh", "nodeclaims"), ("patch", "", "nodes"), ("create", "", "events"),
                 ("patch", "karpenter.k8s.aws", "ec2nodeclasses/status")]:
        assert need in seen, f"the scenario never exercised {need}"
    unused = sorted({(r.verb, r.group, r.resource) for r in rules_for("aws")} - seen)
    print(f"launch {launched_at - started:.1f}s, drift+deadline {drifted_at - launched_at:.1f}s, "
          f"repair {repaired_at - drifted_at:.1f}s; {len(recorder.requests)} requests, "
          f"{len(unique(recorder.requests))} distinct (verb, group, resource, namespace); "
          f"grants not exercised here: {unused}")

