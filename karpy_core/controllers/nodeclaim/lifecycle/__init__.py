"""NodeClaim lifecycle (Karpenter ``pkg/controllers/nodeclaim/lifecycle/``): launch,
registration, initialization, liveness, finalization, and the consistency check.

Each phase is its own module (:mod:`.launch`, :mod:`.registration`, :mod:`.initialization`,
:mod:`.liveness`, :mod:`.consistency`) and publishes its own events and metrics; the thin
:class:`~.controller.NodeClaimLifecycle` composes them.
"""

from karpy_core.controllers.nodeclaim.lifecycle.common import LifecycleEvent, LifecycleEventKind
from karpy_core.controllers.nodeclaim.lifecycle.consistency import CONSISTENCY_MIN_FRACTION, CONSISTENCY_SCAN_SECONDS
from karpy_core.controllers.nodeclaim.lifecycle.controller import NodeClaimLifecycle
from karpy_core.controllers.nodeclaim.lifecycle.initialization import EPHEMERAL_TAINTS
from karpy_core.controllers.nodeclaim.lifecycle.liveness import LAUNCH_TTL, REGISTRATION_TTL

__all__ = ["NodeClaimLifecycle", "LifecycleEvent", "LifecycleEventKind", "LAUNCH_TTL", "REGISTRATION_TTL",
           "CONSISTENCY_SCAN_SECONDS", "CONSISTENCY_MIN_FRACTION", "EPHEMERAL_TAINTS"]
