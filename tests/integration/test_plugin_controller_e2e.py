"""docs/cloudprovider.md's example provider (tinycloud) in ``karpy controller`` against the real
API server: its CRD from the page's CRD snippet, its NodeClass read and watched through the real
KubeClient, its background loop writing the NodeClass status, NodeClaims launched by it.

tinycloud has no kubelets, so its NodeClaims launch (``status.providerID``) but never register;
the test stops there and removes them.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from karpy_core.errors import KubeAPIError
from karpy_core.kube.client import AsyncKubeClient
from tests.plugins.docplugin import CRD_SNIPPET, DOC, Env, installed_doc_plugin

from .karpy_env import CRD_PATH, install_crds, wait_for

pytestmark = pytest.mark.devcluster

NODECLASSES = "/apis/tinycloud.example.com/v1/tinynodeclasses"


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with installed_doc_plugin(tmp_path_factory.mktemp("doc-plugin")) as env:
        yield env


async def _install_plugin_crd(kube: AsyncKubeClient, plugin: Env) -> None:
    m = CRD_SNIPPET.search(DOC.read_text())
    assert m is not None
    rendered = plugin.python("-c", m.group(1))
    assert rendered.returncode == 0, rendered.stderr
    crd = yaml.safe_load(rendered.stdout)
    try:
        await kube._request("POST", CRD_PATH, body=crd)
    except KubeAPIError as exc:
        if exc.status != 409:
            raise

    async def served() -> bool:
        try:
            await kube._request("GET", NODECLASSES)
            return True
        except KubeAPIError:
            return False

    await wait_for(served, 30, "the TinyNodeClass resource to be served")


async def _claims(kube: AsyncKubeClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await kube.list("NodeClaim") if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]


async def test_the_doc_plugin_launches_from_the_controller(devcluster: Any, plugin: Env, tmp_path: Any) -> None:
    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    tag = "t" + uuid.uuid4().hex[:5]
    pool = f"tiny-{tag}"
    log_path = tmp_path / "controller.log"
    controller: subprocess.Popen[bytes] | None = None
    try:
        await install_crds(kube)
        await _install_plugin_crd(kube, plugin)
        await kube._request("POST", NODECLASSES, body={
            "apiVersion": "tinycloud.example.com/v1", "kind": "TinyNodeClass", "metadata": {"name": pool},
            "spec": {"image": "img-e2e", "zones": ["tiny-1a"]}})
        await kube.create("NodePool", {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool},
            "spec": {"template": {"metadata": {"labels": {"karpy-e2e": tag}}, "spec": {
                "nodeClassRef": {"group": "tinycloud.example.com", "kind": "TinyNodeClass", "name": pool},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                 {"key": "tinycloud.example.com/instance-family", "operator": "In", "values": ["tiny"]}]}}}})
        await kube.create("Deployment", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": pool, "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": pool}}, "template": {
                "metadata": {"labels": {"app": pool}},
                "spec": {"nodeSelector": {"karpy-e2e": tag}, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                         "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}}}})
        with open(log_path, "w") as log:
            controller = subprocess.Popen(
                [str(plugin.venv / "bin" / "karpy"), "controller", "--cloud-provider", "tinycloud",
                 "--provider-option", "zones=tiny-1a,tiny-1b", "--provider-option", "max_instances=10",
                 "--kubeconfig", str(devcluster.kubeconfig), "--namespace", "default", "--health-port", "0",
                 "--cluster-name", "e2e"],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "KARPY_LEASE_NAME": f"lease-{tag}"})

        async def launched() -> list[dict[str, Any]]:
            claims = await _claims(kube, pool)
            return claims if claims and all((c.get("status") or {}).get("providerID") for c in claims) else []

        claims = await wait_for(launched, 90, "tinycloud NodeClaims with a providerID")
        for claim in claims:
            assert claim["status"]["providerID"].startswith("tinycloud:///tiny-1a/tc-")
            assert claim["status"]["imageID"] == "img-e2e"
            assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] in ("tiny.small", "tiny.medium")

        async def nodeclass_ready() -> bool:
            obj = await kube._request("GET", f"{NODECLASSES}/{pool}")
            return any(c["type"] == "Ready" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])

        await wait_for(nodeclass_ready, 60, "the plugin's loop to set the TinyNodeClass Ready")
    except BaseException:
        print(log_path.read_text() if log_path.exists() else "(no controller log)")
        raise
    finally:
        for kind, name, ns in (("Deployment", pool, "default"), ("NodePool", pool, None)):
            try:
                await kube.delete(kind, name, ns)
            except KubeAPIError:
                pass

        async def gone() -> bool:
            return not await _claims(kube, pool)

        try:
            await wait_for(gone, 120, "the NodeClaims to be terminated by the controller")
        finally:
            if controller is not None:
                controller.terminate()
                try:
                    controller.wait(15)
                except subprocess.TimeoutExpired:
                    controller.kill()
            for claim in await _claims(kube, pool):  # only when the controller did not finish them
                await kube.patch("NodeClaim", claim["metadata"]["name"], {"metadata": {"finalizers": None}})
            try:
                await kube._request("DELETE", f"{NODECLASSES}/{pool}")
            except KubeAPIError:
                pass
            await kube.close()
