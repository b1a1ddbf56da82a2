"""Launching one VM for a NodeClaim (the ``karpy_create`` hook of :mod:`karpy_kakaocloud.plugin`).

:func:`create_vm` checks the NodePool name, loads the plugin's deps
(:class:`~karpy_kakaocloud.deps.KakaoCloudDeps`: credentials, keyring, cluster identity) and hands
the NodeClaim to a :class:`VMLauncher` built on them, which admits it (NodeClaim name length, a
Ready KCNodeClass), adopts
an earlier attempt's VM when there is one (signed for the NodeClaim, or the one pending record of
its current launch nonce), else picks the cheapest offering with the core launch kernel, plans the
VM body (flavor, worker image, subnet, endpoint, CA hash, bootstrap token), POSTs once per launch
nonce (:meth:`VMLauncher.post_create`), signs the VM (:mod:`karpy_kakaocloud.ownership`) and waits
for ``active``. See the plugin module's docstring for the idempotency rules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import CAPACITY_TYPE_ON_DEMAND, LABEL_NODEPOOL
from karpy_core.cloudprovider.launch import LaunchChoice, cheapest_launchable, launch_constraints, stamp_launched
from karpy_core.errors import CreateError, KubeAPIError, NodeClassNotReadyError, NotFoundError
from karpy_core.logs import fields
from karpy_kakaocloud import bootstrap, ownership
from karpy_kakaocloud.apis import MAX_NODEPOOL_NAME
from karpy_kakaocloud.client import NOT_SENT, KakaoCloudAPIError, KakaoCloudNotFoundError, KakaoCloudRetryableError
from karpy_kakaocloud.deps import DEFAULT_CA_FILE, ClusterCA
from karpy_kakaocloud.errors import CreatePhase, create_failure
from karpy_kakaocloud.instancetypes import arch_of, flavor_gpus
from karpy_kakaocloud.launch import LaunchPlan, instance_body, vm_name
from karpy_kakaocloud.nodeclass import SUPPORTED_NODE_CLASSES
from karpy_kakaocloud.ownership import NONCE_ANNOTATION, Ownership
from karpy_kakaocloud.unowned import created_at

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.cloudprovider.types import InstanceType
    from karpy_kakaocloud.catalog import Catalog
    from karpy_kakaocloud.deps import DepsLoader, KakaoCloudDeps
    from karpy_kakaocloud.nodeclass import ResolvedNodeClass
    from karpy_kakaocloud.unowned import UnownedReporter

__all__ = ["DEFAULT_CA_FILE", "VMLauncher", "ca_hash", "check_nodepool_name", "create_vm"]

log = logging.getLogger("karpy.kakaocloud")


def check_nodepool_name(nodeclaim: NodeClaim) -> None:
    """The first check of a launch, before any credential is loaded.

    Raises:
        CreateError: ``NodePoolNameTooLong`` when the NodeClaim's NodePool name is longer than
            :data:`~karpy_kakaocloud.apis.MAX_NODEPOOL_NAME` characters."""
    pool = nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")
    if len(pool) > MAX_NODEPOOL_NAME:
        raise CreateError(f"NodePool {pool}: name longer than {MAX_NODEPOOL_NAME} characters",
                          condition_reason="NodePoolNameTooLong")


async def create_vm(nodeclaim: NodeClaim, *, load: DepsLoader, catalog: Catalog, unowned: UnownedReporter) -> NodeClaim:
    """Launch one VM for ``nodeclaim``: :func:`check_nodepool_name`, load the deps (an API failure
    is a :func:`~karpy_kakaocloud.errors.create_failure`), then :meth:`VMLauncher.create`.

    Raises:
        As :meth:`VMLauncher.create`.
    """
    check_nodepool_name(nodeclaim)
    try:
        deps = await load()
    except KakaoCloudAPIError as exc:
        raise create_failure(exc) from None
    return await VMLauncher(deps, catalog, unowned).create(nodeclaim)


async def ca_hash(ca: ClusterCA) -> str:
    """The kubeadm ``--discovery-token-ca-cert-hash`` of the cluster CA: ``ca.pem``, else
    ``ca.file`` (the service account's ``ca.crt`` in a pod), else, when that default file is
    absent, the CA the controller's own kube client trusts (``ca.kube_client_pem``, from
    :class:`~karpy_core.cloudprovider.context.ProviderContext`; Karpenter's ``CLUSTER_CA_BUNDLE``
    default: "taken from the controller's TLS configuration").

    Raises:
        CreateError: ``ClusterCAUnavailable``, no CA from any of these.
    """
    pem = ca.pem
    if pem is None:
        try:
            pem = await asyncio.to_thread(Path(ca.file).read_text)
        except OSError as exc:
            pem = ca.kube_client_pem if ca.file == DEFAULT_CA_FILE else None
            if pem is None:
                raise CreateError(f"cannot read the cluster CA {ca.file}: {exc.strerror}",
                                  condition_reason="ClusterCAUnavailable") from None
    return bootstrap.ca_cert_hash(pem)


class VMLauncher:
    """Creates VMs for NodeClaims on behalf of the plugin (one per :func:`create_vm` call).

    Args:
        deps: the plugin's loaded deps (client, keyring, cluster identity, settings, kube client,
            clock, sleep, max pods, cluster CA).
        catalog: the KCNodeClass resolutions and flavors.
        unowned: classification and reporting of VMs karpy cannot prove it owns.
    """

    def __init__(self, deps: KakaoCloudDeps, catalog: Catalog, unowned: UnownedReporter):
        self.deps = deps
        self.catalog = catalog
        self.unowned = unowned

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one VM for ``nodeclaim`` (see the module docstring): admit, adopt an earlier
        attempt's VM if there is one, else pick the cheapest offering (core launch kernel), plan,
        POST once per nonce, sign and wait for ``active``.

        Raises:
            NodeClassNotReadyError: the KCNodeClass is missing or not Ready (``code`` = Ready reason).
            InsufficientCapacityError: no flavor/offering fits, or the API reports a capacity/quota error.
            CreateError: reasons ``NodePoolNameTooLong``, ``AuthenticationFailed``, ``InvalidRequest``,
                ``APIUnavailable``, ``OwnershipRecordFailed``, ``InstanceFailed``, ``InstanceNotActive``,
                ``NonceNotRecorded`` (the launch nonce could not be written on the NodeClaim; nothing POSTed)...
        """
        claim = nodeclaim.metadata.name or ""
        nc = await self.admit(nodeclaim)
        created = nodeclaim.metadata.creation_timestamp
        claim_created = created.timestamp() if created is not None else None
        try:
            types = await self.catalog.instance_types_for(self.deps, nc)
            name = vm_name(self.deps.cluster_tag, claim)
            adopted = await self.adopt(name, claim, nodeclaim.metadata.annotations.get(NONCE_ANNOTATION), claim_created)
        except KakaoCloudAPIError as exc:
            raise create_failure(exc) from None
        by_name = {it.name: it for it in types}
        if adopted is not None:
            inst, signed = adopted
            return await self.finish(nodeclaim, inst, signed, by_name, created_now=False)
        plan = await self.plan(nodeclaim, nc, self.choose(nodeclaim, types), name)
        inst = await self.post_create(nodeclaim, instance_body(nodeclaim, nc, plan), name, claim_created)
        return await self.finish(nodeclaim, inst, False, by_name, created_now=True, image_id=plan.image["id"])

    async def admit(self, nodeclaim: NodeClaim) -> ResolvedNodeClass:
        """The checks before any launch once the deps are loaded (the NodePool name was checked
        before, :func:`check_nodepool_name`): the NodeClaim name's length, a Ready KCNodeClass.

        Raises:
            CreateError: ``NodePoolNameTooLong`` (the NodeClaim name), or an API failure (:func:`create_failure`).
            NodeClassNotReadyError: not a KCNodeClass, or not Ready (``code`` = Ready reason).
        """
        claim = nodeclaim.metadata.name or ""
        if not claim or len(claim) > ownership.max_nodeclaim_name(self.deps.keyring.active_key_id):
            longest = ownership.max_nodeclaim_name(self.deps.keyring.active_key_id)
            raise CreateError(f"NodeClaim {claim!r}: name must be 1..{longest} characters",
                              condition_reason="NodePoolNameTooLong")
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != SUPPORTED_NODE_CLASSES[0]:
            raise NodeClassNotReadyError(f"NodeClaim {claim}: nodeClassRef {ref.group}/{ref.kind} is not a KCNodeClass")
        nc = await self.catalog.nodeclass(self.deps, ref.name)
        if not nc.ready:
            raise NodeClassNotReadyError(f"KCNodeClass {ref.name} is not Ready: {nc.not_ready_message()}",
                                         code=nc.conditions["Ready"].reason)
        return nc

    def choose(self, nodeclaim: NodeClaim, types: list[InstanceType]) -> LaunchChoice:
        """The cheapest launchable offering (core launch kernel).

        Raises:
            InsufficientCapacityError: none fits.
            CreateError: the requirements do not parse."""
        return cheapest_launchable(types, launch_constraints(nodeclaim), what="KakaoCloud flavor")

    async def find_by_name(self, vm_name: str) -> list[dict[str, Any]]:
        """The non-KE VMs named exactly ``vm_name``."""
        return [i for i in await self.deps.client.list_instances(name=vm_name) if i.get("name") == vm_name and not i.get("is_k8se")]

    async def adopt(
        self, vm_name: str, claim_name: str, nonce: str | None, claim_created: float | None
    ) -> tuple[dict[str, Any], bool] | None:
        """An earlier attempt's VM for this NodeClaim: (instance, already signed) or None.

        Adopted: a VM signed for ``claim_name`` (the earliest if several), else the one VM whose
        pending record carries ``nonce`` (the NodeClaim's current launch nonce) and that was
        created within the nonce's launch window (:meth:`~karpy_kakaocloud.unowned.UnownedReporter.in_launch_window`). Either must have
        been created no earlier than ``claim_created - clock_skew`` (seconds since the epoch; None
        skips the check). Records that fail these rules are reported (``predates-nodeclaim``;
        ``duplicate-record`` when one pending record sits on several VMs of any name created in
        the launch window: :meth:`~karpy_kakaocloud.unowned.UnownedReporter.pending_counts` over a
        full list) and never adopted;
        pending records of other nonces (earlier POSTs) are left to garbage collection."""
        signed: list[tuple[float, str, dict[str, Any]]] = []
        pending: list[dict[str, Any]] = []
        for inst in sorted(await self.find_by_name(vm_name), key=lambda i: str(i.get("id"))):
            if str(inst.get("status") or "").lower() == "deleting":
                continue
            v = self.unowned.classify(self.deps, inst)
            if v.nodeclaim != claim_name or v.ownership not in (Ownership.OWNED, Ownership.PENDING):
                continue
            if v.ownership is Ownership.PENDING and (nonce is None or v.nonce != nonce):
                continue
            if v.ownership is Ownership.PENDING and not self.unowned.in_launch_window(self.deps, inst, v):
                await self.unowned.report(self.deps, inst, "outside-launch-window", "adopt", claim_name)
                continue
            created = created_at(inst)
            if claim_created is not None and (created is None or created < claim_created - self.deps.settings.clock_skew):
                await self.unowned.report(self.deps, inst, "predates-nodeclaim", "adopt", claim_name)
                continue
            if v.ownership is Ownership.OWNED:
                signed.append((created or 0.0, str(inst.get("id")), inst))
            else:
                pending.append(inst)
        if signed:
            return min(signed, key=lambda t: (t[0], t[1]))[2], True
        if not pending:
            return None
        # a copy may carry another name: count the POST's possible VMs among every VM of the project
        counts = self.unowned.pending_counts(self.deps, await self.deps.client.list_instances(), launch_window_only=True)
        if len(pending) == 1 and nonce is not None and counts[(claim_name, nonce)] <= 1:
            return pending[0], False
        for inst in pending:
            await self.unowned.report(self.deps, inst, "duplicate-record", "adopt", claim_name)
        return None

    async def post_create(
        self, nodeclaim: NodeClaim, body: dict[str, Any], vm_name: str, claim_created: float | None
    ) -> dict[str, Any]:
        """POST once per launch nonce; never again while that POST may have acted.

        Before each POST a fresh nonce goes on the NodeClaim and into the pending record. Only a
        POST that never left (``NotSent``: no connection) is repeated at once, with a new nonce,
        after a backoff. After any other retryable answer (429 included: a gateway may answer 429
        after the VM was made; 5xx, read timeout, dropped connection) the VM is looked up by name
        and nonce up to ``create_lookups`` times; found, it is adopted. Only when every lookup
        answered and none found it is the POST repeated (new nonce): a VM of the earlier POST that
        shows up later carries a stale nonce, is never adopted and is garbage collected. A lookup
        that fails ends the call (``APIUnavailable``); the next reconcile looks the nonce up again
        before any POST.

        Raises:
            CreateError / InsufficientCapacityError: as :meth:`create`.
        """
        claim = nodeclaim.metadata.name or ""
        last: KakaoCloudAPIError | None = None
        for attempt in range(max(1, self.deps.settings.max_attempts)):
            nonce = ownership.new_nonce(self.deps.clock())
            await self.record_nonce(nodeclaim, nonce)
            body["description"] = ownership.describe_pending(self.deps.keyring, self.deps.cluster_identity, claim, nonce)
            try:
                return await self.deps.client.create_instance(body)
            except KakaoCloudRetryableError as exc:
                last = exc
                if exc.code == NOT_SENT:  # never left this process: POST again, new nonce
                    await self.deps.sleep(min(self.deps.settings.backoff_max, self.deps.settings.backoff_base * 2**attempt))
                    continue
                log.warning("kakaocloud: create of %s failed (%s %s), looking it up before anything else",
                            vm_name, exc.status, exc.code)
            except KakaoCloudAPIError as exc:
                raise create_failure(exc, CreatePhase.POST) from None
            for look in range(max(1, self.deps.settings.create_lookups)):
                try:
                    adopted = await self.adopt(vm_name, claim, nonce, claim_created)
                except KakaoCloudAPIError as exc:
                    raise CreateError(f"create of {vm_name} failed ({last}) and the lookup failed too ({exc}); "
                                      f"retried later", condition_reason="APIUnavailable", code=last.code) from None
                if adopted is not None:
                    return adopted[0]
                await self.deps.sleep(min(self.deps.settings.backoff_max, self.deps.settings.backoff_base * 2 ** (attempt + look)))
        assert last is not None
        raise CreateError(str(last), condition_reason="APIUnavailable", code=last.code)

    async def record_nonce(self, nodeclaim: NodeClaim, nonce: str) -> None:
        """Write the launch nonce on the stored NodeClaim before a POST (merge patch).

        A NodeClaim that is not stored (404: the conformance kit calls create directly) keeps the
        nonce only in this call and in the returned NodeClaim.

        Raises:
            CreateError: ``NonceNotRecorded`` when the API server refuses the patch (no POST then).
        """
        nodeclaim.metadata.annotations = {**nodeclaim.metadata.annotations, NONCE_ANNOTATION: nonce}
        if self.deps.kube is None:
            return
        try:
            await self.deps.kube.patch("NodeClaim", nodeclaim.metadata.name or "",
                                        {"metadata": {"annotations": {NONCE_ANNOTATION: nonce}}})
        except NotFoundError:
            return
        except KubeAPIError as exc:
            raise CreateError(f"NodeClaim {nodeclaim.metadata.name}: cannot record the launch nonce: {exc.status} {exc.reason}",
                              condition_reason="NonceNotRecorded") from None

    async def finish(
        self, nodeclaim: NodeClaim, inst: dict[str, Any], signed: bool, types: Mapping[str, InstanceType], *,
        created_now: bool, image_id: str | None = None,
    ) -> NodeClaim:
        """Sign a VM this call created (a failure deletes it), wait for ``active`` and return the NodeClaim as launched.

        Raises:
            CreateError: ``OwnershipRecordFailed``, ``InstanceFailed``, ``InstanceNotActive``, ``UnknownFlavor``..."""
        claim = nodeclaim.metadata.name or ""
        iid = str(inst["id"])
        if not signed:
            try:
                await self.sign(iid, claim)
            except KakaoCloudAPIError as exc:
                await self.discard(iid)
                raise CreateError(f"VM {iid}: could not write its ownership record: {exc}",
                                  condition_reason="OwnershipRecordFailed", code=exc.code) from None
        try:
            active = await self.wait_active(iid)
        except CreateError as exc:
            if exc.condition_reason in ("InstanceFailed",):
                await self.discard(iid)
            raise
        except KakaoCloudAPIError as exc:
            raise create_failure(exc) from None
        flavor_name = (active.get("flavor") or {}).get("name") or ""
        it = types.get(flavor_name)
        zone = str(active.get("availability_zone") or "")
        if it is None:
            raise CreateError(f"VM {iid} has flavor {flavor_name!r}, which the KCNodeClass does not offer",
                              condition_reason="UnknownFlavor")
        log.info("launched VM", extra=fields(nodeclaim=claim, instance=iid, **{"instance-type": it.name, "zone": zone}))
        return self.launched_claim(nodeclaim, it, zone, iid, image_id or (active.get("image") or {}).get("id"))

    def launched_claim(
        self, nodeclaim: NodeClaim, it: InstanceType, zone: str, instance_id: str, image_id: str | None
    ) -> NodeClaim:
        """The NodeClaim as launched on ``instance_id`` (core ``stamp_launched``, on-demand)."""
        return stamp_launched(nodeclaim, it, zone=zone, capacity_type=CAPACITY_TYPE_ON_DEMAND,
                              provider_id=bootstrap.provider_id(zone, instance_id), image_id=image_id)

    async def sign(self, instance_id: str, claim_name: str) -> None:
        """Write the signed ownership record into the VM's description."""
        desc = ownership.describe_owned(self.deps.keyring, self.deps.cluster_identity, instance_id, claim_name)
        await self.deps.client.update_instance_description(instance_id, desc)

    async def discard(self, instance_id: str) -> None:
        """Delete a VM this very call created (no ownership proof needed: we hold its id)."""
        try:
            await self.deps.client.delete_instance(instance_id)
        except KakaoCloudAPIError as exc:
            log.error("could not delete the VM after a failed launch; it stays and is reported unsigned by list",
                      extra={"instance": instance_id, "error": exc})

    async def wait_active(self, instance_id: str) -> dict[str, Any]:
        """Poll the VM until ``active``.

        Raises:
            CreateError: ``InstanceVanished``, ``InstanceFailed`` or ``InstanceNotActive`` (``build_timeout``)."""
        deadline = self.deps.clock() + self.deps.settings.build_timeout
        misses = 0
        while True:
            try:
                inst = await self.deps.client.get_instance(instance_id)
                misses = 0
            except KakaoCloudNotFoundError:
                misses += 1
                if misses > self.deps.settings.not_found_tolerance:
                    raise CreateError(f"VM {instance_id} disappeared after create", condition_reason="InstanceVanished") from None
                inst = {}
            status = str(inst.get("status") or inst.get("vm_state") or "").lower()
            if status == "active":
                return inst
            if status == "error":
                raise CreateError(f"VM {instance_id} went to status error", condition_reason="InstanceFailed", code="error")
            if self.deps.clock() >= deadline:
                timeout = self.deps.settings.build_timeout
                raise CreateError(f"VM {instance_id} not active after {timeout:.0f}s (status {status or 'unknown'})",
                                  condition_reason="InstanceNotActive")
            await self.deps.sleep(self.deps.settings.build_poll_interval)

    async def plan(self, nodeclaim: NodeClaim, nc: ResolvedNodeClass, choice: LaunchChoice, name: str) -> LaunchPlan:
        """Gather what the VM body needs: flavor, worker image, subnet, endpoint, CA hash and a
        fresh bootstrap token (created last, so a failed check leaves no token behind).

        Raises:
            CreateError: ``NoWorkerImage``, ``NoAPIEndpoint``, ``ClusterCAUnavailable``, ``BootstrapTokenFailed``.
        """
        it, offering = choice.instance_type, choice.offering
        flavor = next(f for f in await self.catalog.flavors(self.deps) if f.get("name") == it.name)
        image = nc.image_for(arch_of(flavor), gpu=flavor_gpus(flavor) > 0)
        if image is None:
            raise CreateError(f"no Kubernetes Engine {nc.kubernetes_version} worker image for {it.name}",
                              condition_reason="NoWorkerImage")
        subnet = sorted(sid for sid, z in nc.subnets if z == offering.zone)[0]
        kube = self.deps.need_kube("creating bootstrap tokens")
        endpoint = nc.cluster.get("control_plane_endpoint") or {}
        if not endpoint.get("host"):
            raise CreateError(f"cluster {self.deps.cluster_name} reports no control_plane_endpoint", condition_reason="NoAPIEndpoint")
        discovery_hash = await ca_hash(self.deps.cluster_ca)
        try:
            token = await bootstrap.create_bootstrap_token(
                kube, now=self.deps.clock(), ttl=self.deps.settings.bootstrap_token_ttl,
                description=f"karpy NodeClaim {nodeclaim.metadata.name}"
            )
        except KubeAPIError as exc:
            raise CreateError(f"cannot create a bootstrap token Secret: {exc.status} {exc.reason}",
                              condition_reason="BootstrapTokenFailed") from None
        return LaunchPlan(vm_name=name, zone=offering.zone, flavor=flavor, image=image, subnet_id=subnet,
                          endpoint=f"{endpoint['host']}:{endpoint.get('port') or 6443}", token=token, ca_hash=discovery_hash,
                          max_pods=self.deps.max_pods)
