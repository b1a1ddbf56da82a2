"""A reusable conformance suite for cloud-provider plugins.

Usage, in a provider package's tests::

    from karpy_core.testing import ProviderConformance

    class TestMyCloudConformance(ProviderConformance):
        async def make_provider(self):
            return CloudProvider(create_plugin({...}))      # the facade, not the bare plugin

        def node_class_ref(self):
            return {"group": "mycloud.example", "kind": "MyNodeClass", "name": "default"}

Hooks a subclass may override (all have defaults except :meth:`make_provider`):

* ``async make_provider() -> CloudProvider`` (required) and ``async close_provider(provider)``;
* ``node_class_ref() -> dict`` (``group``/``kind``/``name`` of a NodeClass that is Ready);
* ``nodeclaim_requirements() -> list[dict]`` (extra requirements for launched claims, e.g. a
  cheap instance type so tests stay fast);
* ``make_nodeclaim(name) -> NodeClaim`` and ``make_nodepool() -> NodePool``;
* ``unknown_provider_id() -> str``: a well-formed ID of an instance that does not exist;
* ``async settle(provider)``: called between delete attempts (e.g. to advance a fake clock).

What is checked (the contract in :mod:`karpy_core.cloudprovider.hookspecs`, Karpenter
``pkg/cloudprovider/types.go``):

* the provider is prepared as karpy prepares it after loading it, before any other hook
  (:meth:`CloudProvider.prepare <karpy_core.cloudprovider.provider.CloudProvider.prepare>` with
  the context :meth:`make_provider` left, the default one if it prepared none): a ``karpy_prepare``
  that raises or answers something else than None fails every test, naming the hook; the
  teardown's ``karpy_close`` and every ``karpy_delete`` must answer None too;
* instance types are well formed, by the rule a run applies
  (:func:`~karpy_core.cloudprovider.calls.instance_type_problem`: every field of its type, ``cpu``,
  ``memory`` and ``pods`` > 0 in capacity, every offering with a zone, a
  capacity type and a finite price ``>= 0``), and requirements define the well-known labels they
  resolve (arch, os, instance-type, zone, capacity-type); a failure names the hook, the instance
  type and the field;
* create -> get -> list -> delete round trip, with the created NodeClaim's labels consistent
  with an offering of the instance type it names, and capacity/allocatable set;
* create is idempotent by NodeClaim name: creating the same NodeClaim again (a retry) or a new
  NodeClaim object of the same name (a controller restart) answers the instance already launched
  (same provider ID), and ``list`` shows one instance for that name;
* delete is idempotent: repeated deletes end with ``NodeClaimNotFoundError``, and get then raises
  it too;
* get answers the instance asked for: with two instances launched, each provider ID gets its own
  NodeClaim, and an unknown provider ID raises ``NodeClaimNotFoundError`` (never another
  instance: the garbage collector and the lifecycle controller would act on the wrong one);
* hook results have the hookspecs' types (``(group, kind)`` pairs, ``RepairPolicy``, a ``str``
  pricing note, ``(name, coroutine function)`` loops, ``InstanceType``, ``NodeClaim``, a ``str``
  drift reason, None from ``karpy_prepare`` and ``karpy_delete``): one failure naming each hook
  that answered another type and the type expected (``karpy_create returned str 'x', expected a
  NodeClaim``).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from karpy_core.apis.labels import LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_OS, LABEL_ZONE
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.apis.nodepool import NodePool
from karpy_core.cloudprovider.calls import instance_type_problem
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy
from karpy_core.errors import NodeClaimNotFoundError, PluginHookError
from karpy_core.scheduling.resources import parse_resource_list

__all__ = ["ProviderConformance", "nodeclaim_for", "nodepool_for"]

_MAX_DELETE_ATTEMPTS = 10


def nodepool_for(node_class_ref: dict[str, str], requirements: list[dict[str, Any]] | None = None,
                 name: str = "conformance") -> NodePool:
    """A minimal NodePool using ``node_class_ref``."""
    return NodePool.model_validate({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {"requirements": requirements or [], "nodeClassRef": node_class_ref}}},
    })


def nodeclaim_for(name: str, node_class_ref: dict[str, str], requirements: list[dict[str, Any]] | None = None,
                  nodepool: str = "conformance", requests: dict[str, str] | None = None) -> NodeClaim:
    """A NodeClaim as the provisioner would create it (nodepool label, requirements, requests)."""
    reqs = [{"key": LABEL_NODEPOOL, "operator": "In", "values": [nodepool]}, *(requirements or [])]
    return NodeClaim.model_validate({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {LABEL_NODEPOOL: nodepool}},
        "spec": {"requirements": reqs, "nodeClassRef": node_class_ref,
                 "resources": {"requests": requests or {"cpu": "100m", "memory": "128Mi"}}},
    })


class ProviderConformance:
    """Base class of a provider's conformance tests (not collected itself: no ``Test`` prefix)."""

    # ------------------------------------------------------------------ hooks
    async def make_provider(self) -> CloudProvider:  # pragma: no cover - must be overridden
        raise NotImplementedError("subclass ProviderConformance and implement make_provider()")

    async def close_provider(self, provider: CloudProvider) -> None:
        await provider.close()

    def node_class_ref(self) -> dict[str, str]:
        return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}

    def nodeclaim_requirements(self) -> list[dict[str, Any]]:
        return [{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]

    def make_nodepool(self) -> NodePool:
        return nodepool_for(self.node_class_ref())

    def make_nodeclaim(self, name: str) -> NodeClaim:
        return nodeclaim_for(name, self.node_class_ref(), self.nodeclaim_requirements())

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return f"{provider.name}:///zone-x/i-00000000000000000"

    async def settle(self, provider: CloudProvider) -> None:
        return None

    # ------------------------------------------------------------------ fixture
    @pytest.fixture
    async def provider(self) -> AsyncIterator[CloudProvider]:
        """:meth:`make_provider`, prepared as karpy prepares a loaded provider (with the context
        ``make_provider`` gave it, else the default one), closed after the test by
        :meth:`close_provider`. A ``karpy_prepare`` that raises or answers a value fails the test
        with the ``PluginHookError`` naming it (fresh-user trial 5: a raising one passed the kit)."""
        p = await self.make_provider()
        try:
            p.prepare(p.context)
            yield p
        finally:
            await self.close_provider(p)

    def _name(self) -> str:
        return f"conformance-{uuid.uuid4().hex[:8]}"

    # ------------------------------------------------------------------ tests
    async def test_instance_types_well_formed(self, provider: CloudProvider) -> None:
        """Every instance type passes the run's own check (:func:`~karpy_core.cloudprovider.calls.instance_type_problem`:
        fields of the right types, ``cpu``, ``memory`` and ``pods`` > 0 in capacity, offerings with
        a zone, a capacity type and a finite price >= 0, unique names) and defines the well-known labels it resolves. The facade raises
        :class:`~karpy_core.errors.PluginHookError` naming the hook, type and field when the check
        fails; a failure here names them too."""
        hook = f"cloud provider plugin {provider.name!r}: karpy_get_instance_types returned"
        types = await provider.get_instance_types(self.make_nodepool())
        assert types, f"{hook} nothing for a Ready NodeClass"
        problem = instance_type_problem(types)
        assert not problem, f"{hook} {problem}"
        for it in types:
            for key in (LABEL_ARCH, LABEL_OS, LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
                assert key in it.requirements, f"{hook} instance type {it.name!r}: requirements miss well-known label {key}"
            names_req, zones, capacity_types = (it.requirements.get(k) for k in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE))
            assert names_req is not None and names_req.has(it.name), \
                f"{hook} instance type {it.name!r} whose {LABEL_INSTANCE_TYPE} requirement does not allow its name"
            assert it.offerings, f"{hook} instance type {it.name!r} without offerings (list unavailable ones too, with available=False)"
            for o in it.offerings:
                assert zones is not None and zones.has(o.zone), \
                    f"{hook} instance type {it.name!r} whose {LABEL_ZONE} requirement does not allow offering zone {o.zone}"
                assert capacity_types is not None and capacity_types.has(o.capacity_type), (
                    f"{hook} instance type {it.name!r} whose {LABEL_CAPACITY_TYPE} requirement does not allow offering "
                    f"capacity type {o.capacity_type}")
            for res, amount in it.allocatable.items():
                assert 0 <= amount <= it.capacity.get(res, 0), \
                    f"{hook} instance type {it.name!r} with allocatable {res} {amount} above capacity {it.capacity.get(res, 0)}"

    async def test_create_get_list_delete_round_trip(self, provider: CloudProvider) -> None:
        claim = self.make_nodeclaim(self._name())
        launched = await provider.create(claim)
        pid = launched.status.provider_id
        assert pid, "create must set status.providerID"
        assert launched.metadata.name == claim.metadata.name
        assert launched.status.capacity and launched.status.allocatable
        got = await provider.get(pid)
        assert got.status.provider_id == pid
        listed = {nc.status.provider_id for nc in await provider.list()}
        assert pid in listed, "list must include the instance just created"
        await self._delete_until_gone(provider, launched)
        assert pid not in {nc.status.provider_id for nc in await provider.list()}

    async def test_labels_consistent_with_offering(self, provider: CloudProvider) -> None:
        launched = await provider.create(self.make_nodeclaim(self._name()))
        try:
            labels = launched.metadata.labels
            for key in (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE):
                assert labels.get(key), f"created NodeClaim lacks label {key}"
            types = {t.name: t for t in await provider.get_instance_types(self.make_nodepool())}
            it = types.get(labels[LABEL_INSTANCE_TYPE])
            assert it is not None, f"{labels[LABEL_INSTANCE_TYPE]} is not among get_instance_types()"
            assert any(o.zone == labels[LABEL_ZONE] and o.capacity_type == labels[LABEL_CAPACITY_TYPE] for o in it.offerings), \
                "the chosen zone/capacity type is not an offering of the chosen type"
            for key, value in it.requirements.labels().items():
                if key in labels:
                    assert labels[key] == value, f"label {key}={labels[key]} but the instance type says {value}"
            assert parse_resource_list(launched.status.capacity) == {k: v for k, v in it.capacity.items() if v}
            for req in self.make_nodeclaim("x").spec.requirements:
                if req.operator == "In" and req.key in labels:
                    assert labels[req.key] in (req.values or []), f"label {req.key} violates the NodeClaim's requirements"
        finally:
            await self._delete_until_gone(provider, launched)

    async def test_delete_is_idempotent(self, provider: CloudProvider) -> None:
        launched = await provider.create(self.make_nodeclaim(self._name()))
        await self._delete_until_gone(provider, launched)
        with pytest.raises(NodeClaimNotFoundError):
            await provider.delete(launched)
        with pytest.raises(NodeClaimNotFoundError):
            await provider.get(launched.status.provider_id or "")

    async def test_hook_results_are_typed(self, provider: CloudProvider) -> None:
        """Every hook that answers a value answers its hookspec's type: ``karpy_supported_node_classes``
        (``(group, kind)`` pairs of ``str``), ``karpy_repair_policies``, ``karpy_pricing_note`` and
        ``karpy_controllers`` when implemented, ``karpy_get_instance_types`` (a list of
        ``InstanceType``), ``karpy_create`` and ``karpy_get`` (a ``NodeClaim``), ``karpy_is_drifted``
        (a ``str``, or None), ``karpy_list`` (a list of ``NodeClaim``); ``karpy_name`` is checked when
        the facade is built (:meth:`make_provider`). The facade refuses a wrong result at run time
        (:meth:`PluginHookError.wrong_result <karpy_core.errors.PluginHookError.wrong_result>`); this
        test fails once, naming every hook that answered the wrong type and the type expected.
        ``karpy_prepare`` and ``karpy_delete`` must answer None (karpy reads nothing from them, and
        the facade refuses anything else); ``karpy_close`` is checked by the teardown and
        ``karpy_start`` (start-up I/O, the controller's only) is not called."""
        wrong: list[str] = []

        async def answer(call: Callable[[], Any]) -> Any:
            try:
                got = call()
                return await got if inspect.isawaitable(got) else got
            except PluginHookError as exc:
                if not exc.returned:
                    raise  # the hook raised: that is another test's failure, shown as it is
                wrong.append(f"{exc.hook} returned {exc.returned}")
                return None

        await answer(lambda: provider.prepare(provider.context))
        await answer(provider.supported_node_classes)
        policies = await answer(provider.repair_policies)
        assert policies is None or all(isinstance(p, RepairPolicy) for p in policies)
        await answer(provider.pricing_note)
        await answer(provider.controllers)
        types = await answer(lambda: provider.get_instance_types(self.make_nodepool()))
        assert types is None or all(isinstance(t, InstanceType) for t in types)
        claim = self.make_nodeclaim(self._name())
        launched = await answer(lambda: provider.create(claim))
        try:
            if launched is not None:
                assert isinstance(launched, NodeClaim)
                got = await answer(lambda: provider.get(launched.status.provider_id or ""))
                assert got is None or isinstance(got, NodeClaim)
                assert isinstance(await answer(lambda: provider.is_drifted(launched)), (str, type(None)))
            listed = await answer(provider.list)
            assert listed is None or all(isinstance(nc, NodeClaim) for nc in listed)
        finally:
            await answer(lambda: self._delete_created(provider, launched, claim))
        assert not wrong, (f"cloud provider plugin {provider.name!r}: hook results not of the hookspecs' types "
                           "(karpy_core/cloudprovider/hookspecs.py): " + "; ".join(wrong))

    async def _delete_created(self, provider: CloudProvider, launched: NodeClaim | None, claim: NodeClaim) -> None:
        """Delete what ``create`` launched for ``claim``: ``launched`` when create answered a NodeClaim,
        else whatever ``list`` shows under the claim's name (a create answering the wrong type may
        still have launched an instance)."""
        if launched is not None:
            await self._delete_until_gone(provider, launched)
            return
        try:
            listed = await provider.list()
        except PluginHookError:
            return
        for nc in listed:
            if nc.metadata.name == claim.metadata.name:
                await self._delete_until_gone(provider, nc)

    async def test_create_is_idempotent_by_nodeclaim_name(self, provider: CloudProvider) -> None:
        name = self._name()
        claim = self.make_nodeclaim(name)
        launched = await provider.create(claim)
        pid = launched.status.provider_id
        try:
            retried = await provider.create(claim)  # a retry: the same object again
            restarted = await provider.create(self.make_nodeclaim(name))  # a restart: a new object, the same name
            assert retried.status.provider_id == pid, "a retried create launched a second instance"
            assert restarted.status.provider_id == pid, "a create after a restart launched a second instance"
            assert restarted.metadata.labels.get(LABEL_INSTANCE_TYPE) == launched.metadata.labels.get(LABEL_INSTANCE_TYPE)
            mine = [nc.status.provider_id for nc in await provider.list() if nc.metadata.name == name]
            assert mine == [pid], f"list shows {len(mine)} instances for NodeClaim {name}, not one"
        finally:
            await self._delete_until_gone(provider, launched)

    async def test_get_unknown_is_not_found(self, provider: CloudProvider) -> None:
        with pytest.raises(NodeClaimNotFoundError):
            await provider.get(self.unknown_provider_id(provider))

    async def test_get_answers_the_instance_asked_for(self, provider: CloudProvider) -> None:
        """With instances launched, get answers each one by its own provider ID and an unknown ID
        is not found, not answered with another instance."""
        first = await provider.create(self.make_nodeclaim(self._name()))
        second = await provider.create(self.make_nodeclaim(self._name()))
        try:
            for launched in (first, second):
                pid = launched.status.provider_id or ""
                got = await provider.get(pid)
                assert got.status.provider_id == pid, f"get({pid}) answered instance {got.status.provider_id}"
            unknown = self.unknown_provider_id(provider)
            try:
                got = await provider.get(unknown)
            except NodeClaimNotFoundError:
                pass
            else:
                raise AssertionError(f"get({unknown}) of an unknown instance answered instance {got.status.provider_id} "
                                     f"(NodeClaim {got.metadata.name}); it must raise NodeClaimNotFoundError")
        finally:
            for launched in (first, second):
                await self._delete_until_gone(provider, launched)

    async def _delete_until_gone(self, provider: CloudProvider, nodeclaim: NodeClaim) -> None:
        for _ in range(_MAX_DELETE_ATTEMPTS):
            try:
                await provider.delete(nodeclaim)
            except NodeClaimNotFoundError:
                return
            await self.settle(provider)
        raise AssertionError(f"delete never reported NodeClaimNotFoundError for {nodeclaim.status.provider_id}")
