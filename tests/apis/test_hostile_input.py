"""Hostile manifests get a clear error in bounded time and memory (issue 10, section 4).

Each test here failed before the fix it covers (see the commit that added it).
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from karpy_core.apis.loader import MAX_ALIAS_NODES, MAX_NESTING_DEPTH, YAMLLimitError, load_text, safe_load_all
from karpy_core.errors import ManifestError

NODEPOOL_HEAD = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bomb}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """A NodePool whose unknown field ``spec.junk`` expands to fan**levels strings (~0.7 KB)."""
    lines = [NODEPOOL_HEAD + "  junk:", '    a0: &a0 [' + ",".join(['"lol"'] * fan) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def problems_of(text: str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_text(text, "bomb.yaml")
    return info.value.problems


@pytest.mark.timeout(30)
def test_alias_bomb_in_unknown_field_is_refused_fast_and_small():
    text = alias_bomb()
    assert len(text) < 1024
    tracemalloc.start()
    started = time.perf_counter()
    try:
        problems = problems_of(text)
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(problems) == 1, problems
    assert problems[0].startswith("bomb.yaml: line 10 column ")  # the anchor whose copies broke the bound
    assert "document refused" in problems[0] and "excessive aliasing" in problems[0]
    assert elapsed < 2.0
    assert peak < 20 * 2**20


def test_ordinary_anchors_still_load():
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: &labels {app: web}}
  template:
    metadata: {labels: *labels}
    spec:
      containers:
      - name: a
        image: pause
        resources: &res {requests: {cpu: 250m, memory: 64Mi}}
      - name: b
        image: pause
        resources: *res
"""
    loaded = load_text(text)
    spec = loaded.deployments[0].spec.template.spec
    assert [c.resources.requests for c in spec.containers] == [{"cpu": "250m", "memory": "64Mi"}] * 2


