"""Scenarios: karpy's own file kind for simulations over time (``karpy simulate SCENARIO --until 24h``).

Shape (documented with examples in ``docs/scenarios.md``)::

    apiVersion: karpy.sh/v1alpha1
    kind: Scenario
    metadata: {name: scale-down}
    until: 24h                       # optional default for --until
    featureGates: {NodeOverlay: true} # optional: FEATURE_GATES for this run (or "Name=true,..."),
                                     # under --feature-gates
    steps:
      - at: 0s
        apply: manifests.yaml        # a file or directory (relative to the scenario), a list of them,
                                     # or inline manifests (a list of objects)
      - at: 2h
        scale: {deployment: web, replicas: 2}          # or statefulset: / replicaset:, namespace:,
                                                       # or nodepool: (a static NodePool's spec.replicas)
      - at: 4h
        delete: {kind: Deployment, name: web}           # namespace: optional
      - at: 6h
        patch: {kind: NodePool, name: default, patch: {spec: {...}}}   # JSON merge patch

``at`` is a Go duration from the start of the simulation. Steps run in ``at`` order (file order
for equal times). A key not shown here is an error naming it (:func:`unknown_keys`); a step due
after the run's end is a warning (:func:`unreached_steps`). Manifests go through the same loader as ``karpy simulate FILES`` (validation,
defaults, ``${VAR}`` substitution).
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy_core.apis.durations import parse_duration
from karpy_core.apis.loader import read_utf8, safe_load_all, short_name
from karpy_core.apis.workloads import INT32_MAX
from karpy_core.errors import ConfigurationError, KubeAPIError, ManifestError, reraise_interrupt
from karpy_core.featuregates import FeatureGates, gates_from
from karpy_core.kube.memory import IMMORTAL_NAMESPACES, merge_patch, renaming_patch_problem
from karpy_core.utils.kubeyaml import KubeYAMLDumper, describe_yaml_error

__all__ = ["Scenario", "ScenarioStep", "format_seconds", "load_scenario", "is_scenario_file", "run_scenario", "SCENARIO_API_VERSION"]

SCENARIO_API_VERSION = "karpy.sh/v1alpha1"
ObjectKey = tuple[str, str, str]
"""``(kind, namespace, name)``: how a scenario's steps name an object (:func:`object_key`)."""


MAX_UNTIL_SECONDS = 366 * 24 * 3600.0
"""Longest simulated time a scenario may run (``until`` / ``--until``): a leap year. A quiet
cluster costs about 1.2 ms of wall time per simulated hour, a busy one far more, so a year stays
in seconds to minutes while ``--until 999999999h`` would never end."""


def until_problem(seconds: float, text: object) -> str | None:
    """Why ``seconds`` (parsed from ``text``) is not a usable ``until``, or None."""
    if seconds <= 0:
        return f"{text!r} must be a positive duration"
    if seconds > MAX_UNTIL_SECONDS:
        return f"{text!r} is more than the {MAX_UNTIL_SECONDS / 3600:g}h (366 days) a simulation may run"
    return None
_ACTIONS = ("apply", "scale", "delete", "patch")
_DUMPER: type = KubeYAMLDumper
"""libyaml's safe dumper when PyYAML has it (ten times faster than the pure-Python one), quoting
what the loader would read as another type (``"y"``: a go-yaml boolean): inline manifests and
patched objects go back to text for the loader."""


@dataclass
class ScenarioStep:
    """One timed action: ``at`` seconds from the start; ``action`` one of apply, scale, delete,
    patch; ``body`` its argument as written."""

    at: float
    action: str
    body: Any
    index: int


@dataclass
class Scenario:
    """A parsed scenario file; ``base`` is its directory (relative ``apply`` paths)."""

    name: str
    steps: list[ScenarioStep]
    base: Path
    until: float | None = None
    source: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    """The scenario's ``featureGates`` over karpy's defaults."""
    warnings: list[str] = field(default_factory=list)
    """What loading the steps' manifests warned about (placeholders left, a negative limit...),
    once per file set, each line naming the step; ``validate`` and ``simulate`` print them."""
    _registry: dict[tuple[str, str], Any] | None = field(default=None, repr=False, compare=False)
    _files: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=dict, repr=False, compare=False)
    _noted: set[str] = field(default_factory=set, repr=False, compare=False)
    """Every load warning a step gave (kept or dropped), so a step loaded again when the simulation
    runs it (inline manifests) does not bring back one the load dropped (trial 15)."""
    _missing_node_classes: dict[str, tuple[str, str, str]] = field(default_factory=dict, repr=False, compare=False)
    """The lines of :attr:`warnings` that say a NodePool's NodeClass is missing from its step's
    manifests, with the ``(group, kind, name)`` each names: dropped once a step has applied it."""

    def registry(self) -> dict[tuple[str, str], Any]:
        """The kinds manifests are loaded as (:func:`~karpy_core.apis.registry.kind_registry`),
        read once per scenario: reading the ``karpy.apis`` entry points scans every installed
        distribution (milliseconds), which per step made a 50,000-step scenario take minutes."""
        if self._registry is None:
            from karpy_core.apis.registry import kind_registry

            self._registry = kind_registry()
        return self._registry

    def summary(self) -> str:
        """One line for ``karpy validate``: the number of steps, per action (in the order
        apply, scale, delete, patch; actions without steps left out) and the times the first and
        last run at, e.g. ``3 steps (1 apply, 2 scale) from 0s to 2h``."""
        counts = {a: 0 for a in _ACTIONS}
        for step in self.steps:
            counts[step.action] += 1
        per = ", ".join(f"{n} {a}" for a, n in counts.items() if n)
        n = len(self.steps)
        if not n:
            return "0 steps"
        span = (f" at {format_seconds(self.steps[0].at)}" if self.steps[0].at == self.steps[-1].at
                else f" from {format_seconds(self.steps[0].at)} to {format_seconds(self.steps[-1].at)}")
        return f"{n} step{'s' if n != 1 else ''} ({per}){span}"


