"""KCNodeClass resolution: spec -> the ids, names, zones and images a launch needs, plus status.

:func:`resolve` checks each part of a ``KCNodeClass`` against the OpenAPI and returns a
:class:`ResolvedNodeClass` with one condition per part (seed 004 Step 3 lists them), rolled up into
``Ready``:

========================  ===========================================  ==========================================
condition                 True when                                    False reasons
========================  ===========================================  ==========================================
KubernetesVersionReady    ``bootstrap.kubernetesVersion`` is offered   ``VersionNotOffered``, ``VersionSkew``
                          by KE (``GET /versions``) and equals the     (not the control plane's minor or one
                          control plane's minor or the one below       below), ``ClusterNotFound``
ImagesReady               KE offers a non-GPU VM worker image for it   ``NoWorkerImage``, ``VersionNotReady``
SubnetsReady              every subnet exists, is ``ACTIVE``, in a     ``SubnetNotFound``, ``SubnetNotActive``,
                          kr-central-2 zone and the cluster's VPC      ``SubnetNotInClusterVPC``, ``UnknownZone``
SecurityGroupsReady       every security group id exists (-> name)     ``SecurityGroupNotFound``
KeyPairReady              ``keyName`` is unset or the key pair exists  ``KeyPairNotFound``
Ready                     all of the above                             ``NotReady`` (message lists the failures)
========================  ===========================================  ==========================================

API failures make the affected conditions ``Unknown`` with reason ``AuthenticationFailed``
(401/403: check the credentials Secret and the access key's roles) or ``APIUnavailable``, and
``Ready=False`` with the same reason. Status is written back through the KubeClient port
(``status`` subresource), keeping ``lastTransitionTime`` of unchanged conditions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from karpy_core.redaction import redact
from karpy_core.utils.clock import iso
from karpy_kakaocloud.apis import CONDITION_TYPES, GROUP
from karpy_kakaocloud.client import (
    KakaoCloudAPIError,
    KakaoCloudAuthError,
    KakaoCloudClient,
    KakaoCloudNotFoundError,
)
from karpy_kakaocloud.instancetypes import ZONES

if TYPE_CHECKING:
    from karpy_core.kube.port import KubeClient

__all__ = ["SUPPORTED_NODE_CLASSES", "ResolvedNodeClass", "Condition", "resolve", "write_status", "version_tuple"]

SUPPORTED_NODE_CLASSES: list[tuple[str, str]] = [(GROUP, "KCNodeClass")]
"""The NodeClass kinds the KakaoCloud provider accepts in ``nodeClassRef``."""


@dataclass(frozen=True)
class Condition:
    """One status condition (``status`` is ``"True"``, ``"False"`` or ``"Unknown"``)."""

    type: str
    status: str
    reason: str
    message: str = ""


@dataclass
class ResolvedNodeClass:
    """What a Ready KCNodeClass resolves to.

    Attributes:
        name: the KCNodeClass name.
        conditions: by type (see :data:`karpy_kakaocloud.apis.CONDITION_TYPES`).
        subnets: ``[(id, zone)]`` in spec order.
        security_groups: ``[(id, name)]`` in spec order.
        images: KE worker images for the version (dicts as the API returns them).
        kubernetes_version: ``MAJOR.MINOR``.
        key_name: SSH key pair or None.
        root_volume_gib: root volume size, GiB (default 50).
        delete_on_termination: root volume goes with the VM.
        cluster: the KE cluster dict used (``control_plane_endpoint``...).
    """

    name: str
    conditions: dict[str, Condition] = field(default_factory=dict)
    subnets: list[tuple[str, str]] = field(default_factory=list)
    security_groups: list[tuple[str, str]] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    kubernetes_version: str | None = None
    key_name: str | None = None
    root_volume_gib: int = 50
    delete_on_termination: bool = True
    cluster: dict[str, Any] = field(default_factory=dict)
    spec_hash: str = ""

    @property
    def ready(self) -> bool:
        c = self.conditions.get("Ready")
        return c is not None and c.status == "True"

    @property
    def zones(self) -> list[str]:
        return sorted({z for _, z in self.subnets})

    def not_ready_message(self) -> str:
        bad = [
            f"{c.type}={c.status} ({c.reason}: {c.message})"
            for t, c in sorted(self.conditions.items())
            if t != "Ready" and c.status != "True"
        ]
        return "; ".join(bad) or (self.conditions["Ready"].message if "Ready" in self.conditions else "not resolved")

    def image_for(self, arch: str, gpu: bool) -> dict[str, Any] | None:
        """The worker image for an architecture (``amd64``/``arm64``) and GPU kind, or None."""
        want = {"amd64": ("x86_64", "amd64"), "arm64": ("aarch64", "arm64")}.get(arch, (arch,))
        matches = [
            i for i in self.images
            if str(i.get("architecture") or "x86_64").lower() in want and bool(i.get("is_gpu_type")) == gpu
            and (i.get("instance_type") or "vm") == "vm"
        ]
        return sorted(matches, key=lambda i: (str(i.get("k8s_version")), str(i.get("name"))), reverse=True)[0] if matches else None


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """``"1.35"`` or ``"1.35.2"`` or ``"v1.35.2"`` -> ``(1, 35)``; None when unparsable."""
    parts = (text or "").lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _api_failure(exc: KakaoCloudAPIError) -> tuple[str, str]:
    if isinstance(exc, KakaoCloudAuthError):
        return "AuthenticationFailed", f"KakaoCloud refused the credentials or permission ({exc.code}): {exc.api_message}"
    return "APIUnavailable", str(exc)


async def _version_and_images(
    client: KakaoCloudClient, want: str, cluster: dict[str, Any]
) -> tuple[Condition, Condition, list[dict[str, Any]]]:
    cp = version_tuple((cluster.get("version") or {}).get("minor_version"))
    wanted = version_tuple(want)
    offered = {version_tuple(v.get("minor_version")) for v in await client.list_versions()}
    if wanted is None:
        vc = Condition("KubernetesVersionReady", "False", "InvalidVersion", f"{want!r} is not MAJOR.MINOR")
    elif wanted not in offered:
        names = ", ".join(f"{a}.{b}" for a, b in sorted(v for v in offered if v))
        vc = Condition("KubernetesVersionReady", "False", "VersionNotOffered",
                       f"Kubernetes Engine does not offer {want}; it offers {names or 'none'}")
    elif cp is None or not (wanted == cp or (wanted[0] == cp[0] and wanted[1] == cp[1] - 1)):
        cps = f"{cp[0]}.{cp[1]}" if cp else "unknown"
        vc = Condition("KubernetesVersionReady", "False", "VersionSkew",
                       f"{want} must equal the control plane's minor version {cps} or the one below it")
    else:
        vc = Condition("KubernetesVersionReady", "True", "Resolved", f"{want} (control plane {cp[0]}.{cp[1]})")
    if vc.status != "True":
        return vc, Condition("ImagesReady", "False", "VersionNotReady", "no valid Kubernetes version"), []
    images = [
        i for i in await client.list_worker_images(k8s_version=want)
        if version_tuple(str(i.get("k8s_version") or "")) == wanted
    ]
    if not any(not i.get("is_gpu_type") and (i.get("instance_type") or "vm") == "vm" for i in images):
        return vc, Condition("ImagesReady", "False", "NoWorkerImage", f"Kubernetes Engine offers no VM worker image for {want}"), images
    names = ", ".join(sorted(str(i.get("name")) for i in images))
    return vc, Condition("ImagesReady", "True", "Resolved", names[:300]), images


async def _subnets(client: KakaoCloudClient, ids: list[str], cluster_vpc: str | None) -> tuple[Condition, list[tuple[str, str]]]:
    out: list[tuple[str, str]] = []
    for sid in ids:
        try:
            s = await client.get_subnet(sid)
        except KakaoCloudNotFoundError:
            return Condition("SubnetsReady", "False", "SubnetNotFound", f"subnet {sid} does not exist"), out
        status = s.get("provisioning_status")
        if status and status != "ACTIVE":
            return Condition("SubnetsReady", "False", "SubnetNotActive", f"subnet {sid} is {status}"), out
        zone = s.get("availability_zone")
        if zone not in ZONES:
            message = f"subnet {sid} is in zone {zone!r}, not one of {', '.join(ZONES)}"
            return Condition("SubnetsReady", "False", "UnknownZone", message), out
        if cluster_vpc and s.get("vpc_id") and s["vpc_id"] != cluster_vpc:
            return Condition("SubnetsReady", "False", "SubnetNotInClusterVPC",
                             f"subnet {sid} is in VPC {s['vpc_id']}, the cluster is in {cluster_vpc}"), out
        out.append((sid, str(zone)))
    zones = sorted({z for _, z in out})
    return Condition("SubnetsReady", "True", "Resolved", f"{len(out)} subnet(s) in {', '.join(zones)}"), out


async def _security_groups(client: KakaoCloudClient, ids: list[str]) -> tuple[Condition, list[tuple[str, str]]]:
    out: list[tuple[str, str]] = []
    for gid in ids:
        try:
            g = await client.get_security_group(gid)
        except KakaoCloudNotFoundError:
            return Condition("SecurityGroupsReady", "False", "SecurityGroupNotFound", f"security group {gid} does not exist"), out
        out.append((gid, str(g.get("name") or "")))
    return Condition("SecurityGroupsReady", "True", "Resolved", ", ".join(n for _, n in out)), out


async def _key_pair(client: KakaoCloudClient, name: str | None) -> Condition:
    if not name:
        return Condition("KeyPairReady", "True", "NotRequired", "spec.keyName is not set")
    try:
        await client.get_keypair(name)
    except KakaoCloudNotFoundError:
        return Condition("KeyPairReady", "False", "KeyPairNotFound", f"key pair {name} does not exist")
    return Condition("KeyPairReady", "True", "Resolved", name)


async def resolve(client: KakaoCloudClient, nodeclass: dict[str, Any], cluster_name: str) -> ResolvedNodeClass:
    """Resolve a KCNodeClass object (API dict). Never raises for API errors: they become conditions."""
    from karpy_kakaocloud.apis import KCNodeClass

    model = KCNodeClass.model_validate(nodeclass)
    spec = model.spec
    out = ResolvedNodeClass(
        name=model.metadata.name or "",
        kubernetes_version=spec.bootstrap.kubernetes_version,
        key_name=spec.key_name,
        root_volume_gib=spec.root_volume.size_gib if spec.root_volume else 50,
        delete_on_termination=spec.root_volume.delete_on_termination if spec.root_volume else True,
    )
    conds: list[Condition] = []
    try:
        try:
            cluster = await client.get_cluster(cluster_name)
        except KakaoCloudNotFoundError:
            cluster = {}
        out.cluster = cluster
        if not cluster:
            conds.append(Condition("KubernetesVersionReady", "False", "ClusterNotFound",
                                   f"Kubernetes Engine cluster {cluster_name!r} was not found"))
            conds.append(Condition("ImagesReady", "False", "VersionNotReady", "no cluster"))
        else:
            vc, ic, images = await _version_and_images(client, spec.bootstrap.kubernetes_version, cluster)
            conds += [vc, ic]
            out.images = images
        cluster_vpc = (cluster.get("vpc_info") or {}).get("id")
        sc, out.subnets = await _subnets(client, [t.id for t in spec.subnet_selector_terms], cluster_vpc)
        gc, out.security_groups = await _security_groups(client, [t.id for t in spec.security_group_selector_terms])
        kc = await _key_pair(client, spec.key_name)
        conds += [sc, gc, kc]
    except KakaoCloudAPIError as exc:
        reason, message = _api_failure(exc)
        have = {c.type for c in conds}
        conds += [Condition(t, "Unknown", reason, message) for t in CONDITION_TYPES if t != "Ready" and t not in have]
        out.conditions = {c.type: c for c in conds}
        out.conditions["Ready"] = Condition("Ready", "False", reason, message)
        return out
    out.conditions = {c.type: c for c in conds}
    bad = [c for c in conds if c.status != "True"]
    out.conditions["Ready"] = (
        Condition("Ready", "True", "Ready", "") if not bad
        else Condition("Ready", "False", "NotReady", "; ".join(f"{c.type}: {c.reason}" for c in bad))
    )
    return out


async def write_status(kube: KubeClient, resolved: ResolvedNodeClass, previous: dict[str, Any], now: float) -> None:
    """Patch the KCNodeClass status (conditions keep ``lastTransitionTime`` when unchanged)."""
    old = {c.get("type"): c for c in ((previous.get("status") or {}).get("conditions") or [])}
    conds = []
    for t in CONDITION_TYPES:
        c = resolved.conditions.get(t)
        if c is None:
            continue
        prev = old.get(t)
        ltt = prev.get("lastTransitionTime") if prev and prev.get("status") == c.status and prev.get("lastTransitionTime") else iso(now)
        entry = {"type": t, "status": c.status, "reason": c.reason, "message": redact(c.message)[:1000], "lastTransitionTime": ltt}
        gen = (previous.get("metadata") or {}).get("generation")
        if gen is not None:
            entry["observedGeneration"] = gen
        conds.append(entry)
    status = {
        "subnets": [{"id": i, "zone": z} for i, z in resolved.subnets],
        "securityGroups": [{"id": i, "name": n} for i, n in resolved.security_groups],
        "images": [
            {"id": i.get("id"), "name": i.get("name"), "architecture": i.get("architecture"), "isGpuType": bool(i.get("is_gpu_type"))}
            for i in resolved.images if i.get("id")
        ],
        "kubernetesVersion": resolved.kubernetes_version,
        "conditions": conds,
    }
    await kube.patch("KCNodeClass", resolved.name, {"status": status}, status=True)


