"""The placement checks, written once: can this pod join this NodeClaim, or this existing node?

:func:`check_claim` is the only place that decides whether a pod fits a NodeClaim being planned
(taints, ``limits.nodes``, resources the NodePool offers, host ports, node-affinity terms,
topology, instance types, offerings, room, limits, minValues). The scheduler calls it while
searching (``explain=False``: failures carry no text and cost no formatting) and the explainer
calls it on an empty probe claim (``explain=True``), so the reason a pod is reported pending is
the check that actually rules it out. :func:`check_node` does the same for existing nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.scheduling.claim import ClaimState, ports_conflict
from karpy_core.scheduling.infeasible import Infeasible, InfeasibleKind, quiet
from karpy_core.scheduling.nodes import NodeUsage
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import MinValuesPolicy
from karpy_core.scheduling.preferences import Attempt
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, fits
from karpy_core.scheduling.taints import untolerated
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable
from karpy_core.scheduling.topology import Verdict
from karpy_core.utils.quantity import format_quantity

__all__ = ["Fit", "check_claim", "check_node", "candidate_domains", "limit_mask", "pool_full"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
K = InfeasibleKind
Failure = tuple[Infeasible, ...]

# Detail-less answers of the search, built once (the hot path neither formats nor allocates).
_TAINT: Failure = (quiet(K.UNTOLERATED_TAINT),)
_NODE_LIMIT: Failure = (quiet(K.NODE_LIMIT),)
_NOT_OFFERED: Failure = (quiet(K.RESOURCE_NOT_OFFERED),)
_HOST_PORT: Failure = (quiet(K.HOST_PORT),)
_CONFLICT: Failure = (quiet(K.INCOMPATIBLE_REQUIREMENTS),)
_NO_TYPE: Failure = (quiet(K.NO_MATCHING_TYPE),)
_PINNED: Failure = (quiet(K.TOPOLOGY),)
_NO_OFFERING: Failure = (quiet(K.NO_OFFERING),)
_NO_ROOM: Failure = (quiet(K.NO_ROOM),)
_LIMITS: Failure = (quiet(K.LIMIT_EXCEEDED),)
_MIN_VALUES: Failure = (quiet(K.MIN_VALUES),)
_NODE_TAINT = quiet(K.UNTOLERATED_TAINT)
_NODE_AFFINITY = quiet(K.INCOMPATIBLE_REQUIREMENTS)
_NODE_ROOM = quiet(K.NO_ROOM)
_NODE_PORT = quiet(K.HOST_PORT)


@dataclass(frozen=True, slots=True)
class Fit:
    """What a claim becomes when the pod joins it.

    Attributes:
        requirements: the claim's requirements narrowed by the pod's term and topology domains.
        mask: the claim's remaining instance types (rows of its table).
        requests: claim requests plus the pod's, as a row over the table's resources.
        relaxed: minValues could not be met and the BestEffort policy let it pass.
    """

    requirements: Requirements
    mask: BoolArray
    requests: IntArray
    relaxed: bool


def pool_full(remaining: Resources | None) -> bool:
    """True when a NodePool's ``limits.nodes`` leaves no room for another NodeClaim."""
    return remaining is not None and "nodes" in remaining and remaining["nodes"] < 1


def limit_mask(remaining: Resources | None, table: TypeTable, mask: BoolArray, reserved: Resources) -> BoolArray:
    """``mask`` without the types whose capacity exceeds what the NodePool's limits leave
    (``remaining`` plus what this claim already reserved); ``remaining`` None means no limits."""
    if remaining is None:
        return mask
    out = mask.copy()
    for r, left in remaining.items():
        if r == "nodes":
            continue
        i = table.index.get(r)
        if i is None:
            continue
        out &= table.capacity[:, i] <= left + reserved.get(r, 0)
    return out


def candidate_domains(
    hostname: str, reqs: Requirements, keys: set[str], domains: Mapping[str, set[str]]
) -> dict[str, frozenset[str] | None]:
    """The domains a claim with requirements ``reqs`` could be in, per topology key (its
    placeholder hostname for ``kubernetes.io/hostname``); None when it can be in none."""
    out: dict[str, frozenset[str] | None] = {}
    for key in keys:
        if key == LABEL_HOSTNAME:
            out[key] = frozenset((hostname,))
            continue
        req = reqs.get(key)
        universe = domains.get(key, set())
        if req is None:
            out[key] = frozenset(universe) or None
        elif req.complement:
            out[key] = frozenset(v for v in universe if req.has(v)) or None
        else:
            vals = frozenset(req.values)
            out[key] = (vals & universe) or vals or None
    return out