def format_seconds(t: float) -> str:
    """``t`` seconds (>= 0) as a short Go-style duration (``90s`` -> ``1m30s``, ``7200`` -> ``2h``)."""
    whole = int(t)
    if whole != t:
        return f"{t:g}s"
    h, rest = divmod(whole, 3600)
    m, sec = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return out or "0s"


def is_scenario_file(path: str | Path) -> bool:
    """True when ``path`` is a YAML file whose first document is ``kind: Scenario``."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        doc = next(iter(safe_load_all(p.read_text(encoding="utf-8"))), None)
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == "Scenario"


def load_scenario(path: str | Path, variables: dict[str, str] | None = None, *,  # noqa: C901
                  max_pods: int | None = None, command: str = "simulate") -> Scenario:
    """Parse a scenario file. ``max_pods`` (None: no check) caps the pods the workloads the steps
    leave in place may ask for in all, after each step, counted as the simulator counts them
    (:func:`~karpy_core.sim.workloads.counted_pods`); ``command`` is the karpy command whose
    ``--max-pods`` raises it (``simulate`` or ``validate``).

    Raises:
        ManifestError: unreadable file, wrong apiVersion/kind, a step without ``at`` or with no
            or several actions, a bad duration, the first step whose workloads cross ``max_pods``
            (naming the step and its workload asking for the most pods); each problem names the
            step (``steps[2].at``). Its ``warnings`` are what loading the steps' manifests warned about.
    """
    p = Path(path)
    problems: list[str] = []
    try:
        docs = list(safe_load_all(read_utf8(p)))
    except yaml.YAMLError as exc:
        raise ManifestError([f"{p}: cannot read scenario: {describe_yaml_error(exc)}"]) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError([str(exc.reason)]) from exc
    except OSError as exc:
        raise ManifestError([f"{p}: cannot read scenario: {exc}"]) from exc
    if len(docs) > 1:
        raise ManifestError([f"{p}: cannot read scenario: expected a single document, found {len(docs)}"])
    doc = docs[0] if docs else None
    if not isinstance(doc, dict) or doc.get("kind") != "Scenario":
        raise ManifestError([f"{p}: not a Scenario (kind: Scenario, apiVersion: {SCENARIO_API_VERSION})"])
    if doc.get("apiVersion") != SCENARIO_API_VERSION:
        problems.append(f"{p}: apiVersion must be {SCENARIO_API_VERSION!r}, got {doc.get('apiVersion')!r}")
    problems += [f"{p}: {q}" for q in unknown_keys(doc, _TOP_LEVEL)]
    if isinstance(doc.get("spec"), dict):
        problems += [f"{p}: {q}" for q in unknown_keys(doc["spec"], _SPEC, "spec.")]
    raw_steps = doc.get("steps") or (doc.get("spec") or {}).get("steps") or []
    until = doc.get("until") or (doc.get("spec") or {}).get("until")
    gates = FeatureGates()
    raw_gates = doc.get("featureGates", (doc.get("spec") or {}).get("featureGates"))
    if raw_gates is not None:
        if not isinstance(raw_gates, (str, dict)):
            problems.append(f"{p}: featureGates must be a mapping of gate name to true/false or 'Name=true,...'")
        else:
            try:
                gates = gates_from(raw_gates, setting=f"{p}: featureGates")
            except ConfigurationError as exc:
                problems.append(str(exc))
    steps: list[ScenarioStep] = []
    if not isinstance(raw_steps, list):
        problems.append(f"{p}: steps must be a list")
        raw_steps = []
    for i, raw in enumerate(raw_steps):
        where = f"{p}: steps[{i}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: must be a mapping with 'at' and one action")
            continue
        try:
            at = parse_duration(str(raw.get("at", ""))).total_seconds()
        except ValueError as exc:
            problems.append(f"{where}.at: {exc}")
            continue
        if at < 0:
            problems.append(f"{where}.at: {raw.get('at')!r} is before the start; steps run at 0s or later")
            continue
        actions = [a for a in _ACTIONS if a in raw]
        problems += [f"{where}: {q} (a step is 'at' and one of {', '.join(_ACTIONS)})" for q in unknown_keys(raw, ("at", *_ACTIONS))]
        if len(actions) != 1:
            problems.append(f"{where}: needs exactly one of {', '.join(_ACTIONS)}, got {actions or 'none'}")
            continue
        why = _check_body(actions[0], raw[actions[0]])
        if why:
            problems.append(f"{where}.{actions[0]}: {why}")
            continue
        steps.append(ScenarioStep(at, actions[0], raw[actions[0]], i))
    until_s = None
    if until is not None:
        try:
            until_s = parse_duration(str(until)).total_seconds()
        except ValueError as exc:
            problems.append(f"{p}: until: {exc}")
        else:
            until_why = until_problem(until_s, until)
            if until_why:
                problems.append(f"{p}: until: {until_why}")
    steps.sort(key=lambda s: (s.at, s.index))  # the well-formed steps are checked further, so every problem is reported at once
    name = str((doc.get("metadata") or {}).get("name") or p.stem)
    scenario = Scenario(name, steps, p.parent, until_s, str(p), dict(variables or {}), gates)
    # Manifests a step applies are loaded (and validated) now, not hours into the run, and a patch
    # of an object the scenario itself applied is checked against what the patch would leave.
    # objects by (kind, namespace, name) (:func:`object_key`): a Deployment web in namespace a and
    # one in b are two workloads, and a step without namespace names the one in default
    known: dict[ObjectKey, dict[str, Any]] = {}
    gone: dict[ObjectKey, ScenarioStep] = {}  # deleted by a step, and which
    from karpy_core.kube.port import KINDS

    plugin_kinds = {kind: model for (_, kind), model in scenario.registry().items() if kind not in KINDS}
    served = frozenset(KINDS) | frozenset(plugin_kinds)  # plugins' NodeClass kinds too
    # only steps create a plugin's NodeClass, as the built-in ones: a patch or delete of one no step
    # applied, or one a step deleted, is the run's 404 (trial 22: valid for validate only)
    named = _NAMED_BY_STEPS | frozenset(plugin_kinds)
    unscoped = frozenset(kind for kind, model in plugin_kinds.items() if not getattr(model, "NAMESPACED", True))

    def key_of(kind: str, name: str, namespace: Any) -> ObjectKey:
        key = object_key(kind, name, namespace)
        return (kind, "", name) if kind in unscoped else key  # a cluster-scoped plugin kind has no namespace
    checked: dict[str, list[str]] = {}  # a patched object already validated (as JSON) -> its problems
    asks: dict[ObjectKey, int] = {}  # a known workload -> the pods it asks for (when any), summed in total
    attempted: set[ObjectKey] = set()  # named by an apply step that was refused: neither known nor missing
    total = 0
    capped = max_pods is None  # no cap, or its first crossing named: the run stops there
    for step in steps:
        touched: list[ObjectKey] = []
        try:
            if step.action == "apply":
                noted = len(scenario.warnings)
                for obj in _load_objects(scenario, step):
                    meta = obj.get("metadata") or {}
                    touched.append(key_of(obj.get("kind", ""), meta.get("name", ""), meta.get("namespace")))
                    known[touched[-1]] = obj
                _drop_found_node_classes(scenario, noted, known)
            elif step.action == "patch":
                key = key_of(str(step.body["kind"]), str(step.body["name"]), step.body.get("namespace"))
                _check_exists(key, known, gone, step, served, named, attempted)
                renamed = renaming_patch_problem(step.body["patch"], key[2], key[1])
                if renamed:  # the API server's checkName: a patch cannot rename or move the object
                    raise ManifestError([f"400 BadRequest: {renamed}"])
                if key in known:
                    patched = merge_patch(known[key], step.body["patch"])  # a new object; neither input is changed
                    # the transition rule is one of the CRD's rules on spec, listed first as the API
                    # server lists every failing rule of an update: a patch adding replicas to a
                    # NodePool with weight breaks both (trial 14)
                    moved = [f"{p}: steps[{step.index}].patch: NodePool {key[2]}: {_STATIC_TRANSITION}"] \
                        if key[0] == "NodePool" and _is_static(known[key]) != _is_static(patched) else []
                    try:
                        _validate_patched(key[0], patched, f"{p}: steps[{step.index}].patch", scenario.registry(), checked)
                    except ManifestError as exc:
                        raise ManifestError([*moved, *exc.problems]) from exc
                    if moved:
                        raise ManifestError(moved)
                    known[key] = patched
                    touched.append(key)
            elif step.action == "scale" and "nodepool" not in step.body:
                target = next(k for k in _SCALABLE if k in step.body)
                key = object_key(_SCALABLE[target], str(step.body[target]), step.body.get("namespace"))
                _check_exists(key, known, gone, step, served, named, attempted)
                if key in known:
                    known[key] = merge_patch(known[key], {"spec": {"replicas": step.body["replicas"]}})
                    touched.append(key)
            elif step.action == "scale":
                key = object_key("NodePool", str(step.body["nodepool"]), None)
                _check_exists(key, known, gone, step, served, named, attempted)
                if key in known:
                    if not _is_static(known[key]):
                        raise ManifestError([f"{p}: steps[{step.index}].scale: NodePool {key[2]}: {_STATIC_TRANSITION}"])
                    known[key] = merge_patch(known[key], {"spec": {"replicas": step.body["replicas"]}})
            elif step.action == "delete":
                key = key_of(str(step.body["kind"]), str(step.body["name"]), step.body.get("namespace"))
                if key[0] == "Namespace" and key[2] in IMMORTAL_NAMESPACES:  # NamespaceLifecycle admission
                    raise ManifestError([f'403 Forbidden: namespaces "{key[2]}" is forbidden: this namespace may not be deleted'])
                _check_exists(key, known, gone, step, served, named, attempted)
                known.pop(key, None)
                gone[key] = step
                touched.append(key)
        except ManifestError as exc:
            problems.extend(q if q.startswith(f"{p}: steps[{step.index}]") else f"{p}: steps[{step.index}].{step.action}: {q}"
                            for q in exc.problems)
            if step.action == "apply":  # what the step's files warned about ("not read" lines...) is kept with the errors
                _note_warnings(scenario, step, exc.warnings)
                # the objects it names are taken as applied: a later step on them is not told "no earlier
                # step applies it" (trial 24: one bad PDB made 404s of its Deployment's and NodePool's steps)
                attempted.update(key_of(*k) for k in _named_objects(scenario, step))
        if not capped and max_pods is not None:
            total = _count_asks(asks, known, touched, total)
            if total > max_pods:
                capped = True
                problems.append(f"{p}: steps[{step.index}].{step.action}: {_cap_blame(known, touched, total, max_pods, command)}")
    if problems:
        raise ManifestError(problems, warnings=scenario.warnings)
    return scenario


def _count_asks(asks: dict[ObjectKey, int], known: dict[ObjectKey, dict[str, Any]],
                touched: list[ObjectKey], total: int) -> int:
    """``total`` (the pods ``asks`` sums) after the ``touched`` keys of ``known`` (applied,
    patched, scaled or deleted by a step) changed; ``asks`` is updated in place."""
    from karpy_core.sim.workloads import counted_pods

    for key in touched:
        n = counted_pods(known[key])[0] if key in known else 0
        total += n - asks.pop(key, 0)
        if n:
            asks[key] = n
    return total


def _cap_blame(known: dict[ObjectKey, dict[str, Any]], touched: list[ObjectKey], total: int, cap: int,
               command: str) -> str:
    """The pod-cap refusal for a step that took the pods to ``total`` over ``cap``, naming the
    workload of the step (of the ``touched`` keys of ``known``) asking for the most pods."""
    from karpy_core.sim.workloads import counted_pods, pod_cap_message

    blamed = [(counted_pods(known[k]), k) for k in dict.fromkeys(touched) if k in known]
    (count, path), key = max(blamed, key=lambda b: b[0][0])
    obj = known[key]  # every workload kind is namespaced: the API server puts it in "default" when none is given
    named = {**obj, "metadata": {"namespace": "default", **(obj.get("metadata") or {})}}
    return pod_cap_message(named, count, path, total, cap, command)


_NAMED_BY_STEPS = frozenset({"NodePool", "Deployment", "StatefulSet", "DaemonSet", "Job", "PodDisruptionBudget", "NodeOverlay",
                             "CapacityBuffer", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "RuntimeClass",
                             "EC2NodeClass", "KCNodeClass", "KWOKNodeClass", "Pod", "Namespace"})
"""Kinds only a scenario's steps create in the simulated cluster (a ReplicaSet or a NodeClaim may
also be made by a controller, under a generated name): a step naming one that no earlier step
applied fails at that step with 404, so ``validate`` refuses it up front."""


def _check_exists(key: ObjectKey, known: dict[ObjectKey, Any], gone: dict[ObjectKey, ScenarioStep], step: ScenarioStep,
                  served: frozenset[str], named: frozenset[str] = _NAMED_BY_STEPS,
                  attempted: set[ObjectKey] | frozenset[ObjectKey] = frozenset()) -> None:
    """Raise the 404 the run would meet: a step acting on a ``key`` (:func:`object_key`) of a kind
    the simulated cluster does not serve (``served``: its own kinds and the plugins' registered
    ones), that no earlier step applied, or that an earlier step deleted. A ReplicaSet no step
    applied passes when it may be a Deployment's: named ``<deployment>-...`` after a Deployment of
    its namespace (trial 19: ``scale: {replicaset: web}`` and a ``patch`` of ``kind: Gadget`` were
    valid for ``validate`` and a 404 in ``simulate``). ``named``: the kinds only steps create
    (:data:`_NAMED_BY_STEPS` and the plugins' NodeClass kinds)."""
    if key[0] not in served:
        raise ManifestError([f"404 NotFound: kind {key[0]} is not served"])
    if key[0] == "ReplicaSet" and key not in known:
        _, namespace, name = key
        if not any(k[0] == "Deployment" and k[1] == namespace and name.startswith(f"{k[2]}-") for k in known):
            raise ManifestError([f"404 NotFound: {object_ref(*key)} does not exist at {format_seconds(step.at)} (no earlier "
                                 "step applies it, and no Deployment of its namespace is named as its owner would be)"])
    if key in attempted and key not in gone:  # a refused apply step names it: its problem is reported there
        return
    if key[0] not in named or key in known or (key[0] == "Namespace" and key[2] in IMMORTAL_NAMESPACES):
        return  # default, kube-system and kube-public exist from the start, as kube-apiserver creates them
    if key in gone:
        why = f"steps[{gone[key].index}] deleted it at {format_seconds(gone[key].at)}"
    else:
        why = "no earlier step applies it"
    raise ManifestError([f"404 NotFound: {object_ref(*key)} does not exist at {format_seconds(step.at)} ({why})"])


def object_key(kind: str, name: str, namespace: Any) -> ObjectKey:
    """The key of the object ``kind``/``name`` in ``namespace`` (a manifest's ``metadata.namespace``
    or a step's ``namespace:``): ``default`` when none is given and the kind is namespaced, as
    kubectl and the API server place it; ``""`` for a cluster-scoped kind (NodePool...), whose
    namespace is ignored. A kind the simulated cluster does not serve counts as namespaced."""
    from karpy_core.kube.port import KINDS

    info = KINDS.get(kind)
    return kind, ("" if info is not None and not info.namespaced else str(namespace or "default")), name


def object_ref(kind: str, namespace: str, name: str) -> str:
    """``Kind/namespace/name``, or ``Kind/name`` for a cluster-scoped object (``namespace`` ``""``)."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


_SCALABLE = {"deployment": "Deployment", "statefulset": "StatefulSet", "replicaset": "ReplicaSet", "nodepool": "NodePool"}
"""A scale step's key -> the kind whose ``spec.replicas`` it sets."""
_STATIC_TRANSITION = "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
"""The CRD's transition rule (Karpenter ``nodepool.go``), which the in-memory cluster does not evaluate."""


_TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "until", "featureGates", "steps")
"""The keys of a scenario file (``until``, ``featureGates`` and ``steps`` may also sit under ``spec``)."""
_SPEC = ("until", "featureGates", "steps")
_BODY_KEYS = {"scale": (*_SCALABLE, "replicas", "namespace"), "delete": ("kind", "name", "namespace"),
              "patch": ("kind", "name", "namespace", "patch")}
