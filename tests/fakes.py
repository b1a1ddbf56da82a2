"""The controller tests' cloud provider (karpy's one recording fake,
:class:`~karpy_core.testing.RecordingProvider`, set up as these tests want it) and typed helpers
that read an object or condition the test expects to exist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import condition
from karpy_core.testing import RecordingProvider
from tests.scheduling.helpers import make_type


def recording_provider(**kwargs: Any) -> RecordingProvider:
    """A standalone :class:`RecordingProvider` named ``fake`` whose catalog is ``small`` (2 CPU, 4 GiB, 0.10 USD/hour) and ``large`` (8 CPU, 16 GiB,
    0.40 USD/hour), on-demand in ``zone-a``; its instances are ``fake:///zone-a/r-000001``,
    ``-000002``... in launch order. ``kwargs`` go to the constructor (``repair_policies``...)."""
    types = [make_type("small", 2, 4, zones=("zone-a",)), make_type("large", 8, 16, zones=("zone-a",))]
    return RecordingProvider(name="fake", instance_types=types, **kwargs)


def claim_names(recorder: RecordingProvider, hook: str) -> list[str]:
    """The NodeClaim names ``hook`` (``create``, ``delete``, ``is_drifted``) was called with, in order."""
    return [str(call.args["nodeclaim"].metadata.name) for call in recorder.calls_of(hook)]


class WithoutOptionalHooks(RecordingProvider):
    """The recording provider with the required hooks only: a plugin implementing none of the
    optional ones (pluggy registers no hook for an attribute that is not a function)."""

    karpy_prepare = karpy_start = karpy_close = karpy_controllers = karpy_pricing_note = None  # type: ignore[assignment]


def must_peek(cluster: InMemoryCluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """``cluster.peek`` of an object the test expects to exist."""
    obj = cluster.peek(kind, name, namespace)
    assert obj is not None, f"{kind} {namespace}/{name} not found"
    return obj


def must_condition(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The status condition ``type_`` of ``obj``, which the test expects to be set."""
    assert obj is not None
    cond = condition(obj, type_)
    assert cond is not None, f"no {type_} condition"
    return cond
