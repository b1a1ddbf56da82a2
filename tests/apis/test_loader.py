"""The manifest loader: real inputs, the seed field reports, and exact error texts."""

from __future__ import annotations

from pathlib import Path

import pytest
from karpy_aws.apis import EC2NodeClass
from karpy_kakaocloud.apis import KCNodeClass

from karpy_core.apis.base import Source
from karpy_core.apis.loader import load_documents, load_text, substitute
from karpy_core.errors import ManifestError

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"
VARS = {"CLUSTER_NAME": "demo"}
KC_VARS = {
    "SUBNET_ID": "3f1c0a52-0000-4000-8000-000000000001",
    "WORKER_SECURITY_GROUP_ID": "7a2b0a52-0000-4000-8000-000000000002",
    "KUBERNETES_VERSION": "1.34",
}

# Karpenter's own example used a versioned group, which the v1 CRD rejects (pattern ^[^/]*$,
# kubernetes-sigs/karpenter#1516): karpy refuses it the same way, naming the field; karpy's copy
# of the example writes the group alone.
WINDOWS_CUSTOM = "windows-custom-userdata.yaml"




def problems_of(*args: object, **kwargs: object) -> list[str]:
    with pytest.raises(ManifestError) as info:
        if isinstance(args[0], str) and "\n" in args[0]:
            load_text(*args, **kwargs)  # type: ignore[arg-type]
        else:
            load_documents(*args, **kwargs)  # type: ignore[arg-type]
    return info.value.problems


# --------------------------------------------------------------------------- examples/


def input_files(examples_dir: Path) -> list[Path]:
    files = sorted((examples_dir / "nodepools").glob("*.yaml")) + sorted(
        (examples_dir / "workloads").glob("*.yaml")
    )
    assert len(files) >= 20
    return files


@pytest.mark.parametrize("variables", [VARS, {}], ids=["vars-set", "placeholders-literal"])
def test_every_input_file_loads(examples_dir: Path, variables: dict[str, str]) -> None:
    loaded_any = 0
    for path in input_files(examples_dir):
        result = load_documents([str(path)], variables)
        assert result.objects(), path
        for obj in result.objects():
            assert obj.source is not None and obj.source.file == str(path)
        for nodepool in result.nodepools:
            assert result.nodeclass_for(nodepool) is not None, (path, nodepool.name)
        warnings = [w for w in result.warnings if "left as written" not in w] if not variables else result.warnings
        assert warnings == [], warnings
        if not variables and "${CLUSTER_NAME}" in path.read_text():
            assert any("${CLUSTER_NAME} left as written" in w for w in result.warnings), path
        loaded_any += 1
    assert loaded_any >= 20


def test_placeholders_substituted_or_left_literal(examples_dir: Path) -> None:
    path = examples_dir / "nodepools" / "general-purpose.yaml"
    filled = load_documents([path], VARS).nodeclasses[("karpenter.k8s.aws", "EC2NodeClass", "default")]
    literal = load_documents([path], {}).nodeclasses[("karpenter.k8s.aws", "EC2NodeClass", "default")]
    assert isinstance(filled, EC2NodeClass) and isinstance(literal, EC2NodeClass)
    assert filled.spec.role == "KarpenterNodeRole-demo"
    assert filled.spec.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "demo"}
    assert literal.spec.role == "KarpenterNodeRole-${CLUSTER_NAME}"


def test_a_versioned_nodeclassref_group_is_refused_as_karpenters_crd_refuses_it(examples_dir: Path, tmp_path: Path) -> None:
    """Upstream's Windows example wrote ``group: karpenter.k8s.aws/v1``; Karpenter's CRD
    (``pattern: ^[^/]*$``) refuses it, and so does karpy, with the API server's words and the group
    to write instead (val48; before, karpy read it as the group alone with a warning)."""
    text = (examples_dir / "nodepools" / WINDOWS_CUSTOM).read_text()
    assert "group: karpenter.k8s.aws  #" in text
    path = tmp_path / WINDOWS_CUSTOM
    path.write_text(text.replace("group: karpenter.k8s.aws  #", "group: karpenter.k8s.aws/v1  #"))
    with pytest.raises(ManifestError) as refused:
        load_documents([path], VARS)
    assert list(refused.value.problems) == [
        f"{path} doc 1 NodePool/windows2022: spec.template.spec.nodeClassRef.group: Invalid value: "
        "\"karpenter.k8s.aws/v1\": should match '^[^/]*$' (an API group without a version: 'karpenter.k8s.aws')"
    ]