"""The keys each step body takes (``apply`` takes manifests, loaded and checked by the loader)."""


def unknown_keys(mapping: dict[Any, Any], known: tuple[str, ...], prefix: str = "") -> list[str]:
    """One problem per key of ``mapping`` that is not in ``known``, in file order, with the
    closest known key as a "did you mean" when there is one (as the loader's
    :func:`~karpy_core.apis.fieldschema.unknown_field_message` does): a misspelt key was accepted
    silently before and its setting lost (``replica: 3`` scaled nothing)."""
    out = []
    for key in mapping:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        out.append(f"{prefix}{key}: unknown field {str(key)!r}{hint}")
    return out


def unreached_steps(scenario: Scenario, until: float, why: str) -> list[str]:
    """One warning per step of ``scenario`` due after ``until`` (seconds), which never runs: the
    run ends first. ``why`` says where ``until`` came from (``until: 6h``, ``--until 6h``). A
    warning, not an error: ``--until`` may cut a longer scenario short on purpose (the first hours
    of a day), and the file's own ``until`` is only a default that ``--until`` overrides."""
    return [f"{scenario.source}: steps[{step.index}] ({step.action} at {format_seconds(step.at)}) never runs: "
            f"the run ends at {format_seconds(until)} ({why})" for step in scenario.steps if step.at > until]


