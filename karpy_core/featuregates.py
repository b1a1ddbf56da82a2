"""Karpenter's feature gates (``FEATURE_GATES``): which optional features are on.

Parsed once by the settings (:mod:`karpy_core.settings`) or the simulator's ``--feature-gates`` /
a scenario's ``featureGates``, then handed as one frozen :class:`FeatureGates` to every controller
and to the deciding code that a gate changes (layer 0: anything may import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from karpy_core.errors import ConfigurationError

__all__ = [
    "AWS_GATES",
    "UNIMPLEMENTED_GATES",
    "FEATURE_GATES_SETTING",
    "FeatureGates",
    "gates_from",
    "parse_feature_gates",
    "parse_gate_map",
]


@dataclass(frozen=True)
class FeatureGates:
    """Karpenter's ``FEATURE_GATES`` (``pkg/operator/options/options.go`` ``DefaultFeatureGates``).

    karpy's defaults equal Karpenter's except ``NodeRepair``: on in karpy (node repair is one of
    its controllers and replaces nodes only after the provider's toleration, 30 min on AWS), off in
    Karpenter where it is still alpha. Gates for features karpy does not implement may only be
    false (:data:`UNIMPLEMENTED_GATES`).
    """

    NodeRepair: bool = True
    ReservedCapacity: bool = True
    SpotToSpotConsolidation: bool = False
    NodeOverlay: bool = False
    StaticCapacity: bool = False
    CapacityBuffer: bool = False


UNIMPLEMENTED_GATES: Mapping[str, str] = {
}
"""Gates whose feature karpy lacks: true is refused, naming the reason."""

AWS_GATES: Mapping[str, bool] = {"NodeClassCEL": False}
"""``AWS_FEATURE_GATES`` (karpenter-provider-aws) and their defaults; none is implemented, so
each may only be false."""


def parse_gate_map(text: str, setting: str, known: Mapping[str, Any]) -> dict[str, bool]:
    """``"A=true,B=false"`` -> ``{"A": True, "B": False}`` (k8s ``cliflag.MapStringBool``: comma
    separated ``Name=bool`` pairs, spaces around items ignored, Go's ``strconv.ParseBool`` values).

    Raises:
        ConfigurationError: a pair without ``=``, a value that is not a bool, or a name not in
            ``known`` (Karpenter ignores unknown names; karpy refuses them so a typo is seen).
    """
    out: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ConfigurationError(f"{setting}: {item!r} is not Name=true|false")
        if value in ("1", "t", "T", "true", "TRUE", "True"):
            out[name] = True
        elif value in ("0", "f", "F", "false", "FALSE", "False"):
            out[name] = False
        else:
            raise ConfigurationError(f"{setting}: {item!r}: {value!r} is not true or false")
        if name not in known:
            raise ConfigurationError(f"{setting}: unknown feature gate {name!r}; known: {', '.join(sorted(known))}")
    return out


FEATURE_GATES_SETTING = "FEATURE_GATES (--feature-gates)"
"""How errors name the setting: the env var and the flag, as the other settings' errors do."""


def parse_feature_gates(text: str, setting: str = FEATURE_GATES_SETTING) -> tuple[FeatureGates, frozenset[str]]:
    """Parse a ``FEATURE_GATES`` value over karpy's defaults; errors start with ``setting``.

    Returns:
        The gates, and the names the text set explicitly.

    Raises:
        ConfigurationError: bad syntax, an unknown gate name, or an unimplemented gate set to
            true (the message names the gate and why).
    """
    known = {f.name: f.default for f in fields(FeatureGates)}
    given = parse_gate_map(text, setting, known)
    for name, reason in UNIMPLEMENTED_GATES.items():
        if given.get(name):
            raise ConfigurationError(f"{setting}: {name}=true is not supported: {reason}")
    return FeatureGates(**given), frozenset(given)


def gates_from(value: str | Mapping[str, Any] | None, base: FeatureGates | None = None,
               setting: str | None = None) -> FeatureGates:
    """Gates from a ``FEATURE_GATES`` string (``"NodeOverlay=true,..."``) or a mapping of gate name
    to bool (a scenario's ``featureGates:``), over ``base`` (karpy's defaults when None). Errors
    start with ``setting``; None: ``featureGates`` for a mapping, ``FEATURE_GATES (--feature-gates)``
    for a string.

    Raises:
        ConfigurationError: as :func:`parse_feature_gates`; a mapping value that is not a bool.
    """
    base = base or FeatureGates()
    if value is None:
        return base
    if setting is None:
        setting = "featureGates" if isinstance(value, Mapping) else FEATURE_GATES_SETTING
    if isinstance(value, Mapping):
        items = []
        for name, v in value.items():
            if not isinstance(v, bool):
                raise ConfigurationError(f"{setting}.{name}: {v!r} is not true or false")
            items.append(f"{name}={'true' if v else 'false'}")
        value = ",".join(items)
    _, named = parse_feature_gates(value, setting)  # syntax, unknown names, unimplemented gates set to true
    given = parse_gate_map(value, setting, {f.name: f.default for f in fields(FeatureGates)})
    return replace(base, **{name: given[name] for name in named})