def test_alias_expansion_has_an_absolute_cap():
    # 1% aliases would pass go-yaml's ratio rule, but not karpy's cap on expanded nodes
    anchor = "[" + ",".join(["x"] * 999) + "]"
    text = "a: &a " + anchor + "\nb: [" + ",".join(["*a"] * (MAX_ALIAS_NODES // 1000 + 2)) + "]\n"
    with pytest.raises(YAMLLimitError, match="excessive aliasing"):
        list(safe_load_all(text))


def test_recursive_alias_is_refused():
    with pytest.raises(YAMLLimitError, match="recursive document"):
        list(safe_load_all("a: &a [1, *a]\n"))


def nested(depth: int) -> str:
    return (
        "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: c, image: pause}]\nmetadata:\n  name: p\n"
        f"  managedFields: [{{fieldsV1: {{junk: {'[' * depth}{']' * depth}}}}}]\n"  # FieldsV1 is free-form
    )


def test_deep_nesting_in_unmodelled_field_is_refused_with_line():
    problems = problems_of(nested(300))
    assert len(problems) == 1
    assert problems[0].startswith("bomb.yaml: line 7 column ")
    assert f"nested more than {MAX_NESTING_DEPTH} levels deep" in problems[0]


def test_nesting_within_the_bound_loads():
    loaded = load_text(nested(MAX_NESTING_DEPTH - 10))
    assert loaded.pods[0].name == "p"


# --------------------------------------------------------------------------- quantities, replicas


def deployment(replicas: object = 1, requests: dict | None = None, limits: dict | None = None, name: str = "web") -> str:
    import json

    resources = {"requests": requests or {"cpu": "1"}}
    if limits is not None:
        resources["limits"] = limits
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {json.dumps(replicas)}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: c
        image: pause
        resources: {json.dumps(resources)}
"""


CONTAINER = "doc 1 Deployment/web: spec.template.spec.containers[0].resources"


def test_quantity_beyond_int64_is_refused_naming_the_field():
    problems = problems_of(deployment(requests={"cpu": "9223372036854775808"}))
    assert problems == [
        f"bomb.yaml {CONTAINER}.requests.cpu: '9223372036854775808' is larger than a Kubernetes quantity can hold (2^63-1 in base units)"
    ]


@pytest.mark.parametrize("field", ["requests", "limits"])
def test_negative_container_quantity_is_refused(field):
    problems = problems_of(deployment(requests={"cpu": "100m"} if field == "limits" else {"cpu": "-1"},
                                      limits={"memory": "-1Gi"} if field == "limits" else None))
    bad = "'-1Gi'" if field == "limits" else "'-1'"
    resource = "memory" if field == "limits" else "cpu"
    assert problems == [f"bomb.yaml {CONTAINER}.{field}.{resource}: must not be negative; got {bad}"]


def test_request_above_limit_is_refused():
    problems = problems_of(deployment(requests={"cpu": "2"}, limits={"cpu": "1500m"}))
    assert problems == [f"bomb.yaml {CONTAINER}: requests.cpu '2' must be less than or equal to cpu limit of '1500m'"]


def test_request_equal_to_limit_and_limit_only_are_fine():
    loaded = load_text(deployment(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1000m", "memory": "2Gi"}))
    assert loaded.deployments[0].spec.replicas == 1


def test_negative_pod_overhead_and_node_capacity_are_refused():
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: pause}]
  overhead: {cpu: "-250m"}
---
apiVersion: v1
kind: Node
metadata: {name: "n"}
status:
  capacity: {cpu: "4", memory: "-1"}
"""
    assert problems_of(text) == [
        "bomb.yaml doc 1 Pod/p: spec.overhead.cpu: must not be negative; got '-250m'",
        "bomb.yaml doc 2 Node/n: status.capacity.memory: must not be negative; got '-1'",
    ]


@pytest.mark.parametrize("replicas", [-1, 2**31])
def test_replicas_outside_int32_are_refused(replicas):
    problems = problems_of(deployment(replicas=replicas))
    bound = ">= 0" if replicas < 0 else "<= 2147483647"
    assert problems == [f"bomb.yaml doc 1 Deployment/web: spec.replicas: must be {bound}; got the number {replicas}"]


def test_job_parallelism_beyond_int32_is_refused():
    text = """\
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  parallelism: 4294967296
  template: {spec: {containers: [{name: c, image: pause}]}}
"""
    assert problems_of(text) == ["bomb.yaml doc 1 Job/j: spec.parallelism: must be <= 2147483647; got the number 4294967296"]


# --------------------------------------------------------------------------- names

SEEDS = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "seeds"
SUBDOMAIN = ("must be a lowercase RFC 1123 subdomain: lower case alphanumerics, '-' or '.', starting and ending "
             "with an alphanumeric (e.g. 'example.com')")


def test_nodepool_named_dash_x_is_refused_as_the_api_server_refuses_it():
    problems = problems_of(NODEPOOL_HEAD.replace("name: bomb", 'name: "-x"'))
    assert problems == [f"bomb.yaml doc 1 NodePool/-x: metadata.name: {SUBDOMAIN}"]


def test_a_bad_name_is_reported_with_the_other_problems_of_its_document():
    # one run names every problem: the name too, when another field fails validation
    text = NODEPOOL_HEAD.replace("name: bomb", "name: Bad_Name").replace("spec:\n", "spec:\n  limits: {cpu: lots}\n", 1)
    assert problems_of(text) == [
        f"bomb.yaml doc 1 NodePool/Bad_Name: metadata.name: {SUBDOMAIN}",
        "bomb.yaml doc 1 NodePool/Bad_Name: spec.limits.cpu: 'lots' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')",
    ]
    # a metadata field of the wrong type is reported once, by validation
    broken = NODEPOOL_HEAD.replace("metadata: {name: bomb}", "metadata: {name: Bad_Name, labels: 3}")
    assert [p.split(": ", 1)[1].split(":")[0] for p in problems_of(broken)] == ["metadata.labels"]


def test_nodepool_name_must_fit_the_nodepool_label():
    name = "a" * 64
    problems = problems_of(NODEPOOL_HEAD.replace("name: bomb", f"name: {name}"))
    assert problems == [f"bomb.yaml doc 1 NodePool/{name}: metadata.name: must be no more than 63 characters (got 64) "
                        "(it is the karpenter.sh/nodepool label value of every NodeClaim and Node it launches)"]


@pytest.mark.parametrize(
    ("api_version", "kind", "name", "expected"),
    [
        ("v1", "Pod", "Web_1", [SUBDOMAIN]),
        ("v1", "Pod", "a" * 254, ["must be no more than 253 characters (got 254)"]),
        ("v1", "Pod", "web.example.com", []),
        ("apps/v1", "StatefulSet", "db.primary", ["must be a lowercase RFC 1123 label: lower case alphanumerics or '-', "
                                                  "starting and ending with an alphanumeric (e.g. 'my-name')"]),
        ("v1", "Namespace", "x" * 64, ["must be no more than 63 characters (got 64)"]),
        ("v1", "Service", "1web", ["must be a DNS-1035 label: lower case alphanumerics or '-', starting with a letter "
                                   "and ending with an alphanumeric (e.g. 'my-name')"]),
        ("v1", "ConfigMap", "settings.v2", []),
        ("example.com/v1", "Widget", "-w", [SUBDOMAIN]),
    ],
)
def test_names_follow_the_api_server_rule_of_each_kind(api_version, kind, name, expected):
    spec = {"Pod": "spec: {containers: [{name: c, image: pause}]}\n",
            "StatefulSet": "spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, "
                            "spec: {containers: [{name: c, image: pause}]}}}\n"}.get(kind, "")
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: '{name}'}}\n{spec}"
    if not expected:
        load_text(text)
        return
    assert problems_of(text) == [f"bomb.yaml doc 1 {kind}/{name}: metadata.name: {e}" for e in expected]