def _is_static(nodepool: dict[str, Any]) -> bool:
    return (nodepool.get("spec") or {}).get("replicas") is not None


def _check_body(action: str, body: Any) -> str:
    """Why a scale/delete/patch step body is malformed, or "" (apply bodies are loaded later)."""
    if action == "apply":
        return ""
    if not isinstance(body, dict):
        return "must be a mapping"
    unknown = unknown_keys(body, _BODY_KEYS[action])
    if unknown:
        return "; ".join(unknown)
    if action == "scale":
        kinds = [k for k in _SCALABLE if k in body]
        if len(kinds) != 1 or "replicas" not in body:
            return "needs one of deployment/statefulset/replicaset/nodepool and replicas"
        replicas = body["replicas"]
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            return f"replicas must be a whole number >= 0, got {replicas!r}"
        if replicas > INT32_MAX:
            return f"replicas must be at most {INT32_MAX} (an int32, as in Kubernetes), got {replicas!r}"
        return ""
    missing = [f for f in ("kind", "name") if not isinstance(body.get(f), str) or not body.get(f)]
    if missing:
        return f"needs {' and '.join(missing)} (strings)"
    if action == "patch" and not isinstance(body.get("patch"), dict):
        return "patch must be a mapping (a JSON merge patch of the object)"
    return ""