def test_input_details(examples_dir: Path) -> None:
    nodepools = examples_dir / "nodepools"
    result = load_documents([nodepools / "max-node-lifetime.yaml"], VARS)
    spec = result.nodepools[0].spec
    assert spec.template.spec.expire_after == "168h" and spec.template.spec.termination_grace_period == "24h"
    assert spec.disruption.consolidation_policy == "WhenEmpty" and spec.disruption.consolidate_after == "60s"
    assert load_documents([nodepools / "100-cpu-limit.yaml"], VARS).nodepools[0].spec.limits == {"cpu": "100"}
    minv = load_documents([nodepools / "min-values-family.yaml"], VARS).nodepools[0]
    assert [r.min_values for r in minv.spec.template.spec.requirements if r.min_values] == [5]
    win = load_documents([nodepools / "windows-2022.yaml"], VARS).nodeclasses[
        ("karpenter.k8s.aws", "EC2NodeClass", "windows2022")
    ]
    assert isinstance(win, EC2NodeClass)
    assert (
        win.spec.metadata_options.http_endpoint == "enabled"
        and win.spec.metadata_options.http_put_response_hop_limit == 1
    )
    br = load_documents([nodepools / "bottlerocket.yaml"], VARS).nodeclasses[
        ("karpenter.k8s.aws", "EC2NodeClass", "bottlerocket")
    ]
    assert isinstance(br, EC2NodeClass) and [
        m.ebs.volume_size for m in br.spec.block_device_mappings or [] if m.ebs
    ] == ["4Gi", "20Gi"]


def test_online_boutique(examples_dir: Path) -> None:
    result = load_documents([examples_dir / "workloads" / "online-boutique.yaml"], {})
    assert len(result.deployments) == 12
    assert {o.kind for o in result.other} == {"Service", "ServiceAccount"} and len(result.other) == 23
    assert all(line.startswith("v1 Service") for line in result.ignored())
    frontend = next(d for d in result.deployments if d.name == "frontend")
    assert frontend.spec.replicas == 1
    assert frontend.spec.template.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "64Mi"}


def test_whole_directory_later_definition_wins(examples_dir: Path) -> None:
    nodepools = examples_dir / "nodepools"
    paths = sorted(nodepools.glob("*.yaml"))
    result = load_documents([str(p) for p in paths], VARS)
    names = [np.name for np in result.nodepools]
    assert len(names) == len(set(names))  # redefinitions replace, they do not pile up
    assert any("redefines NodePool/default" in w for w in result.warnings)
    assert result.nodepools  # and every NodePool still finds its NodeClass
    assert all(result.nodeclass_for(np) is not None for np in result.nodepools)


def test_directory_argument_reads_yaml_sorted(tmp_path: Path) -> None:
    (tmp_path / "b.yml").write_text(DEMO_POD.replace("name: p", "name: b"))
    (tmp_path / "a.yaml").write_text(DEMO_POD.replace("name: p", "name: a"))
    (tmp_path / "notes.txt").write_text("not yaml: [")
    result = load_documents([tmp_path])
    assert [p.name for p in result.pods] == ["a", "b"]
    assert result.pods[0].source == Source(str(tmp_path / "a.yaml"), 1, 1)


# --------------------------------------------------------------------------- seeds


def test_seed_000_as_published_names_repeated_keys_and_unknown_field() -> None:
    path = SEEDS / "000-nodepool-as-published.yaml"
    problems = problems_of([str(path)])
    where = f"{path} doc 1 NodePool/nodepool"
    assert problems == [
        f"{where}: spec: repeated key 'spec' at line 19 (first at line 9); each key may appear once per mapping",
        f'{where}: spec.cluster: unknown field "cluster" (not part of karpenter.sh/v1 NodePool)',
        f'{where}: spec.name: unknown field "name" (not part of karpenter.sh/v1 NodePool)',
        f'{where}: spec.namespace: unknown field "namespace" (not part of karpenter.sh/v1 NodePool)',
    ]


def test_seed_000_nodeclass_as_published_has_a_placeholder_ami() -> None:
    path = SEEDS / "000-ec2nodeclass-as-published.yaml"
    assert problems_of([str(path)]) == [
        f"{path} doc 1 EC2NodeClass/ec2nodeclass: spec.amiSelectorTerms[0].id: "
        "'<ami images>' is not an AMI id (ami-...)"
    ]


