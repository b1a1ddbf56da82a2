"""What the node drain asks of a pod, answered by :class:`PodView` (parsed once per version):
mirror pod, toleration of ``karpenter.sh/disrupted:NoSchedule``, stuck terminating, drain tier,
do-not-disrupt and grace period (Karpenter ``pkg/utils/pod/scheduling.go``, ``terminator.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.state.views import (
    DEFAULT_POD_GRACE_SECONDS,
    STUCK_TERMINATING_SECONDS,
    PodView,
)
from karpy_core.utils.clock import iso

NOW = 1_780_000_000.0


def pod(*, annotations: dict[str, str] | None = None, owners: list[dict[str, Any]] | None = None,
        deleted: float | None = None, **spec: Any) -> PodView:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "ownerReferences": owners or []}
    if annotations is not None:
        meta["annotations"] = annotations
    if deleted is not None:
        meta["deletionTimestamp"] = iso(deleted)
    return PodView.of({"metadata": meta, "spec": {"nodeName": "n1", **spec}})


DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds"}


def test_drain_tiers_in_order() -> None:
    assert pod().drain_tier == 0
    assert pod(owners=[DS]).drain_tier == 1
    assert pod(priorityClassName="system-node-critical").drain_tier == 2
    assert pod(owners=[DS], priorityClassName="system-cluster-critical").drain_tier == 3
    assert pod(priorityClassName="high").drain_tier == 0  # only the two system classes are critical


def test_mirror_and_do_not_disrupt_read_the_annotations() -> None:
    assert pod(annotations={"kubernetes.io/config.mirror": "abc"}).mirror
    assert not pod(annotations={"other": "x"}).mirror and not pod().mirror
    assert pod(annotations={"karpenter.sh/do-not-disrupt": "true"}).do_not_disrupt
    assert not pod(annotations={"karpenter.sh/do-not-disrupt": "false"}).do_not_disrupt
    assert not pod(annotations={"karpenter.sh/do-not-disrupt": "1h"}).do_not_disrupt  # the drain reads "true" only
    assert not pod().do_not_disrupt


@pytest.mark.parametrize(("tolerations", "tolerates"), [
    ([], False),
    ([{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}], True),
    ([{"key": "karpenter.sh/disrupted", "operator": "Exists"}], True),  # every effect
    ([{"operator": "Exists"}], True),  # tolerates every taint
    ([{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoExecute"}], False),
    ([{"key": "other", "operator": "Exists"}], False),
    ([{"key": "karpenter.sh/disrupted", "operator": "Equal", "value": "x", "effect": "NoSchedule"}], False),
])
def test_toleration_of_the_disrupted_taint(tolerations: list[dict[str, str]], tolerates: bool) -> None:
    view = pod(tolerations=tolerations)
    assert view.tolerates_disrupted_taint is tolerates
    assert view.tolerates_disrupted_taint is tolerates  # the cached answer is the same


def test_stuck_terminating_a_minute_past_its_deletion_timestamp() -> None:
    assert not pod().stuck_terminating(NOW)
    assert not pod(deleted=NOW - STUCK_TERMINATING_SECONDS).stuck_terminating(NOW)
    assert pod(deleted=NOW - STUCK_TERMINATING_SECONDS - 1).stuck_terminating(NOW)
    assert not pod(deleted=NOW + 30).stuck_terminating(NOW)  # still in its grace period


def test_grace_period_and_claim_names() -> None:
    assert pod().grace_period_seconds == DEFAULT_POD_GRACE_SECONDS == 30
    assert pod(terminationGracePeriodSeconds=0).grace_period_seconds == 0
    assert pod(terminationGracePeriodSeconds=120).grace_period_seconds == 120
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
               {"name": "tmp", "emptyDir": {}},
               {"name": "cfg", "persistentVolumeClaim": {}}]
    assert pod(volumes=volumes).claim_names == ("data-0",)
    assert pod().claim_names == ()