def _pin(reqs: Requirements, choice: Mapping[str, str]) -> Requirements | str:
    """``reqs`` with each chosen topology domain pinned, or the key whose domain it excludes."""
    for key, domain in choice.items():
        if key == LABEL_HOSTNAME:
            continue
        r = reqs.get(key)
        if r is None or r.size() != 1:
            reqs.add(Requirement(key, False, frozenset((domain,))))
        elif not r.has(domain):
            return key
    return reqs


def _as_written(template: NodePoolTemplate, req: Requirement) -> str:
    """``req`` (a NodePool requirement after its entries for one key were intersected) in the
    user's words when several entries made it: ``key In [a] and key NotIn [a] (no value meets
    all of them)``, not the ``key DoesNotExist`` they come to; one entry: ``req.describe()``."""
    tspec = ((template.raw.get("spec") or {}).get("template") or {}).get("spec") or {}
    written = []
    for entry in tspec.get("requirements") or ():
        if isinstance(entry, Mapping) and entry.get("key") == req.key:
            values = entry.get("values")
            written.append(f"{req.key} {entry.get('operator')}" + (f" [{', '.join(str(v) for v in values)}]" if values else ""))
    if req.key in template.labels and req.key != LABEL_NODEPOOL:
        written.append(f"template label {req.key}={template.labels[req.key]}")
    if len(written) < 2:
        return req.describe()
    return " and ".join(written) + " (no value meets all of them)"


def unmet_nodepool_requirements(table: TypeTable) -> str:
    """Text naming which of a NodePool's requirements no instance type meets, for the
    explanation of a pod that asks nothing of its own: each requirement no listed type meets
    alone, with the values the types do carry for its key (``kubernetes.io/arch In [sparc]
    (instance types have amd64, arm64)``); else, when they only fail together, those that
    some type does not meet; says so when the NodePool lists no instance type at all, or none
    with an available offering (then every zone and capacity-type requirement fails: the cause is
    the offerings, not those requirements)."""
    template = table.template
    types = template.instance_types
    if not types:
        return "the NodePool requirements (the NodePool has no instance types)"
    if not any(o.available for it in types for o in it.offerings):
        # every requirement on zone or capacity type then fails for want of values: name the cause
        # (trial 16: "karpenter.sh/capacity-type In [on-demand]" where no type had an offering)
        said = "an offering" if not any(it.offerings for it in types) else "an available offering"
        return (f"the NodePool requirements: none of its {len(types):,} instance type{'s' if len(types) != 1 else ''} "
                f"has {said} (a zone and capacity type to launch in)")
    alone = []
    for req in template.requirements:
        if any(it.requirements.intersects(Requirements.of(req)) for it in types):
            continue
        seen = sorted({v for it in types if (r := it.requirements.get(req.key)) is not None and not r.complement for v in r.values})
        have = f" (instance types have {', '.join(seen[:8])}{', ...' if len(seen) > 8 else ''})" if seen else ""
        alone.append(f"{_as_written(template, req)}{have}")
    if alone:
        return "the NodePool requirement" + ("s " if len(alone) > 1 else " ") + "; ".join(alone)
    narrowing = [r.describe() for r in template.requirements
                 if not all(it.requirements.intersects(Requirements.of(r)) for it in types)]
    return f"the NodePool requirements together ({', '.join(narrowing) or template.requirements.describe()})"


def _pool_requirements_text(claim: ClaimState, table: TypeTable) -> str:
    # a claim holding pods was narrowed by them too: only a new claim's types are the NodePool's
    return "the NodePool requirements" if claim.pods else unmet_nodepool_requirements(table)