def test_seed_000_repaired_loads() -> None:
    result = load_documents([SEEDS / "000-repaired.yaml"])
    assert result.warnings == []
    (nodepool,) = result.nodepools
    reqs = {r.key: r.values for r in nodepool.spec.template.spec.requirements}
    assert reqs["karpenter.k8s.aws/instance-family"] == ["t2"]
    assert reqs["karpenter.k8s.aws/instance-size"] == ["small", "medium"]
    assert reqs["topology.kubernetes.io/zone"] == ["ap-northeast-2a", "ap-northeast-2b"]
    assert nodepool.spec.limits == {"cpu": "5"}
    assert nodepool.spec.disruption.consolidate_after == "1m"
    assert nodepool.spec.template.metadata.labels == {
        "nodegroup": "karpenter",
        "alpha.eksctl.io/nodegroup-name": "karpenter-ng",
    }
    nodeclass = result.nodeclass_for(nodepool)
    assert isinstance(nodeclass, EC2NodeClass)
    assert nodeclass.spec.ami_family == "AL2" and nodeclass.spec.role == "KarpenterNodeRole-eks"


def test_seed_002_block_device_mappings_load() -> None:
    result = load_documents([SEEDS / "002-gp3-block-devices.yaml"], VARS)
    nodeclass = result.nodeclasses[("karpenter.k8s.aws", "EC2NodeClass", "default")]
    assert isinstance(nodeclass, EC2NodeClass)
    mappings = nodeclass.spec.block_device_mappings or []
    assert [
        (m.device_name, m.ebs.volume_size, m.ebs.volume_type, m.ebs.iops, m.ebs.throughput, m.ebs.encrypted)
        for m in mappings
        if m.ebs
    ] == [
        ("/dev/xvda", "100Gi", "gp3", 3000, 125, True),
        ("/dev/xvdb", "20Gi", "gp3", 3000, 125, True),
    ]
    assert result.nodepools[0].spec.template.spec.requirements[0].values == ["spot", "on-demand", "reserved"]
    assert [o.ref() for o in result.other] == ["StorageClass/gp3"]


def test_seed_003_old_api_is_explained() -> None:
    path = SEEDS / "003-provisioner-v1alpha5.yaml"
    provisioner, template = problems_of([str(path)])
    assert provisioner.startswith(
        f"{path} doc 1 Provisioner/network: karpenter.sh/v1alpha5 Provisioner is the old API, removed in Karpenter v1"
    )
    assert "replaced by karpenter.sh/v1 NodePool" in provisioner
    for rename in (
        "ttlSecondsAfterEmpty -> disruption.consolidateAfter with consolidationPolicy: WhenEmpty",
        "ttlSecondsUntilExpired -> template.spec.expireAfter",
        "providerRef -> template.spec.nodeClassRef",
    ):
        assert rename in provisioner
    assert template.startswith(
        f"{path} doc 2 AWSNodeTemplate/network: karpenter.k8s.aws/v1alpha1 AWSNodeTemplate is the old API"
    )
    assert "replaced by karpenter.k8s.aws/v1 EC2NodeClass" in template


def test_seed_004_kakaocloud_manifests_load() -> None:
    files = [SEEDS / "004-kcnodeclass.yaml", SEEDS / "004-nodepool.yaml", SEEDS / "004-karpenter-demo.yaml"]
    result = load_documents(files, KC_VARS)
    assert result.warnings == []
    nodeclass = result.nodeclass_for(result.nodepools[0])
    assert isinstance(nodeclass, KCNodeClass)
    assert nodeclass.spec.subnet_selector_terms[0].id == KC_VARS["SUBNET_ID"]
    assert nodeclass.spec.root_volume is not None and nodeclass.spec.root_volume.size_gib == 50
    assert nodeclass.spec.bootstrap.kubernetes_version == "1.34"
    assert result.nodepools[0].spec.limits == {"cpu": "40", "memory": "160Gi"}
    assert result.nodepools[0].spec.disruption.consolidate_after == "10m"
    (demo,) = result.deployments
    assert demo.spec.replicas == 3 and demo.spec.template.spec.node_selector == {"workload-type": "karpenter"}
    assert demo.spec.template.spec.containers[0].resources.requests == {"cpu": "1", "memory": "2Gi"}


def test_seed_004_cilium_variant_loads() -> None:
    result = load_documents([SEEDS / "004-kcnodeclass.yaml", SEEDS / "004-nodepool-cilium.yaml"], KC_VARS)
    (taint,) = result.nodepools[0].spec.template.spec.startup_taints
    assert (taint.key, taint.value, taint.effect) == ("node.cilium.io/agent-not-ready", "true", "NoExecute")