def test_generate_name_may_end_with_a_dash_and_namespace_is_a_label():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: web-, namespace: Team_A}\nspec: {containers: [{name: c, image: pause}]}\n"
    assert problems_of(text) == [
        "bomb.yaml doc 1 Pod/Team_A/web-*: metadata.namespace: must be a lowercase RFC 1123 label: lower case alphanumerics or "
        "'-', starting and ending with an alphanumeric (e.g. 'my-name')"
    ]


def test_kakaocloud_nodepool_name_is_at_most_38_characters():
    text = (SEEDS / "004-nodepool.yaml").read_text().replace("name: karpenter-default\nspec:", f"name: {'k' * 39}\nspec:", 1)
    problems = problems_of(text)
    assert problems == [f"bomb.yaml doc 1 NodePool/{'k' * 39}: metadata.name: must be no more than 38 characters (got 39) "
                        "for a NodePool whose nodeClassRef is a KCNodeClass"]
    # 38 is fine, and the same name on an EC2NodeClass is fine
    load_text(text.replace("k" * 39, "k" * 38))
    aws = text.replace("karpenter.kakaocloud.com", "karpenter.k8s.aws").replace("KCNodeClass", "EC2NodeClass")
    assert load_text(aws).nodepools[0].name == "k" * 39


@pytest.mark.parametrize(("char", "code"), [("\x00", "0000"), ("\x01", "0001"), ("\x7f", "007f")])
def test_a_control_character_is_placed_by_line_and_column(char: str, code: str) -> None:
    """Trial 5: a NUL byte or another control character was reported as PyYAML's ``in "<unicode
    string>", position N``; it is placed by line and column like every other syntax error."""
    problems = problems_of(f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a{char}b\n")
    assert problems == [f"bomb.yaml: line 4 column 10: YAML syntax error: unacceptable character #x{code}: "
                        "control characters are not allowed (documents after it were not read)"]
