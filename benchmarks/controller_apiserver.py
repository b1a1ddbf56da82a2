"""Benchmark: 1,000 pending pods against the real API server, kube-scheduler and kwok.

Starts the dev cluster (``hack/devcluster.py``: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok), installs karpy's CRDs, a NodePool and runs ``karpy controller
--cloud-provider simulated --kwok`` as a child process. Then creates N pods directly (50 requests
in flight; a Deployment would be throttled by kube-controller-manager's 20 requests/s client
limit, which measures the controller-manager, not karpy), 1 cpu / 256Mi (the inflate shape), and
reports:

* seconds from the first pod's creation until all pods exist;
* seconds from the first pod's creation to the first NodeClaim, and to the last NodeClaim;
* seconds until every pod is Running (kube-scheduler bound it to a kwok node);
* NodeClaims created, and the controller's peak RSS (VmHWM, MiB).

Run: ``.venv/bin/python benchmarks/controller_apiserver.py [--pods 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402

from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from tests.integration.karpy_env import ControllerProcess, install_crds  # noqa: E402
from tests.integration.test_controller_e2e import deployment, nodeclass, nodepool  # noqa: E402


async def run(pods: int) -> None:
    with devcluster.DevCluster(devcluster.build()) as cluster, tempfile.TemporaryDirectory() as tmp:
        kube = await AsyncKubeClient.from_config(str(cluster.kubeconfig))
        await install_crds(kube)
        await kube.create("EC2NodeClass", nodeclass("bench"))
        await kube.create("NodePool", nodepool("bench", "bench"))
        ctl = ControllerProcess(str(cluster.kubeconfig), Path(tmp) / "controller.log", lease="bench")
        try:
            for _ in range(100):
                if "starting controllers" in ctl.log():
                    break
                await asyncio.sleep(0.2)
            template = deployment("inflate", "bench", 1)["spec"]["template"]
            sem = asyncio.Semaphore(50)

            async def make(i: int) -> None:
                async with sem:
                    await kube.create("Pod", {"metadata": {"name": f"inflate-{i:05d}", "namespace": "default",
                                                           "labels": template["metadata"]["labels"]},
                                              "spec": template["spec"]})

            t0 = time.monotonic()
            await asyncio.gather(*(make(i) for i in range(pods)))
            created_all = time.monotonic() - t0
            first_claim = last_claim = running_at = None
            claims_seen = 0
            stable_since = None
            while time.monotonic() - t0 < 600:
                await asyncio.sleep(0.5)
                now = time.monotonic() - t0
                claims = [c for c in await kube.list("NodeClaim") if c["metadata"]["labels"].get("karpenter.sh/nodepool") == "bench"]
                if claims and first_claim is None:
                    first_claim = now
                if len(claims) != claims_seen:
                    claims_seen, last_claim, stable_since = len(claims), now, now
                plist = [p for p in await kube.list("Pod", "default") if p["metadata"]["labels"].get("app") == "inflate"]
                running = sum(1 for p in plist if (p.get("status") or {}).get("phase") == "Running")
                if running == pods and len(plist) == pods:
                    running_at = now
                    break
                if stable_since is not None and now - stable_since > 60:
                    break
            print(f"pods: {pods} (all created after {created_all:.2f} s)")
            print(f"first NodeClaim created after: {first_claim:.2f} s" if first_claim is not None else "no NodeClaim created")
            print(f"last NodeClaim created after:  {last_claim:.2f} s ({claims_seen} NodeClaims)" if last_claim else "")
            print(f"all pods Running after:        {running_at:.2f} s" if running_at else "not all pods Running")
            print(f"controller peak RSS:           {ctl.peak_rss_mib():.1f} MiB")
        finally:
            ctl.stop()
            await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(run(args.pods))


if __name__ == "__main__":
    main()