def _not_offered(table: TypeTable, pod: PodInfo) -> Infeasible:
    """Why no type of ``table`` offers a resource ``pod`` requests: the NodePool's types, which its
    requirements chose; the catalog may well have the resource elsewhere (trial 17: "no instance
    type offers resource nvidia.com/gpu" with GPU types in it). Those of the NodePool's catalog
    that do have it are named, with why they are out: no offering at all (a plugin listing no
    zone for them; a ``NO_OFFERING``, since allowing more types would not help: trial 19), or the
    NodePool's requirements."""
    missing = [r for r in sorted(pod.requests) if r not in table.index]
    line = f"none of its instance types (those its requirements allow) offers resource {', '.join(missing)}"
    having = [it for it in table.template.instance_types if any(it.allocatable.get(r, 0) > 0 for r in missing)]
    if not having:
        return Infeasible(K.RESOURCE_NOT_OFFERED, line)
    names = ", ".join(it.name for it in having[:3]) + (f", +{len(having) - 3} more" if len(having) > 3 else "")
    if all(not it.offerings for it in having):
        return Infeasible(K.NO_OFFERING, f"its instance types that offer resource {', '.join(missing)} ({names}) have no "
                                         "offering (a zone and capacity type to launch in)")
    why = "have no offering or are ruled out by its requirements" if any(not it.offerings for it in having) else \
        "are ruled out by its requirements"
    return Infeasible(K.RESOURCE_NOT_OFFERED, f"{line}: those that do ({names}) {why}")


def _no_offering_at_all(table: TypeTable) -> Infeasible | None:
    """The reason when none of the NodePool's instance types has any offering (its NodeClass's
    zones match none of the plugin's, say), or None: every requirement on zone or
    capacity type then fails for want of values, and the pod's own requests do not matter, so
    this is said first (trial 16: "karpenter.sh/capacity-type In [on-demand]"; trial 19: "no
    instance type matches the NodePool requirements: none of its 4 instance types has an
    offering"). Explanations only."""
    types = table.template.instance_types
    if not types or table.any_available_offering or any(it.offerings for it in types):
        # offerings that are there but unavailable (a quota used up, capacity out) keep their own
        # reason, naming the zones and capacity types: "no available offering for ..."
        return None
    return Infeasible(K.NO_OFFERING, f"none of its {len(types):,} instance type{'s' if len(types) != 1 else ''} "
                                     "has an offering (a zone and capacity type to launch in)")


