"""The VMs karpy owns: ``karpy_get``, ``karpy_list`` and ``karpy_delete`` of :mod:`karpy_kakaocloud.plugin`.

:class:`InstanceInventory` acts only on VMs whose description verifies under a keyring key for
this cluster and NodeClaim (:mod:`karpy_kakaocloud.ownership`); ``list`` also returns VMs left with
a unique pending record (garbage collection terminates them). Any other VM that looks like karpy's
is reported (:class:`~karpy_kakaocloud.unowned.UnownedReporter`) and answered with
:class:`~karpy_kakaocloud.unowned.UnownedInstanceError`. Delete waits for the API's 404 and then
raises ``NodeClaimNotFoundError`` (karpy's "done").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy_core.errors import CloudProviderError, KubeAPIError, NodeClaimNotFoundError, NotFoundError
from karpy_core.logs import fields
from karpy_kakaocloud import bootstrap
from karpy_kakaocloud.apis import GROUP
from karpy_kakaocloud.client import KakaoCloudNotFoundError
from karpy_kakaocloud.instancetypes import arch_of, flavor_gpus
from karpy_kakaocloud.ownership import NONCE_ANNOTATION, Ownership, Verdict
from karpy_kakaocloud.unowned import UnownedInstanceError, created_at, pending_key

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_kakaocloud.deps import DepsLoader, KakaoCloudDeps
    from karpy_kakaocloud.unowned import UnownedReporter

__all__ = ["UNVERIFIABLE", "InstanceInventory", "instance_id_of"]

log = logging.getLogger("karpy.kakaocloud")

UNVERIFIABLE = "unverifiable"
"""Reason of a pending VM whose NodeClaim could not be read: kept and reported, never deleted."""


def instance_id_of(provider_id: str) -> str:
    """The VM id in a ``kakaocloud:///<zone>/<instance id>`` provider ID.

    Raises:
        NodeClaimNotFoundError: not a KakaoCloud provider ID."""
    parsed = bootstrap.parse_provider_id(provider_id)
    if parsed is None:
        raise NodeClaimNotFoundError(f"{provider_id!r} is not a KakaoCloud provider ID")
    return parsed[1]


class InstanceInventory:
    """The owned VMs, on behalf of the plugin.

    Args:
        load: the plugin's deps (client, keyring, cluster identity, settings, kube client, clock,
            sleep, max pods), loaded after the checks that need none.
        unowned: classification and reporting of VMs karpy cannot prove it owns.
    """

    def __init__(self, load: DepsLoader, unowned: UnownedReporter):
        self.load = load
        self.unowned = unowned

    async def get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim view of an owned VM.

        Raises:
            NodeClaimNotFoundError: no such VM; ``UnownedInstanceError`` when it is not provably ours.
        """
        iid = instance_id_of(provider_id)
        deps = await self.load()
        inst, v = await self.owned_instance(deps, iid, "get", None)
        return await self.claim_from_instance(deps, inst, v)

    async def list_owned(self) -> list[NodeClaim]:
        """Every VM whose ownership record verifies for this cluster (KE VMs skipped via
        ``is_k8se``). VMs that look like karpy's but do not verify are reported, never returned."""
        deps = await self.load()
        out = []
        instances = sorted(await deps.client.list_instances(), key=lambda i: str(i.get("id")))
        records = self.unowned.pending_counts(deps, instances)
        for inst in instances:
            if inst.get("is_k8se"):
                continue
            v = self.unowned.classify(deps, inst)
            if v.ownership is Ownership.PENDING:
                reason = await self.pending_problem(deps, inst, v, records)
                if reason is not None:
                    await self.unowned.report(deps, inst, reason, "garbage-collect", v.nodeclaim)
                    continue
            if v.ownership in (Ownership.OWNED, Ownership.PENDING):
                if str(inst.get("status") or "").lower() != "deleting":
                    out.append(await self.claim_from_instance(deps, inst, v))
            elif self.unowned.looks_like_ours(inst):
                await self.unowned.report(deps, inst, v.ownership.value, "garbage-collect", v.nodeclaim)
        return out

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the NodeClaim's VM after verifying ownership, wait for 404, then raise
        ``NodeClaimNotFoundError`` (karpy's "done"). Returns None when the wait times out (karpy
        calls again).

        Raises:
            NodeClaimNotFoundError: the VM is gone (or ``UnownedInstanceError``: not ours, left alone).
        """
        pid = nodeclaim.status.provider_id
        claim = nodeclaim.metadata.name or ""
        if not pid:
            raise NodeClaimNotFoundError(f"NodeClaim {claim}: no providerID")
        vm_id = instance_id_of(pid)
        deps = await self.load()
        inst, _ = await self.owned_instance(deps, vm_id, "delete", claim)
        iid = str(inst["id"])
        if str(inst.get("status") or "").lower() != "deleting" and not await deps.client.delete_instance(iid):
            raise NodeClaimNotFoundError(f"KakaoCloud VM {iid} is gone")
        log.info("deleting VM", extra=fields(nodeclaim=claim, instance=iid))
        deadline = deps.clock() + deps.settings.delete_timeout
        while deps.clock() < deadline:
            await deps.sleep(deps.settings.delete_poll_interval)
            try:
                await deps.client.get_instance(iid)
            except KakaoCloudNotFoundError:
                raise NodeClaimNotFoundError(f"KakaoCloud VM {iid} terminated") from None
        return None

    async def owned_instance(
        self, deps: KakaoCloudDeps, instance_id: str, action: str, claim_name: str | None
    ) -> tuple[dict[str, Any], Verdict]:
        """The VM ``instance_id`` and its verdict, when karpy may ``action`` it (for ``claim_name`` when given).

        Raises:
            NodeClaimNotFoundError: no such VM; ``UnownedInstanceError`` (reported) when not provably ours."""
        try:
            inst = await deps.client.get_instance(instance_id)
        except KakaoCloudNotFoundError:
            raise NodeClaimNotFoundError(f"KakaoCloud VM {instance_id} does not exist") from None
        if inst.get("is_k8se"):
            await self.unowned.report(deps, inst, "k8se", action, claim_name)
            raise UnownedInstanceError(f"VM {instance_id} belongs to a Kubernetes Engine node pool", code="k8se")
        v = self.unowned.classify(deps, inst)
        reason = None if v.owned else v.ownership.value
        if v.ownership is Ownership.PENDING and action == "delete":
            # a VM left before signing (garbage collection): karpy's when its record is unique
            # among every VM of the project (the rule list() applies), whatever their names
            reason = await self.pending_problem(deps, inst, v, self.unowned.pending_counts(deps, await deps.client.list_instances()))
        if reason is None and claim_name is not None and v.nodeclaim != claim_name:
            reason = "other-nodeclaim"
        if reason == UNVERIFIABLE:
            # not proven foreign either: keep the VM, and keep the NodeClaim so the delete is retried
            await self.unowned.report(deps, inst, reason, action, claim_name or v.nodeclaim)
            raise CloudProviderError(f"VM {instance_id}: its ownership could not be checked (the NodeClaim it names "
                                     f"could not be read); left alone, retried later", code="OwnershipUnverifiable")
        if reason is not None:
            await self.unowned.report(deps, inst, reason, action, claim_name or v.nodeclaim)
            raise UnownedInstanceError(f"VM {instance_id} is not provably owned by this cluster ({reason}); left alone", code=reason)
        return inst, v

    async def pending_problem(
        self, deps: KakaoCloudDeps, inst: dict[str, Any], v: Verdict, records: Mapping[tuple[str, str], int]
    ) -> str | None:
        """Why a VM with a verifying pending record is not karpy's to terminate, or None.

        ``records`` counts pending records per (NodeClaim, nonce) over every VM of the project
        (:meth:`~karpy_kakaocloud.unowned.UnownedReporter.pending_counts`, the one duplicate rule).
        ``duplicate-record``: the same record sits on another VM (one of them is a copy and
        karpy cannot tell which). ``outside-launch-window``: created outside the window of the
        nonce's POST time (:meth:`~karpy_kakaocloud.unowned.UnownedReporter.in_launch_window`).
        ``copied-record``: the NodeClaim it names launched another VM
        from the POST of this very nonce (karpy POSTs once per nonce, so this one is a copy).
        ``unverifiable``: reading that NodeClaim failed with anything but 404 (a 500, a 429, no
        answer): karpy cannot prove the record is not a copy, so the VM is kept (fails closed).
        Only a 404 (the NodeClaim is gone) lets a unique pending record count as karpy's leftover.
        """
        key = pending_key(v)
        if key is None or records.get(key, 0) > 1:
            return "duplicate-record"
        if not self.unowned.in_launch_window(deps, inst, v):
            return "outside-launch-window"
        if deps.kube is not None and v.nodeclaim:
            try:
                claim = await deps.kube.get("NodeClaim", v.nodeclaim)
            except NotFoundError:
                return None
            except Exception:  # any other failure proves nothing: keep the VM
                return UNVERIFIABLE
            annotations = (claim.get("metadata") or {}).get("annotations") or {}
            pid = (claim.get("status") or {}).get("providerID") or ""
            if annotations.get(NONCE_ANNOTATION) == v.nonce and pid and not pid.endswith("/" + str(inst.get("id"))):
                return "copied-record"
        return None

    async def claim_from_instance(self, deps: KakaoCloudDeps, instance: dict[str, Any], verdict: Verdict) -> NodeClaim:
        """The NodeClaim view of an owned VM (spec and labels from the stored NodeClaim when there is one)."""
        from karpy_core.apis.nodeclaim import NodeClaim

        zone = str(instance.get("availability_zone") or "")
        flavor = instance.get("flavor") or {}
        spec: dict[str, Any] = {"requirements": [], "nodeClassRef": {"group": GROUP, "kind": "KCNodeClass", "name": "unknown"}}
        meta: dict[str, Any] = {"name": verdict.nodeclaim, "labels": {}}
        created = created_at(instance)
        if created is not None:
            meta["creationTimestamp"] = datetime.fromtimestamp(created, UTC).isoformat()
        if deps.kube is not None and verdict.nodeclaim:
            try:
                existing = await deps.kube.get("NodeClaim", verdict.nodeclaim)
                spec = existing.get("spec") or spec
                meta["labels"] = dict((existing.get("metadata") or {}).get("labels") or {})
            except KubeAPIError:
                pass
        labels = meta["labels"]
        labels.update({LABEL_ZONE: zone, LABEL_CAPACITY_TYPE: "on-demand"})
        if flavor.get("name"):
            labels[LABEL_INSTANCE_TYPE] = str(flavor["name"])
            labels["kubernetes.io/arch"] = arch_of(flavor)
        status: dict[str, Any] = {"providerID": bootstrap.provider_id(zone, str(instance["id"]))}
        if flavor.get("vcpus") and flavor.get("memory_mb"):
            cap = {"cpu": str(int(flavor["vcpus"])), "memory": f"{int(flavor['memory_mb'])}Mi", "pods": str(deps.max_pods)}
            if flavor_gpus(flavor):
                cap["nvidia.com/gpu"] = str(flavor_gpus(flavor))
            status["capacity"] = cap
        if (instance.get("image") or {}).get("id"):
            status["imageID"] = instance["image"]["id"]
        return NodeClaim.model_validate({"metadata": meta, "spec": spec, "status": status})
