"""Trial 13: what a NodeClass's plugin being installed or not must not change.

* an empty ``labels:``/``annotations:`` in any object's metadata is unset, as kube-apiserver's
  decoder reads it (the README: "an empty value ... is read as the API server reads it"): it was
  refused for a NodeClass whose plugin is not installed (``metadata.labels: must be a mapping; got
  null``);
* a NodePool of a KCNodeClass has at most 38 characters (README): it was checked only with
  karpy-kakaocloud installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy_core.apis.loader import IN_TREE_NODEPOOL_NAME_LIMITS, load_documents
from karpy_core.apis.registry import kind_registry
from karpy_core.errors import ManifestError

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  {field}:
spec:
  role: R
  amiSelectorTerms: [{{alias: al2023@latest}}]
"""

KC_NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kakaocloud.com, kind: KCNodeClass, name: default}}
      requirements: []
"""


def _without(kind: str) -> dict:
    return {k: v for k, v in kind_registry().items() if k[1] != kind}


@pytest.mark.parametrize("field", ["labels", "annotations"])
def test_an_empty_metadata_map_of_an_unplugged_nodeclass_is_unset(tmp_path: Path, field: str) -> None:
    path = tmp_path / "nc.yaml"
    path.write_text(NODECLASS.format(field=field))
    loaded = load_documents([str(path)], registry=_without("EC2NodeClass"))
    [nodeclass] = [o for o in loaded.other if o.kind == "EC2NodeClass"]
    assert nodeclass.name == "default"
    assert getattr(nodeclass.metadata, field) in (None, {})


def test_a_kcnodeclass_nodepool_name_is_limited_without_the_plugin(tmp_path: Path) -> None:
    path = tmp_path / "np.yaml"
    path.write_text(KC_NODEPOOL.format(name="a" * 39))
    with pytest.raises(ManifestError) as info:
        load_documents([str(path)], registry=_without("KCNodeClass"))
    assert f"{path} doc 1 NodePool/{'a' * 39}: metadata.name: must be no more than 38 characters (got 39) " \
           "for a NodePool whose nodeClassRef is a KCNodeClass" in str(info.value)
    path.write_text(KC_NODEPOOL.format(name="a" * 38))
    assert [p.name for p in load_documents([str(path)], registry=_without("KCNodeClass")).nodepools] == ["a" * 38]


def test_the_in_tree_limit_is_the_plugins() -> None:
    from karpy_kakaocloud.apis import MAX_NODEPOOL_NAME

    assert IN_TREE_NODEPOOL_NAME_LIMITS[("karpenter.kakaocloud.com", "KCNodeClass")] == MAX_NODEPOOL_NAME