def _note_warnings(scenario: Scenario, step: ScenarioStep, warnings: list[str],
                   missing_node_classes: dict[str, tuple[str, str, str]] | None = None) -> None:
    """Keep a step's load warnings on the scenario, each once (an inline body applied at two
    steps warns at the first); ``missing_node_classes`` (the loader's
    :attr:`~karpy_core.apis.loader.LoadedManifests.missing_node_classes`) says which of them name
    a NodeClass not among the step's manifests, and which."""
    for w in warnings:
        line = f"{scenario.source}: steps[{step.index}].apply: {w}"
        if w not in scenario._noted:
            scenario._noted.add(w)
            scenario.warnings.append(line)
            if missing_node_classes and w in missing_node_classes:
                scenario._missing_node_classes[line] = missing_node_classes[w]


def _drop_found_node_classes(scenario: Scenario, start: int, known: dict[ObjectKey, dict[str, Any]]) -> None:
    """Drop the warnings noted from ``start`` on that a NodePool's NodeClass is missing when an
    earlier step (or this one) applied it: each step's manifests are loaded on their own, but the
    cluster holds what every step so far applied."""

    present = {(str(obj.get("apiVersion", "")).rpartition("/")[0], kind, short_name(name)) for (kind, _, name), obj in known.items()}
    scenario.warnings[start:] = [w for w in scenario.warnings[start:] if scenario._missing_node_classes.get(w) not in present]


