"""VMs karpy cannot prove it owns: how they are classified, refused and reported.

A VM is karpy's only when its description verifies (:mod:`karpy_kakaocloud.ownership`). Any other
VM that looks like karpy's (unsigned with a karpy name, tampered, another cluster's, an unknown
key), any Kubernetes Engine VM, and a pending record that is copied, duplicated or outside its
launch window is never deleted or adopted: :class:`UnownedReporter` logs it, publishes a Warning
``UnownedInstance`` event (through the KubeClient port, best effort) and counts it in
``karpy_kakaocloud_unowned_instances_total{reason, action}``; ``get``/``delete`` answer
:class:`UnownedInstanceError`.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from karpy_core.errors import NodeClaimNotFoundError
from karpy_kakaocloud import ownership
from karpy_kakaocloud.ownership import Verdict

if TYPE_CHECKING:
    from karpy_core.kube.events import EventRecorder
    from karpy_core.kube.port import KubeClient
    from karpy_kakaocloud.deps import KakaoCloudDeps

__all__ = ["UnownedInstanceError", "UnownedReporter", "created_at", "pending_key"]

log = logging.getLogger("karpy.kakaocloud")


class UnownedInstanceError(NodeClaimNotFoundError):
    """The instance behind a NodeClaim exists but karpy cannot prove it owns it (``code`` names why:
    ``unsigned``, ``tampered``, ``foreign-cluster``, ``unknown-key``, ``k8se``, ``pending``,
    ``other-nodeclaim``, ``duplicate-record``, ``copied-record``, ``predates-nodeclaim``,
    ``outside-launch-window``, ``unverifiable``). It is left alone and reported."""


def pending_key(v: Verdict) -> tuple[str, str] | None:
    """What makes two pending records "the same POST": (NodeClaim, launch nonce); None for a
    verdict that is not :attr:`~karpy_kakaocloud.ownership.Ownership.PENDING`."""
    if v.ownership is not ownership.Ownership.PENDING or v.nodeclaim is None or v.nonce is None:
        return None
    return v.nodeclaim, v.nonce


def created_at(instance: Mapping[str, Any]) -> float | None:
    """The VM's ``created_at`` (ISO-8601 UTC, reference §2) as seconds since the epoch, or None."""
    text = instance.get("created_at")
    if not isinstance(text, str) or not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


class UnownedReporter:
    """Classifies VMs and reports those karpy will not touch. Every method takes the plugin's
    :class:`~karpy_kakaocloud.deps.KakaoCloudDeps` it reads (keyring, cluster identity, settings,
    kube client); the reporter keeps only what it counted and reported.

    Args:
        registry: where ``karpy_kakaocloud_unowned_instances_total`` is registered.

    Attributes:
        counter: ``karpy_kakaocloud_unowned_instances_total{reason, action}``.
        reported: instance id -> reason, for every VM reported (latest reason).
    """

    def __init__(self, registry: CollectorRegistry):
        self.counter = Counter(
            "karpy_kakaocloud_unowned_instances_total",
            "KakaoCloud VMs karpy refused to manage because their ownership record did not verify, by reason and action.",
            ["reason", "action"],
            registry=registry,
        )
        self.reported: dict[str, str] = {}
        self._reported: set[tuple[str, str]] = set()
        self._recorder: tuple[KubeClient, EventRecorder] | None = None

    async def report(
        self, deps: KakaoCloudDeps, instance: dict[str, Any], reason: str, action: str, nodeclaim: str | None = None
    ) -> None:
        """Count, remember and (once per VM and reason) log and publish a Warning event (through
        ``deps.kube``, best effort) saying karpy will not ``action`` the VM because of ``reason``."""
        iid = str(instance.get("id") or "")
        self.counter.labels(reason=reason, action=action).inc()
        self.reported[iid] = reason
        if (iid, reason) in self._reported:
            return
        self._reported.add((iid, reason))
        message = (
            f"KakaoCloud VM {iid} ({instance.get('name') or 'unnamed'}) is not provably owned by this cluster "
            f"({reason}); karpy will not {action} it"
        )
        log.warning(message, extra={"instance_id": iid, "reason": reason, "action": action})
        kube = deps.kube
        if kube is not None:
            from karpy_core.kube.events import EventRecorder
            from karpy_core.utils.clock import RealClock

            if self._recorder is None or self._recorder[0] is not kube:
                self._recorder = (kube, EventRecorder(kube, RealClock()))
            obj = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": nodeclaim or instance.get("name") or iid}}
            try:
                await self._recorder[1].publish(obj, "Warning", "UnownedInstance", message)
            except Exception as exc:  # events are best effort
                log.debug("could not publish event: %s", type(exc).__name__)

    @staticmethod
    def classify(deps: KakaoCloudDeps, instance: Mapping[str, Any]) -> Verdict:
        """The ownership verdict of the VM's description for this cluster (``deps.keyring``,
        ``deps.cluster_identity``)."""
        return ownership.verify(instance.get("description"), deps.keyring, deps.cluster_identity, str(instance.get("id") or ""))

    @staticmethod
    def looks_like_ours(instance: dict[str, Any]) -> bool:
        """A karpy VM name or record prefix (reported when it does not verify)."""
        return str(instance.get("name") or "").startswith("karpy-") or str(instance.get("description") or "").startswith("karpy1:")

    def pending_counts(
        self, deps: KakaoCloudDeps, instances: Iterable[Mapping[str, Any]], *, launch_window_only: bool = False
    ) -> Tally[tuple[str, str]]:
        """The one duplicate rule, shared by ``delete`` and garbage collection (``list``): how
        many of ``instances`` (every VM of the project, whatever its name, status, age or
        ``is_k8se``; a copy may be renamed) carry a verifying pending record of each
        (NodeClaim, nonce) (:func:`pending_key`). A count above 1 means one of them is a copy and
        karpy cannot tell which: none is deleted.

        Adoption asks a narrower question, "which VM did this POST make", and passes
        ``launch_window_only``: only VMs created in the nonce's launch window
        (:meth:`in_launch_window`) can be that POST's, so only they are counted; two of them
        still mean none is adopted."""
        out: Tally[tuple[str, str]] = Tally()
        for inst in instances:
            v = self.classify(deps, inst)
            key = pending_key(v)
            if key is not None and (not launch_window_only or self.in_launch_window(deps, inst, v)):
                out[key] += 1
        return out

    @staticmethod
    def in_launch_window(deps: KakaoCloudDeps, inst: Mapping[str, Any], v: Verdict) -> bool:
        """Whether a pending VM's ``created_at`` lies in ``[t - clock_skew, t + request_timeout +
        clock_skew]``, ``t`` the POST time its nonce carries: the only time karpy's POST can have
        made it. An older VM renamed and given a copied record falls before the window."""
        t = ownership.nonce_time(v.nonce or "")
        created = created_at(inst)
        if t is None or created is None:
            return False
        settings = deps.settings
        skew = settings.clock_skew
        return t - skew <= created <= t + settings.request_timeout + skew
