"""A plugin's kinds reach the CRD generator through its ``karpy.apis`` entry point, as ``CRDSpec``
items: core imports no plugin, the kind is registered for the loader, and its CRD (names, columns,
overlay rules) is rendered after karpy's own."""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any, ClassVar

import pytest
from pydantic import Field

from karpy_core.apis import crds, registry
from karpy_core.apis.base import KubeModel, KubeObject, Str
from karpy_core.apis.crdspec import AGE_COLUMN, READY_COLUMN, CRDSpec, Overlay, printer_column


class WidgetSpec(KubeModel):
    image: Str = Field(pattern=r"^img-[a-z0-9]+$")
    zones: list[Str] = Field(default_factory=list)


class WidgetNodeClass(KubeObject):
    API_VERSION: ClassVar[str] = "widgets.example.com/v1"
    KIND: ClassVar[str] = "WidgetNodeClass"
    NODE_CLASS: ClassVar[bool] = True

    spec: WidgetSpec


def _overlays() -> dict[str, Overlay]:
    return {"WidgetSpec": Overlay(rules=[crds.cel_rule("self.zones.size() <= 3", "at most three zones", ".zones")])}


WIDGET = CRDSpec(WidgetNodeClass, "widgetnodeclasses", short_names=("wnc",),
                 columns=(READY_COLUMN, AGE_COLUMN, printer_column("Image", ".spec.image", priority=1)), overlays=_overlays)


class _EntryPoint:
    def __init__(self, name: str, items: Any) -> None:
        self.name, self.value, self._items = name, f"tests:{name}", items

    def load(self) -> Any:
        return lambda: self._items


@pytest.fixture
def widget_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed entry points plus a ``widget`` one returning WidgetNodeClass's CRDSpec."""
    installed = list(importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP))
    monkeypatch.setattr(registry, "entry_points", lambda group: [*installed, _EntryPoint("widget", [WIDGET])])


def test_a_plugins_crdspec_registers_its_kind_and_renders_its_crd(widget_plugin: None) -> None:
    assert registry.kind_registry()[("widgets.example.com/v1", "WidgetNodeClass")] is WidgetNodeClass
    specs = crds.crd_specs()
    kinds = [s.model.KIND for s in specs]
    # karpy's own kinds first (the simulated provider's KWOKNodeClass among them), then the plugins' by entry-point name (aws, kakaocloud, widget)
    assert kinds[:5] == ["NodePool", "NodeClaim", "NodeOverlay", "CapacityBuffer", "KWOKNodeClass"]
    assert kinds[5:] == ["EC2NodeClass", "KCNodeClass", "WidgetNodeClass"]
    crd = crds.generate()["widgets.example.com_widgetnodeclasses.yaml"]
    assert crd["metadata"]["name"] == "widgetnodeclasses.widgets.example.com"
    assert crd["spec"]["names"]["shortNames"] == ["wnc"] and crd["spec"]["scope"] == "Cluster"
    version = crd["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Ready", "Age", "Image"]
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["properties"]["image"]["pattern"] == "^img-[a-z0-9]+$"
    assert spec_schema["x-kubernetes-validations"] == [
        {"rule": "self.zones.size() <= 3", "message": "at most three zones", "fieldPath": ".zones"}]


def test_a_kind_offered_twice_keeps_its_first_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    other = CRDSpec(WidgetNodeClass, "widgets")
    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("b", [other]), _EntryPoint("a", [WIDGET])])
    assert registry.plugin_crd_specs() == [WIDGET]


def test_bare_kinds_get_no_crd_and_bad_items_skip_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_FAILED", {})  # the failures this process saw: this test's only
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [_EntryPoint("bare", [WidgetNodeClass]), _EntryPoint("bad", [WIDGET, "not a kind"])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entries = registry.api_entries()
        specs = registry.plugin_crd_specs()
        reg = registry.kind_registry()
    assert [name for name, _ in entries] == ["bare"]
    assert specs == []
    assert "skipped" in registry.failed_api_entries()["bad"]
    assert not any("skipped" in str(w.message) for w in caught)  # a log line, not a Python RuntimeWarning with source
    assert reg[("widgets.example.com/v1", "WidgetNodeClass")] is WidgetNodeClass


def test_core_generates_only_its_own_kinds_without_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    assert sorted(crds.generate()) == [
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
        "karpenter.kwok.sh_kwoknodeclasses.yaml",  # the built-in simulated provider's NodeClass
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.sh_nodeoverlays.yaml",
        "karpenter.sh_nodepools.yaml",
    ]


def test_an_in_tree_nodeclass_without_its_plugin_is_named_not_validated_and_not_missing() -> None:
    """`pip install karpy` alone (the README's first command) knows no EC2NodeClass: the loader says
    once that it is not validated and which distribution serves it, and the NodePool naming it is
    not told its NodeClass is missing (it is in the manifests)."""
    from karpy_core.apis.loader import load_text
    from karpy_core.apis.registry import core_kinds

    core_only = {(cls.API_VERSION, cls.KIND): cls for cls in core_kinds()}
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general-purpose}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
    loaded = load_text(text, "np.yaml", registry=core_only)
    assert [p.name for p in loaded.nodepools] == ["general-purpose"] and not loaded.nodeclasses
    assert loaded.warnings == ["np.yaml doc 2 EC2NodeClass/default: not validated: its plugin, karpy-aws (providers/aws), "
                               "is not installed (the simulated cloud does not need it)"]
    for named in ("simulated", None):  # validate without --cloud-provider, simulate's default cloud
        assert load_text(text, "np.yaml", registry=core_only, cloud_provider=named).warnings == loaded.warnings
    # another provider selected: the simulated cloud's needs are beside the point
    assert load_text(text, "np.yaml", registry=core_only, cloud_provider="kakaocloud").warnings == [
        "np.yaml doc 2 EC2NodeClass/default: not validated: its plugin, karpy-aws (providers/aws), is not installed"]
    with_aws = load_text(text, "np.yaml")  # the plugin installed: validated, no warning
    assert with_aws.warnings == [] and ("karpenter.k8s.aws", "EC2NodeClass", "default") in with_aws.nodeclasses