def _load_objects(scenario: Scenario, step: ScenarioStep) -> list[dict[str, Any]]:
    from karpy_core.apis.base import to_kube_dict
    from karpy_core.apis.loader import load_documents, load_text
    from karpy_core.sim.simulator import is_simulated

    body = step.body
    if isinstance(body, str) or (isinstance(body, list) and body and all(isinstance(b, str) for b in body)):
        paths = tuple(str((scenario.base / b).resolve()) for b in ([body] if isinstance(body, str) else body))
        for given, path in zip([body] if isinstance(body, str) else body, paths, strict=True):
            if Path(path) == Path(scenario.source).resolve():
                raise ManifestError([f"{scenario.source}: steps[{step.index}].apply: {given} is this Scenario file itself; "
                                     "a step applies manifests (name the files or directories holding them)"])
            if Path(path).is_file() and is_scenario_file(path):
                raise ManifestError([f"{scenario.source}: steps[{step.index}].apply: {given} is a Scenario file; a step "
                                     "applies manifests, not another Scenario (run it on its own)"])
        if paths not in scenario._files:  # the same files applied again: loaded (and checked) once
            loaded = load_documents(list(paths), scenario.variables, registry=scenario.registry())
            _note_warnings(scenario, step, loaded.warnings, loaded.missing_node_classes)
            served = [o for o in loaded.other if is_simulated(o.api_version, o.kind)]
            scenario._files[paths] = [to_kube_dict(o) for o in [*loaded.objects(), *served]]
        return copy.deepcopy(scenario._files[paths])
    if isinstance(body, list) and any(isinstance(b, str) for b in body) and any(isinstance(b, dict) for b in body):
        raise ManifestError([f"{scenario.source}: steps[{step.index}].apply: a list of file or directory names, or of inline "
                             "manifests, not both; give each its own step"])
    if isinstance(body, list | dict):
        docs = body if isinstance(body, list) else [body]
        loaded = load_text(yaml.dump_all(docs, Dumper=_DUMPER, sort_keys=False), f"{scenario.source} steps[{step.index}].apply",
                           scenario.variables, registry=scenario.registry())
        _note_warnings(scenario, step, loaded.warnings, loaded.missing_node_classes)
    else:
        raise ManifestError([f"{scenario.source}: steps[{step.index}].apply: a path, a list of paths or inline manifests"])
    served = [o for o in loaded.other if is_simulated(o.api_version, o.kind)]
    return [to_kube_dict(o) for o in [*loaded.objects(), *served]]