def test_seed_004_unfilled_placeholders() -> None:
    published = SEEDS / "004-kcnodeclass-as-published.yaml"
    assert problems_of([str(published)]) == [
        f"{published} doc 1 KCNodeClass/karpenter-default: spec.bootstrap.kubernetesVersion: must be a Kubernetes "
        "minor version 'MAJOR.MINOR' such as '1.34' (no patch); got '<KUBERNETES_MAJOR.MINOR>'"
    ]
    template = SEEDS / "004-kcnodeclass.yaml"
    (problem,) = problems_of([str(template)], {})
    assert "spec.bootstrap.kubernetesVersion" in problem and "'${KUBERNETES_VERSION}'" in problem


def test_seed_004_nodepool_alone_warns_about_missing_nodeclass() -> None:
    result = load_documents([SEEDS / "004-nodepool.yaml"])
    assert result.warnings == [
        f"{SEEDS / '004-nodepool.yaml'} doc 1 NodePool/karpenter-default: spec.template.spec.nodeClassRef names "
        "karpenter.kakaocloud.com KCNodeClass/karpenter-default, which is not among the loaded manifests"
    ]


# --------------------------------------------------------------------------- loader mechanics

DEMO_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
    - name: c
      image: pause
"""

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: np
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [amd64]
        - key: kubernetes.io/os
          operator: In
          values: [linux]
        - key: karpenter.sh/capacity-type
          operator: Equals
          values: [spot]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""


def test_exact_error_text_names_file_doc_kind_name_and_path() -> None:
    problems = problems_of("---\n" + DEMO_POD + "---\n" + NODEPOOL, "bad.yaml")
    assert problems == [
        "bad.yaml doc 2 NodePool/np: spec.template.spec.requirements[2].operator: must be one of 'In', 'NotIn', "
        "'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte'; got 'Equals'"
    ]


def test_all_problems_collected_across_documents_and_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(NODEPOOL + "  limits:\n    cpu: lots\n  weight: 0\n")
    (tmp_path / "b.yaml").write_text(
        DEMO_POD.replace("- name: c", "- name: c\n      resources: {requests: {memory: 2 GB}}")
    )
    problems = problems_of([tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "missing.yaml"])
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert problems == [
        f"{tmp_path / 'missing.yaml'}: no such file or directory",
        f"{a} doc 1 NodePool/np: spec.template.spec.requirements[2].operator: must be one of 'In', 'NotIn', 'Exists', "
        "'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte'; got 'Equals'",
        f"{a} doc 1 NodePool/np: spec.limits.cpu: 'lots' is not a Kubernetes quantity "
        "(expected e.g. '500m', '2', '4Gi')",
        f"{a} doc 1 NodePool/np: spec.weight: must be >= 1; got the number 0",
        f"{b} doc 1 Pod/p: spec.containers[0].resources.requests.memory: '2 GB' is not a Kubernetes quantity "
        "(expected e.g. '500m', '2', '4Gi')",
    ]


def test_wrong_types_in_plain_words() -> None:
    text = (
        NODEPOOL.replace("operator: Equals", "operator: In")
        + "  weight: '10'\n  disruption:\n    consolidateAfter: 30\n"
    )
    assert problems_of(text, "t.yaml") == [
        "t.yaml doc 1 NodePool/np: spec.disruption.consolidateAfter: must be a string; got the number 30 "
        "(quote it in YAML so it stays text)",
        "t.yaml doc 1 NodePool/np: spec.weight: must be an integer; got '10'",
    ]


def test_missing_required_field_and_restricted_label() -> None:
    text = NODEPOOL.replace("operator: Equals", "operator: In").replace("kubernetes.io/os", "kubernetes.io/hostname")
    text = text.replace("      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n", "")
    assert problems_of(text, "t.yaml") == [
        "t.yaml doc 1 NodePool/np: spec.template.spec.requirements[1].key: label key 'kubernetes.io/hostname' is "
        "restricted: Karpenter sets it itself or it belongs to a reserved domain",
        "t.yaml doc 1 NodePool/np: spec.template.spec.nodeClassRef: required field is missing",
    ]


def test_repeated_keys_inside_lists_and_nested_maps() -> None:
    text = NODEPOOL.replace("operator: Equals", "operator: In\n          operator: NotIn")
    text = text.replace("  name: np\n", "  name: np\n  labels:\n    a: '1'\n    a: '2'\n")
    problems = problems_of(text, "t.yaml")
    assert problems == [
        "t.yaml doc 1 NodePool/np: metadata.labels.a: repeated key 'a' at line 7 (first at line 6); "
        "each key may appear once per mapping",
        "t.yaml doc 1 NodePool/np: spec.template.spec.requirements[2].operator: repeated key 'operator' at line 20 "
        "(first at line 19); each key may appear once per mapping",
    ]


def test_yaml_merge_keys_are_not_repeats() -> None:
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - &common
      name: c
      image: nginx
    - <<: *common
      name: d
      image: busybox
"""
    result = load_text(text, "m.yaml")
    assert [(c.name, c.image) for c in result.pods[0].spec.containers] == [("c", "nginx"), ("d", "busybox")]