def check_claim(  # noqa: C901
    claim: ClaimState,
    pod: PodInfo,
    att: Attempt,
    verdict: Verdict | None,
    remaining: Resources | None,
    domains: Mapping[str, set[str]],
    min_values: MinValuesPolicy,
    explain: bool = False,
) -> Fit | Failure:
    """Whether ``pod`` (constrained as in ``att``, with topology ``verdict``) can join ``claim``.

    Args:
        claim: the claim; an empty one (:meth:`ClaimState.fresh`) asks about a new NodeClaim.
        remaining: the NodePool's limits left (internal units, ``nodes`` a count), None for none.
        domains: every reachable domain per topology key (for topology choices).
        min_values: the minValues policy.
        explain: fill in :attr:`Infeasible.detail` (otherwise failures carry no text, except
            topology ones, whose text the verdict already holds).

    Returns:
        a :class:`Fit`, or why not: one :class:`Infeasible` for a check that fails before the
        node-affinity terms, else one per term (the pod may use any term). Without ``explain``
        only the last failure is returned.
    """
    table = claim.table
    template = table.template
    taint = untolerated(template.taints, pod.tolerations)
    if taint is not None:
        return (Infeasible(K.UNTOLERATED_TAINT, f"pod does not tolerate taint {taint}"),) if explain else _TAINT
    if not claim.pods and pool_full(remaining):
        if not explain:
            return _NODE_LIMIT
        nodes = template.limits.get("nodes", 0) if template.limits else 0
        return (Infeasible(K.NODE_LIMIT, f"limits.nodes={format_quantity('nodes', nodes)} reached"),)
    if explain and not claim.pods:
        none = _no_offering_at_all(table)
        if none is not None:
            return (none,)
    if verdict is not None and claim.pods and verdict.open_checks and not explain:
        # the claim's pods would break a rule in every domain it can still settle in (a cheap
        # early test of Verdict.choose, which makes the same check on the narrowed domains)
        blocked = verdict.blocked(claim, lambda key: candidate_domains(claim.hostname, claim.requirements, {key}, domains)[key])
        if blocked is not None:
            return (blocked,)
    vec = table.vector(pod.requests)
    if vec is None:
        if not explain:
            return _NOT_OFFERED
        return (_no_offering_at_all(table) or _not_offered(table, pod),)
    if pod.host_ports:
        clash = ports_conflict(claim.host_ports, pod.host_ports)
        if clash is not None:
            if not explain:
                return _HOST_PORT
            held = "held by a DaemonSet on every node of this NodePool" if not claim.pods else "already in use on this NodeClaim"
            return (Infeasible(K.HOST_PORT, f"host port {clash[1]}/{clash[2]} is {held}"),)
    if verdict is not None:
        host_rule = verdict.rules.get(LABEL_HOSTNAME)
        if host_rule is not None and (claim.hostname in host_rule.forbidden or (
                host_rule.allowed is not None and claim.hostname not in host_rule.allowed)):
            why = host_rule.why or Infeasible(K.TOPOLOGY, f"topology constraint on {LABEL_HOSTNAME}")
            return (why,)
    need = claim.requests + vec
    reasons: list[Infeasible] = []
    last = _CONFLICT
    for term in att.terms:
        conflict = claim.requirements.conflict(term)
        if conflict is not None:
            last = _CONFLICT
            if explain:
                reasons.append(Infeasible(K.INCOMPATIBLE_REQUIREMENTS, f"incompatible requirements: {conflict}"))
            continue
        reqs = claim.requirements.union_with(term)
        compat = claim.mask & table.compat_mask(term)
        # Without a topology choice between the two checks, the hot path counts the combined mask
        # once and tells "no type" from "no offering" only when it is empty (same answer).
        if (explain or verdict is not None) and not np.count_nonzero(compat):  # count_nonzero: a C call, cheaper than .any()
            last = _NO_TYPE
            if explain:
                wanted = term.describe() or _pool_requirements_text(claim, table)
                reasons.append(Infeasible(K.NO_MATCHING_TYPE, f"no instance type matches {wanted}"))
            continue
        if verdict is not None:
            choice = verdict.choose(candidate_domains(claim.hostname, reqs, set(verdict.rules), domains),
                                    claim if claim.pods and verdict.open_checks else None)
            if isinstance(choice, Infeasible):
                last = (choice,)
                if explain:
                    reasons.append(choice)
                continue
            pinned = _pin(reqs, choice)
            if isinstance(pinned, str):
                last = _PINNED
                if explain:
                    reasons.append(Infeasible(K.TOPOLOGY, f"topology constraint on {pinned}: the chosen domain is not allowed"))
                continue
            reqs = pinned
        mask = compat & table.offering_mask(reqs)
        if not np.count_nonzero(mask):
            if not explain and verdict is None and not np.count_nonzero(compat):
                last = _NO_TYPE
                continue
            last = _NO_OFFERING
            if explain:
                reasons.append(Infeasible(K.NO_OFFERING, "no available offering for " + ", ".join(
                    r.describe() for r in (reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)) if r)))
            continue
        fit = mask & (table.free >= need).all(axis=1)
        if not np.count_nonzero(fit):
            last = _NO_ROOM
            if explain:
                reasons.append(_no_room_or_offering(table, pod, compat, mask, need, reqs))
            continue
        limited = fit if remaining is None else limit_mask(remaining, table, fit, claim.reserved)
        if remaining is not None and not np.count_nonzero(limited):
            last = _LIMITS
            if explain:
                reasons.append(Infeasible(K.LIMIT_EXCEEDED, _limits_detail(table, remaining, fit)))
            continue
        relaxed = False
        problem = table.min_values_problem(limited, reqs)
        if problem is not None:
            if min_values is not MinValuesPolicy.BEST_EFFORT:
                last = _MIN_VALUES
                if explain:
                    reasons.append(Infeasible(K.MIN_VALUES, f"requirement {problem}"))
                continue
            relaxed = True
        return Fit(reqs, limited, need, relaxed)
    return tuple(reasons) if explain else last