def _named_objects(scenario: Scenario, step: ScenarioStep) -> list[tuple[str, str, Any]]:
    """``(kind, name, namespace)`` of each document an ``apply`` step's files or inline manifests
    hold, read as plain YAML (best effort: nothing for what does not parse); for a step the loader
    refused, so later steps on its valid objects are not reported missing."""
    from karpy_core.apis.loader import MANIFEST_EXTENSIONS

    body = step.body
    docs: list[Any] = []
    if isinstance(body, dict) or (isinstance(body, list) and body and not all(isinstance(b, str) for b in body)):
        docs = body if isinstance(body, list) else [body]
    else:
        for given in [body] if isinstance(body, str) else body if isinstance(body, list) else []:
            try:  # the loader already refused these files: any failure here only means fewer names
                path = scenario.base / str(given)
                files = sorted(f for f in path.iterdir() if f.suffix in MANIFEST_EXTENSIONS) if path.is_dir() else [path]
                for f in files:
                    docs.extend(safe_load_all(f.read_text(encoding="utf-8")))  # bounded: aliases and nesting
            except Exception as exc:  # best effort: never a new error
                reraise_interrupt(exc)
                continue
    out = []
    for doc in docs:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if isinstance(meta, dict) and isinstance(doc.get("kind"), str) and isinstance(meta.get("name"), str):
            out.append((doc["kind"], meta["name"], meta.get("namespace")))
    return out


def delete_with_dependents(cluster: Any, kind: str, name: str, namespace: str | None) -> int:
    """Delete an object and, as kube-controller-manager's garbage collector does for ``kubectl
    delete`` (background propagation), every object whose ``ownerReferences`` name its uid, and
    theirs: a Deployment's ReplicaSets and pods, a NodePool's NodeClaims (which their termination
    finalizer then drains, as Karpenter does). Returns how many dependents were deleted.

    Raises:
        KubeAPIError: 404 when the object does not exist.
    """
    from karpy_core.kube.port import KINDS

    obj = cluster.peek(kind, name, namespace) if kind in KINDS else None
    uid = (obj or {}).get("metadata", {}).get("uid")
    cluster.delete_sync(kind, name, namespace)
    if not uid:
        return 0
    # owner uid -> its dependents, read once: a scan of every kind per deleted object made deleting
    # a Deployment of n pods take O(n^2) (trial 22: 10.8 s of a 2,000-pod scenario's 44 s)
    owned: dict[str, list[tuple[str, str, str | None]]] = {}
    for k in KINDS:
        for dep in cluster.snapshot(k) or ():
            meta = dep.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            for ref in meta.get("ownerReferences") or ():
                if ref.get("uid"):
                    owned.setdefault(ref["uid"], []).append((k, meta["name"], meta.get("namespace")))
    count = 0
    queue = [uid]
    while queue:
        for k, dep_name, dep_namespace in owned.pop(queue.pop(0), ()):
            dep = cluster.peek(k, dep_name, dep_namespace)
            if dep is None:
                continue  # gone with an earlier dependent (owned twice)
            dep_uid = dep["metadata"].get("uid")
            cluster.delete_sync(k, dep_name, dep_namespace)
            count += 1
            if dep_uid:
                queue.append(dep_uid)
    return count