def test_empty_documents_skipped_and_not_counted() -> None:
    result = load_text("# header\n---\n---\n" + DEMO_POD + "---\n", "e.yaml")
    (pod,) = result.pods
    assert pod.source == Source("e.yaml", 1, 4)  # the first object, as kubectl lists what it creates


def test_yaml_syntax_error() -> None:
    (problem,) = problems_of(DEMO_POD + "  bad: [unclosed\n", "s.yaml")
    assert problem.startswith("s.yaml: line ") and "YAML syntax error" in problem


def test_document_shape_errors() -> None:
    problems = problems_of(
        "- a\n- b\n---\nkind: Pod\nmetadata: {name: x}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c, image: pause}]}\n",
        "d.yaml",
    )
    assert problems == [
        "d.yaml doc 1: expected a Kubernetes object (a mapping); got a list",
        "d.yaml doc 2 Pod/x: apiVersion: required field is missing (or not a string)",
        "d.yaml doc 3 Pod/<no name>: metadata.name: required field is missing",
    ]


def test_other_pre_v1_and_unsupported_versions() -> None:
    text = (
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\n---\n"
        "apiVersion: karpenter.sh/v2\nkind: NodePool\nmetadata: {name: b}\n---\n"
        "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: c}\n"
    )
    first, second, third = problems_of(text, "o.yaml")
    assert first.startswith(
        "o.yaml doc 1 NodePool/a: karpenter.sh/v1beta1 NodePool is the old API, removed in Karpenter v1; "
        "use karpenter.sh/v1 NodePool"
    )
    assert (
        second
        == "o.yaml doc 2 NodePool/b: apiVersion: karpenter.sh/v2 is not supported for NodePool; use karpenter.sh/v1"
    )
    assert third.startswith("o.yaml doc 3 EC2NodeClass/c: karpenter.k8s.aws/v1beta1 EC2NodeClass is the old API")


def test_unmodelled_kinds_are_ignored() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: ns}\ndata: {a: b}\n---\n"
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeExample\nmetadata: {name: o}\nspec: {}\n"
    )
    result = load_text(text, "i.yaml")
    assert result.ignored() == [
        "v1 ConfigMap/ns/cm (i.yaml doc 1)",
        "karpenter.sh/v1alpha1 NodeExample/o (i.yaml doc 2)",
    ]
    assert result.warnings == [
        "i.yaml doc 2 NodeExample/o: karpy does not model karpenter.sh/v1alpha1 NodeExample; ignored"
    ]
    assert result.objects() == []


def test_v1_list_items_are_expanded() -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        f"  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: p{i}, namespace: default}}\n"
        "    spec: {containers: [{name: c, image: pause}]}\n"
        for i in range(2)
    )
    result = load_text(text, "l.yaml")
    assert [(p.name, str(p.source)) for p in result.pods] == [
        ("p0", "l.yaml doc 1 item 1"),
        ("p1", "l.yaml doc 1 item 2"),
    ]


def test_substitute() -> None:
    assert substitute("a ${X} ${Y} $X ${x-y}", {"X": "1"}) == "a 1 ${Y} $X ${x-y}"
    assert substitute("${X}", {}) == "${X}"


def test_kcnodeclass_float_version_hint() -> None:
    text = (SEEDS / "004-kcnodeclass.yaml").read_text().replace('"${KUBERNETES_VERSION}"', "1.30")
    (problem,) = problems_of(text, "k.yaml", KC_VARS)
    assert problem == (
        "k.yaml doc 1 KCNodeClass/karpenter-default: spec.bootstrap.kubernetesVersion: must be a string; got the "
        "number 1.3 (quote it in YAML so it stays text)"
    )


def test_kcnodeclass_small_root_volume() -> None:
    text = (SEEDS / "004-kcnodeclass.yaml").read_text().replace("sizeGiB: 50", "sizeGiB: 20")
    assert problems_of(text, "k.yaml", KC_VARS) == [
        "k.yaml doc 1 KCNodeClass/karpenter-default: spec.rootVolume.sizeGiB: must be >= 30; got the number 20"
    ]


def test_empty_file_loads_nothing_with_a_warning(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n  \n")
    result = load_documents([str(empty)], {})
    assert result.objects() == [] and result.warnings == [f"{empty}: empty file, no objects loaded"]
