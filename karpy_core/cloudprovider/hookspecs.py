"""The CloudProvider contract: the hooks a cloud plugin implements.

This module is the single source of truth for the contract; ``docs/cloudprovider.md`` explains it
for provider authors. Every hook is an ``async def`` in the implementation, so calling a hook
through pluggy **returns an awaitable**; karpy's :class:`~karpy_core.cloudprovider.provider.CloudProvider`
facade awaits it. Exactly one plugin is active at a time, so no hook is ``firstresult`` and no
fallback chain across plugins exists.

The optional hooks (``karpy_prepare``, ``karpy_start``, ``karpy_close``, ``karpy_controllers``,
``karpy_pricing_note``) are every capability karpy hands a plugin or asks of it besides the
cloud operations: the context (kube client, feature gates, cluster name, clock, metrics registry)
arrives through ``karpy_prepare`` as one frozen
:class:`~karpy_core.cloudprovider.context.ProviderContext`. karpy reads no other attribute of a
plugin. :class:`~karpy_core.cloudprovider.contract.CloudProviderPlugin` is the same contract as a
``typing.Protocol`` for mypy.

Implementations mark their methods with :data:`karpy_core.cloudprovider.hookimpl` and may accept
fewer parameters than the spec (pluggy's opt-in arguments), so new parameters are additive.

Errors a hook may raise (all in :mod:`karpy_core.errors`): ``NodeClaimNotFoundError``,
``InsufficientCapacityError``, ``NodeClassNotReadyError``, ``CreateError`` and the generic
``CloudProviderError``; anything else is treated as a transient failure and retried.

Modelled on Karpenter's ``pkg/cloudprovider/types.go`` (the ``CloudProvider`` interface).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.types import InstanceType, RepairPolicy

__all__ = ["PROJECT", "ControllerLoop", "hookspec"]

PROJECT = "karpy"
hookspec = pluggy.HookspecMarker(PROJECT)

ControllerLoop = tuple[str, Callable[[], Coroutine[Any, Any, None]]]
"""A provider background loop: ``(name, coroutine function called with no arguments)``."""

# --------------------------------------------------------------------------------------------
# Identity
# --------------------------------------------------------------------------------------------


@hookspec
def karpy_name() -> str:  # type: ignore[empty-body]
    """Return the provider's name (``"aws"``, ``"kakaocloud"``, ``"simulated"``), used in logs,
    metrics labels and the ``--cloud-provider`` option. Not async: a plain ``str``.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_supported_node_classes() -> list[tuple[str, str]]:  # type: ignore[empty-body]
    """Return the NodeClass kinds this provider accepts in ``nodeClassRef``, as
    ``(group, kind)`` pairs such as ``("karpenter.k8s.aws", "EC2NodeClass")``. The first is the
    default. Not async.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_prepare(context: ProviderContext) -> None:
    """**Optional.** Take karpy's :class:`~karpy_core.cloudprovider.context.ProviderContext`:
    the kube client (use it unless your options named one), the feature gates, the cluster name,
    the clock and the Prometheus registry to register your own metrics on. Called by the
    controller and the simulator after load (``karpy_name`` and ``karpy_supported_node_classes``
    may already have been called) and before any other hook, and again whenever the context
    changes (each call replaces the last; register metrics once per registry). Not async, no I/O:
    do start-up I/O in ``karpy_start``.

    .. versionadded:: 0.2
    """


@hookspec
def karpy_start() -> Awaitable[None]:  # type: ignore[empty-body]
    """**Optional.** Start-up I/O (awaitable), awaited once by ``karpy controller`` after
    ``karpy_prepare`` and before the controllers run, e.g. discovering settings left unset (AWS:
    the cluster endpoint through EKS ``DescribeCluster``). Raise ``ConfigurationError`` to stop
    the controller with that message.

    .. versionadded:: 0.2
    """


@hookspec
def karpy_close() -> Awaitable[None]:  # type: ignore[empty-body]
    """**Optional.** Release the cloud clients (awaitable): awaited once when karpy stops (the
    controller's shutdown, the end of a ``karpy simulate`` run, the conformance kit's teardown).
    An error is one warning naming the plugin and the hook, never raised over the one that
    stopped karpy nor changing the command's result.

    .. versionadded:: 0.2
    """


@hookspec
def karpy_pricing_note() -> str:  # type: ignore[empty-body]
    """**Optional.** One line saying where the provider's prices come from (e.g. ``"static
    price list, us-east-1"``), printed under the ``karpy simulate`` report's first line. Not async.

    .. versionadded:: 0.2
    """


# --------------------------------------------------------------------------------------------
# Launch and lifecycle (async)
# --------------------------------------------------------------------------------------------


@hookspec
def karpy_create(nodeclaim: NodeClaim) -> Awaitable[NodeClaim]:  # type: ignore[empty-body]
    """Launch **one** instance for ``nodeclaim`` and return (awaitable) the NodeClaim as launched.

    ``nodeclaim.spec.requirements`` lists the allowed instance types, zones and capacity types
    (ordered by price by the scheduler); the provider picks one offering (normally the cheapest
    available one). The returned NodeClaim must carry:

    * ``metadata.labels`` with the resolved ``node.kubernetes.io/instance-type``,
      ``topology.kubernetes.io/zone``, ``karpenter.sh/capacity-type`` and every single-valued label
      of the chosen instance type;
    * ``status.providerID``, ``status.capacity``, ``status.allocatable`` (Kubernetes quantities),
      and ``status.imageID`` when known.

    Must be idempotent with respect to the NodeClaim's name where the cloud allows it.

    Raises:
        InsufficientCapacityError: nothing could be launched; mark the offerings unavailable.
        NodeClassNotReadyError: the referenced NodeClass is not Ready.
        CreateError: launch failed with a reason for the ``Launched`` condition.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_delete(nodeclaim: NodeClaim) -> Awaitable[None]:  # type: ignore[empty-body]
    """Terminate the instance behind ``nodeclaim`` (awaitable, returns None).

    karpy calls this repeatedly until it raises ``NodeClaimNotFoundError``: raise it once the
    instance is gone (or terminating), so deletion is idempotent. A provider must refuse to delete
    an instance it cannot prove it owns.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_get(provider_id: str) -> Awaitable[NodeClaim]:  # type: ignore[empty-body]
    """Return (awaitable) a NodeClaim describing the instance with ``provider_id``. Called by node
    termination for a deleted Node that is not Ready (Karpenter's ``finalize``): not found means
    the instance is gone and the Node is let go without a drain.

    Raises:
        NodeClaimNotFoundError: no such instance (never answer another instance instead).

    .. versionadded:: 0.1
    """


@hookspec
def karpy_list() -> Awaitable[list[NodeClaim]]:  # type: ignore[empty-body]
    """Return (awaitable) NodeClaims for every instance this provider launched for this cluster
    (used by garbage collection to find leaked instances). Only owned instances.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_get_instance_types(nodepool: NodePool) -> Awaitable[list[InstanceType]]:  # type: ignore[empty-body]
    """Return (awaitable) every :class:`~karpy_core.cloudprovider.types.InstanceType` the
    NodePool's NodeClass could launch, **including** those with no available offering (they are
    filtered later and reported as such).

    .. versionadded:: 0.1
    """


@hookspec
def karpy_is_drifted(nodeclaim: NodeClaim) -> Awaitable[str]:  # type: ignore[empty-body]
    """Return (awaitable) a drift reason string, ``""`` when the instance still matches its
    NodeClass (AMI, security groups, subnets, NodeClass hash, ...).

    .. versionadded:: 0.1
    """


@hookspec
def karpy_controllers() -> list[ControllerLoop]:  # type: ignore[empty-body]
    """**Optional.** Return the provider's own background loops as ``(name, coroutine function)``
    pairs, e.g. ``("aws.interruption", poll_forever)``. The operator runs each (called with no
    arguments) as a named task while this replica leads, and restarts the process if one fails.
    Not async itself. Providers without loops need not implement it.

    .. versionadded:: 0.1
    """


@hookspec
def karpy_repair_policies() -> list[RepairPolicy]:  # type: ignore[empty-body]
    """Return node-repair policies as :class:`~karpy_core.cloudprovider.types.RepairPolicy`
    values (condition type, condition status, toleration in seconds). Not async. Return ``[]``
    for none. (The facade also accepts Karpenter-style mappings ``{"conditionType",
    "conditionStatus", "tolerationDuration"}`` from older plugins.)

    .. versionadded:: 0.1
    """