async def apply_step(sim: Any, scenario: Scenario, step: ScenarioStep) -> str:
    """Carry out one step on the simulator's cluster; returns a one-line description.

    Raises:
        ManifestError: the step names an object that does not exist or a malformed body.
    """
    from karpy_core.kube.port import KINDS

    cluster = sim.cluster
    where = f"{scenario.source}: steps[{step.index}].{step.action}"
    body = step.body
    if step.action == "apply":
        objs = _load_objects(scenario, step)
        created, updated = 0, 0
        for obj in objs:
            kind = obj.get("kind", "")
            meta = obj.get("metadata") or {}
            if kind not in KINDS:
                continue
            if meta.get("name") and cluster.peek(kind, meta["name"], meta.get("namespace")) is not None:
                cluster.patch_sync(kind, meta["name"], {"metadata": {"labels": meta.get("labels"), "annotations": meta.get("annotations")},
                                                        "spec": obj.get("spec")}, meta.get("namespace"))
                updated += 1
            else:
                sim.apply([obj])
                created += 1
        return f"apply: {created} created, {updated} updated"
    if not isinstance(body, dict):
        raise ManifestError([f"{where}: must be a mapping"])
    ns = body.get("namespace", "default")
    try:
        if step.action == "scale":
            kinds = [k for k in _SCALABLE if k in body]
            if len(kinds) != 1 or "replicas" not in body:
                raise ManifestError([f"{where}: needs one of deployment/statefulset/replicaset/nodepool and replicas"])
            kind = _SCALABLE[kinds[0]]
            name = str(body[kinds[0]])
            if kind == "NodePool":  # cluster-scoped; the scale subresource is spec.replicas of a static pool
                current = cluster.peek(kind, name, None)
                if current is not None and (current.get("spec") or {}).get("replicas") is None:
                    raise ManifestError([f"{where}: NodePool {name}: {_STATIC_TRANSITION}"])
                cluster.patch_sync(kind, name, {"spec": {"replicas": int(body["replicas"])}})
            else:
                cluster.patch_sync(kind, name, {"spec": {"replicas": int(body["replicas"])}}, ns)
            return f"scale {object_ref(*object_key(kind, name, ns))} to {body['replicas']}"
        if step.action == "delete":
            dependents = delete_with_dependents(cluster, str(body["kind"]), str(body["name"]), ns)
            more = f" (and {dependents} dependent object{'s' if dependents != 1 else ''})" if dependents else ""
            return f"delete {object_ref(*object_key(str(body['kind']), str(body['name']), ns))}{more}"
        if step.action == "patch":
            kind, name = str(body["kind"]), str(body["name"])
            patch = dict(body.get("patch") or {})
            if kind == "Namespace" and name in IMMORTAL_NAMESPACES and cluster.peek(kind, name, None) is None:
                # kube-apiserver creates these at start; the in-memory cluster holds them from their first patch
                cluster.create_sync("Namespace", {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
            current = cluster.peek(kind, name, ns) if kind in KINDS else None
            if current is not None:
                patched = merge_patch(current, patch)
                _validate_patched(kind, patched, where, scenario.registry())
                if kind == "NodePool" and _is_static(current) != _is_static(patched):
                    raise ManifestError([f"{where}: NodePool {name}: {_STATIC_TRANSITION}"])
            cluster.patch_sync(kind, name, patch, ns)
            return f"patch {object_ref(*object_key(kind, name, ns))}"
    except KeyError as exc:
        raise ManifestError([f"{where}: missing field {exc}"]) from exc
    except KubeAPIError as exc:
        raise ManifestError([f"{where}: {exc}"]) from exc
    raise ManifestError([f"{where}: unknown action"])


def _validate_patched(kind: str, obj: dict[str, Any], where: str, registry: dict[tuple[str, str], Any],
                      checked: dict[str, list[str]] | None = None) -> None:
    """Load the object a patch would leave through the same validation as ``apply``, with the kinds
    of ``registry``. ``checked`` (patched object as JSON -> its problems, without ``where``)
    remembers objects already validated, so a scenario repeating the same patch validates it once.

    Raises:
        ManifestError: the patched object is invalid (each problem prefixed with ``where``).
    """
    import json

    from karpy_core.apis.loader import load_text

    if not any(k == kind for _, k in registry):
        return  # a kind karpy reads leniently (core objects): the cluster's own checks apply
    meta = obj.get("metadata") or {}
    doc = {"apiVersion": obj.get("apiVersion"), "kind": kind,
           "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k) is not None},
           "spec": obj.get("spec")}
    key = json.dumps(doc, sort_keys=True, default=str)
    problems = checked.get(key) if checked is not None else None
    if problems is None:
        try:
            load_text(yaml.dump(doc, Dumper=_DUMPER, sort_keys=False), _PATCHED, registry=registry)
            problems = []
        except ManifestError as exc:
            problems = list(exc.problems)
        if checked is not None:
            checked[key] = problems
    if problems:
        raise ManifestError([f"{where}: the patched {kind} would be invalid: "
                             f"{q.removeprefix(f'{_PATCHED} doc 1 ') if q.startswith(f'{_PATCHED} doc 1 ') else q.replace(_PATCHED, where)}"
                             for q in problems])


_PATCHED = "\x00patched"
"""Source name of a patched object while it is validated, replaced by the step in the messages."""


async def run_scenario(sim: Any, scenario: Scenario, until: float) -> None:
    """Run ``scenario`` on ``sim`` (a :class:`~karpy_core.sim.simulator.Simulator` built with
    ``disruption=True``) until ``until`` seconds of simulated time; each step is recorded as a
    ``scenario`` event."""
    from karpy_core.sim.simulator import SimEvent

    started = False
    for step in scenario.steps:
        if step.at > until:
            break
        # the first pass runs before the first step (the cost series starts at 0s); steps due at
        # one instant are then applied together, with no pass between them
        if not started or sim.clock.now() < sim.start + step.at:
            await sim.run_until(sim.start + step.at)
            started = True
        what = await apply_step(sim, scenario, step)
        # recorded when it was applied: the events stay in time order even where a pass ran past
        # the step's time (a batch window), and equal-time steps come before what they cause
        sim.events.append(SimEvent(sim.clock.now() - sim.start, "scenario", reason=what))
    await sim.run_until(sim.start + until)