def _no_room_or_offering(table: TypeTable, pod: PodInfo, compat: BoolArray, mask: BoolArray, need: IntArray,
                         reqs: Requirements) -> Infeasible:
    """Why no type of ``mask`` (those of ``compat`` with an available offering) has room for
    ``need`` (the claim's requests plus ``pod``'s): the types that would have room have no
    available offering (named: trial 18's plugin listing its GPU type in no zone read "largest
    compatible type by cpu is" a type without the GPU), else :func:`_no_room`. Explanations only."""
    roomy = np.flatnonzero(compat & ~mask & (table.free >= need).all(axis=1))
    if not roomy.size:
        return Infeasible(K.NO_ROOM, _no_room(table, pod, mask))
    names = ", ".join(table.types[int(i)].name for i in roomy[:3]) + (f", +{roomy.size - 3} more" if roomy.size > 3 else "")
    where = ", ".join(r.describe() for r in (reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)) if r)
    return Infeasible(K.NO_OFFERING, f"the instance types with room for the pod ({names}) have no available offering"
                                     + (f" for {where}" if where else ""))


def _no_room(table: TypeTable, pod: PodInfo, mask: BoolArray) -> str:
    """Why no type of ``mask`` has room for ``pod``: its requests, "plus DaemonSet overhead" only
    when DaemonSets do take room on those types, and the largest compatible type's allocatable."""
    need = ", ".join(f"{r} {format_quantity(r, v)}" for r, v in sorted(pod.requests.items()))
    rows = np.flatnonzero(mask)
    largest = table.types[int(rows[np.argmax(table.free[mask, table.index["cpu"]])])]
    overhead = " plus DaemonSet overhead" if np.count_nonzero(table.daemon[mask]) else ""
    return (
        f"no instance type has room for the pod's requests ({need}){overhead}; "
        f"largest compatible type by cpu is {largest.name} with allocatable "
        + ", ".join(f"{r} {format_quantity(r, v)}" for r, v in sorted(largest.allocatable.items()) if r in pod.requests)
    )


def _limits_detail(table: TypeTable, remaining: Resources | None, fit: BoolArray) -> str:
    limits = table.template.limits or {}
    which = []
    for r, left in sorted((remaining or {}).items()):
        i = table.index.get(r)
        if r == "nodes" or i is None:
            continue
        smallest = int(table.capacity[fit, i].min())
        if limits.get(r, 0) < 0:  # Karpenter's CRD accepts a negative limit; nothing is ever under it
            which.append(f"limits.{r}={format_quantity(r, limits[r])} is negative: no node fits under it")
        elif smallest > left:
            which.append(
                f"limits.{r}={format_quantity(r, limits.get(r, 0))} would be exceeded "
                f"({format_quantity(r, max(left, 0))} left, the smallest fitting type adds {format_quantity(r, smallest)})"
            )
    return "; ".join(which) or "limits exceeded"


def check_node(use: NodeUsage, pod: PodInfo, terms: Sequence[Requirements] | None = None, *, explain: bool = False) -> Infeasible | None:
    """Why ``pod`` cannot go on an existing node as used so far in this run, or None when it fits.

    ``terms`` are the node-affinity alternatives to honour (default: the pod's required ones).
    Checks, in order: taints, node affinity, free resources, host ports."""
    node = use.node
    taint = untolerated(node.effective_taints(), pod.tolerations)
    if taint is not None:
        return Infeasible(K.UNTOLERATED_TAINT, f"taint {taint} not tolerated") if explain else _NODE_TAINT
    if explain:
        problems = [t.matches_labels(node.labels) for t in (terms or pod.requirement_terms)]
        if all(problems):
            return Infeasible(K.INCOMPATIBLE_REQUIREMENTS, f"node affinity: {problems[0]}")
    elif not any(t.admits(node.labels) for t in (terms or pod.requirement_terms)):
        return _NODE_AFFINITY
    free = use.free()
    if not fits(pod.requests, free):
        if not explain:
            return _NODE_ROOM
        return Infeasible(K.NO_ROOM, "not enough free " + ", ".join(
            r for r in sorted(pod.requests) if pod.requests[r] > free.get(r, 0)))
    if pod.host_ports:
        clash = ports_conflict(use.host_ports, pod.host_ports)
        if clash is not None:
            return Infeasible(K.HOST_PORT, f"host port {clash[1]}/{clash[2]} already in use") if explain else _NODE_PORT
    return None
