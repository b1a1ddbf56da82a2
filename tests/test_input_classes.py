"""Input classes that printed a traceback or were accepted although the API server refuses them
(issue 35, items 4 and 5), through ``karpy validate`` and ``karpy simulate`` as a user runs them:
each gives one ``error:`` headline with the problem naming file, document, object and field (exit
2), or the correct result (exit 0).

* YAML values JSON cannot carry: a date or timestamp is the string as written (kubectl converts
  YAML to JSON with sigs.k8s.io/yaml), so is an explicit ``!!timestamp`` go-yaml reads (one it
  does not read is refused in its words); a ``!!binary`` that is not base64 (go-yaml's words),
  ``.inf``/``.nan`` and null keys are errors naming the field (a tag on a mapping or a list,
  ``!!set {a, b}``, is ignored, as go-yaml v2 ignores it, and one on a scalar is read as go-yaml
  reads it: ``!!binary`` decoded, any other the text as written).
* Durations beyond Go's ``time.Duration`` (``terminationGracePeriod: 9999999999h``).
* Quantities with non-ASCII digits (``"\u0661\u0662"``, ``"\uff11Gi"``), refused by apimachinery's grammar.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke_cli

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
{extra}---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {annotation}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: c
        image: nginx
        resources: {{requests: {{cpu: {cpu}, memory: {memory}}}}}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _problems(result: object) -> list[str]:
    """The ``  - ...`` problem lines of an ``error: invalid input`` report."""
    stderr: str = result.stderr  # type: ignore[attr-defined]
    lines = stderr.splitlines()
    assert lines and lines[0].startswith("error: invalid input"), stderr
    return [line.removeprefix("  - ") for line in lines[1:] if line.startswith("  - ")]


def _nodepool(extra: str = "") -> str:
    """The NodePool (``extra`` appended to its spec) and its EC2NodeClass."""
    return NODEPOOL.replace("{extra}", extra)


def _deployment(cpu: str = '"500m"', memory: str = '"256Mi"', annotation: str = "{}") -> str:
    return DEPLOYMENT.format(cpu=cpu, memory=memory, annotation=annotation)


# --- YAML values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "value"), [
    ("validate", "2024-01-01"), ("validate", "2024-01-01T10:00:00Z"), ("validate", "2001-12-14 21:59:43.10 -5"),
    ("validate", "2024-02-30"), ("validate", "1:20"), ("simulate", "2024-01-01"),
])
def test_timestamp_like_values_are_strings(tmp_path: Path, command: str, value: str) -> None:
    """A date, timestamp (valid or not) or base-60 number is the string as written, as kubectl reads it."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool(""))
    app = _write(tmp_path, "app.yaml", _deployment(annotation=f"{{created: {value}}}"))
    result = invoke_cli(command, nodepool, app)
    assert result.exit_code == 0, result.output
    if command == "simulate":
        assert "pods: 2 bound, 0 pending" in result.stdout


def test_timestamp_in_a_nodepool_annotation_and_a_scenario(tmp_path: Path) -> None:
    """The loader's placeholder check (a NodePool) and is_scenario_file (a Scenario) read dates too."""
    nodepool = _nodepool().replace("  name: default\nspec:", "  name: default\n  annotations: {created: 2024-01-01}\nspec:", 1)
    _write(tmp_path, "np.yaml", nodepool)
    _write(tmp_path, "app.yaml", _deployment())
    scenario = _write(tmp_path, "scenario.yaml", """\
apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {name: dated, created: 2024-01-01T00:00:00Z}
steps:
  - at: 0s
    apply: [np.yaml, app.yaml]
""")
    result = invoke_cli("validate", str(tmp_path / "np.yaml"))
    assert result.exit_code == 0, result.output
    result = invoke_cli("validate", scenario)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("valid: Scenario dated")
    result = invoke_cli("simulate", scenario, "--until", "1h", "--timeline", str(tmp_path / "t.png"))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("value", "message"), [
    ("!!binary aGVsbG8", "!!binary value contains invalid base64 data"),
    ("!!timestamp 2024-13-01", "cannot decode !!str `2024-13-01` as a !!timestamp"),
    ("!!null x", "cannot decode !!str `x` as a !!null"),
    (".inf", "'.inf' is not a JSON number (JSON has no infinity or NaN); quote it to make it a string"),
    ("-.inf", "'-.inf' is not a JSON number (JSON has no infinity or NaN); quote it to make it a string"),
    (".nan", "'.nan' is not a JSON number (JSON has no infinity or NaN); quote it to make it a string"),
])
def test_values_json_cannot_carry_name_the_field(tmp_path: Path, value: str, message: str) -> None:
    app = _write(tmp_path, "app.yaml", _deployment(annotation=f"{{created: {value}}}"))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, app)
        assert result.exit_code == 2, result.output
        assert _problems(result) == [f"{app} doc 1 Deployment/web: metadata.annotations.created: line 5 column 26: {message}"]


def test_every_such_value_of_a_document_is_named_and_other_documents_still_load(tmp_path: Path) -> None:
    app = _write(tmp_path, "app.yaml", """\
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {a: !!binary aGk, ~: x}
---
!!binary aGk
---
""" + _deployment(cpu="-1"))
    result = invoke_cli("validate", app)
    assert result.exit_code == 2
    assert _problems(result) == [
        f"{app} doc 1 ConfigMap/c: data.a: line 4 column 11: !!binary value contains invalid base64 data",
        f"{app} doc 1 ConfigMap/c: data: line 4 column 25: a null mapping key is not JSON (keys are strings); quote it",
        f"{app} doc 2: line 6 column 1: !!binary value contains invalid base64 data",
        f"{app} doc 3 Deployment/web: spec.template.spec.containers[0].resources.requests.cpu: must not be negative; got '-1'",
    ]


def test_number_and_boolean_keys_become_strings(tmp_path: Path) -> None:
    """sigs.k8s.io/yaml converts int, float and bool keys to strings: labels {1: a, true: b} are valid."""
    app = _deployment().replace("metadata: {labels: {app: web}}", "metadata: {labels: {app: web, 1: a, true: b, 1.5: c}}")
    nodepool = _write(tmp_path, "np.yaml", _nodepool(""))
    result = invoke_cli("simulate", nodepool, _write(tmp_path, "app.yaml", app))
    assert result.exit_code == 0, result.output
    assert "pods: 2 bound, 0 pending" in result.stdout


def test_scenario_with_a_binary_value_names_the_step(tmp_path: Path) -> None:
    scenario = _write(tmp_path, "s.yaml", """\
apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {name: s}
steps:
  - at: !!binary MHM
    apply: app.yaml
""")
    result = invoke_cli("validate", scenario)
    assert result.exit_code == 2
    assert _problems(result) == [
        f"{scenario} doc 1 Scenario/s: steps[0].at: line 5 column 9: !!binary value contains invalid base64 data"
    ]


# --- durations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "message"), [
    ("terminationGracePeriod", "9999999999h",
     "'9999999999h' is out of range: a duration is at most 2562047h47m16.854775807s (Go's time.Duration, about 292 years)"),
    ("terminationGracePeriod", "2562048h",
     "'2562048h' is out of range: a duration is at most 2562047h47m16.854775807s (Go's time.Duration, about 292 years)"),
    ("expireAfter", "99999999999999999999h",
     "'99999999999999999999h' is out of range: a duration is at most 2562047h47m16.854775807s (Go's time.Duration, about 292 years)"),
    ("expireAfter", "720h\n",
     "'720h\\n' is not a duration in whole h, m and s such as '30m' or '720h', or 'Never'"),
    ("expireAfter", "\u0661h",
     "'\u0661h' is not a duration in whole h, m and s such as '30m' or '720h', or 'Never'"),
])
def test_durations_are_bounded_as_upstream(tmp_path: Path, field: str, value: str, message: str) -> None:
    quoted = value.replace("\n", "\\n")
    nodepool = _write(tmp_path, "np.yaml", _nodepool("").replace(
        "      requirements: []\n", f'      requirements: []\n      {field}: "{quoted}"\n'))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, nodepool)
        assert result.exit_code == 2, result.output
        assert _problems(result) == [f"{nodepool} doc 1 NodePool/default: spec.template.spec.{field}: {message}"]


@pytest.mark.parametrize("value", ["2562047h", "2562047h47m16s"])
def test_the_longest_go_duration_simulates(tmp_path: Path, value: str) -> None:
    """At Go's maximum the run goes through (the node's expiry is far in the future, no traceback)."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool("").replace(
        "      requirements: []\n", f"      requirements: []\n      terminationGracePeriod: {value}\n      expireAfter: {value}\n"))
    app = _write(tmp_path, "app.yaml", _deployment())
    result = invoke_cli("simulate", nodepool, app)
    assert result.exit_code == 0, result.output
    assert "pods: 2 bound, 0 pending" in result.stdout


def test_until_beyond_go_durations_is_one_line(tmp_path: Path) -> None:
    app = _write(tmp_path, "app.yaml", _deployment())
    scenario = _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                                          "steps: [{at: 0s, apply: app.yaml}]\n")
    result = invoke_cli("simulate", scenario, "--until", "9999999999h")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --until: '9999999999h' is out of range: a duration is at most "
                                     "2562047h47m16.854775807s (Go's time.Duration, about 292 years)")
    assert app


# --- quantities ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "cpu"), [
    ("validate", '"\u0661\u0662"'), ("simulate", '"\u0661\u0662"'), ("validate", '"\uff11"'), ("validate", '"\u0663m"'), ("validate", '"1\u0660"'), ("validate", '"\u0967"'),
])
def test_non_ascii_digits_in_cpu_are_refused(tmp_path: Path, command: str, cpu: str) -> None:
    app = _write(tmp_path, "app.yaml", _deployment(cpu=cpu))
    result = invoke_cli(command, app)
    assert result.exit_code == 2, result.output
    assert _problems(result) == [
        f"{app} doc 1 Deployment/web: spec.template.spec.containers[0].resources.requests.cpu: {cpu.strip(chr(34))!r} "
        "is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')"
    ]


@pytest.mark.parametrize("memory", ['"\uff11Gi"', '"\u0662Mi"'])
def test_non_ascii_digits_in_memory_are_refused(tmp_path: Path, memory: str) -> None:
    app = _write(tmp_path, "app.yaml", _deployment(memory=memory))
    result = invoke_cli("simulate", app)
    assert result.exit_code == 2
    (problem,) = _problems(result)
    assert problem.endswith(f"resources.requests.memory: {memory.strip(chr(34))!r} is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')")


def test_non_ascii_digits_in_nodepool_limits_are_refused(tmp_path: Path) -> None:
    nodepool = _write(tmp_path, "np.yaml", _nodepool('  limits: {cpu: "\uff11\u0660"}\n'))
    result = invoke_cli("validate", nodepool)
    assert result.exit_code == 2
    assert _problems(result) == [
        f"{nodepool} doc 1 NodePool/default: spec.limits.cpu: '\uff11\u0660' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')"
    ]


@pytest.mark.parametrize(("cpu", "message"), [
    ('"1e2147483648"', "'1e2147483648' is not a Kubernetes quantity: unknown suffix 'e2147483648' "
                       "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent e3)"),
    ('"1e2147483647"', "'1e2147483647' is larger than a Kubernetes quantity can hold (2^63-1 in base units)"),
    ('"1K"', "'1K' is not a Kubernetes quantity: unknown suffix 'K' (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent e3)"),
    ('"1e1.5"', "'1e1.5' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')"),
])
def test_exponents_follow_apimachinery(tmp_path: Path, cpu: str, message: str) -> None:
    app = _write(tmp_path, "app.yaml", _deployment(cpu=cpu))
    result = invoke_cli("validate", app)
    assert result.exit_code == 2
    assert _problems(result) == [f"{app} doc 1 Deployment/web: spec.template.spec.containers[0].resources.requests.cpu: {message}"]


@pytest.mark.parametrize(("cpu", "cores"), [('"1.G"', None), ('".5"', "0.5"), ('"1."', "1"), ('"500e-3"', "0.5"), ('" 1 "', "1")])
def test_quantities_apimachinery_accepts_simulate(tmp_path: Path, cpu: str, cores: str | None) -> None:
    """Upstream's odd but valid forms: accepted (1.G cpu is too large for any node: the pods stay pending)."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool(""))
    app = _write(tmp_path, "app.yaml", _deployment(cpu=cpu))
    result = invoke_cli("simulate", nodepool, app)
    assert result.exit_code == 0, result.output
    if cores is None:
        assert "pods: 0 bound, 2 pending" in result.stdout
    else:
        assert "pods: 2 bound, 0 pending" in result.stdout


@pytest.mark.parametrize(("limit", "message"), [
    ("0.5", "must be an integer or a string; got the number 0.5 (quote it: '0.5')"),
    ('"-"', "'-' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi'; no spaces)"),
    ('" 10"', "' 10' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi'; no spaces)"),
    ('"1e1.5"', "'1e1.5' is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')"),
])
def test_crd_quantities_follow_the_crd_pattern(tmp_path: Path, limit: str, message: str) -> None:
    """NodePool limits are int-or-string with karpy's (and Karpenter's) quantity pattern: what the
    API server refuses for the CRD although ParseQuantity (a Pod's requests) would take it."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool(f"  limits: {{cpu: {limit}}}\n"))
    result = invoke_cli("validate", nodepool)
    assert result.exit_code == 2
    assert _problems(result) == [f"{nodepool} doc 1 NodePool/default: spec.limits.cpu: {message}"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_instance_type_catalog_json_constants_are_refused(tmp_path: Path, constant: str) -> None:
    """Python's json reads NaN/Infinity; Go's encoding/json (Karpenter's KWOK catalog) does not."""
    catalog = _write(tmp_path, "catalog.json", f'[{{"name": "x", "offerings": [], "resources": {{"cpu": {constant}}}}}]')
    result = invoke_cli("simulate", _write(tmp_path, "app.yaml", _deployment()), "--instance-types", catalog)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {catalog}: not valid JSON: {constant} is not a JSON number "
                                     "(Go's encoding/json, which Karpenter reads the catalog with, refuses it)")


# --- found by the fresh-user trial: what kube-apiserver refuses at create time ---------------------------

RUNTIMECLASS_POD = """\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: r}}
handler: h
overhead: {{podFixed: {{cpu: '{overhead}'}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec: {{runtimeClassName: r, containers: [{{name: c, image: i, resources: {{requests: {{cpu: "4"}}}}}}]}}
"""


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_negative_runtimeclass_overhead_is_refused(tmp_path: Path, command: str) -> None:
    """A negative ``overhead.podFixed`` used to shrink the pod's requests (a 4-cpu pod on a 2-vCPU
    node, exit 0); kube-apiserver refuses the RuntimeClass."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool(""))
    app = _write(tmp_path, "rc.yaml", RUNTIMECLASS_POD.format(overhead="-3"))
    result = invoke_cli(command, nodepool, app)
    assert result.exit_code == 2, result.output
    problems = _problems(result)
    assert any("RuntimeClass/r" in p and "overhead.podFixed.cpu" in p for p in problems), problems


def test_zero_runtimeclass_overhead_is_accepted(tmp_path: Path) -> None:
    nodepool = _write(tmp_path, "np.yaml", _nodepool(""))
    result = invoke_cli("simulate", nodepool, _write(tmp_path, "rc.yaml", RUNTIMECLASS_POD.format(overhead="0")))
    assert result.exit_code == 0, result.output
    assert "pods: 1 bound, 0 pending" in result.stdout


AFFINITY_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{requirement}]
  containers: [{{name: c, image: i}}]
"""


@pytest.mark.parametrize(("requirement", "message"), [
    ("{key: a, operator: Gt, values: ['x', 'y']}", "must be specified single value when operator is 'Gt'"),
    ("{key: a, operator: Lt, values: ['x']}", "'x' is not a 64-bit integer"),
    ("{key: a, operator: In, values: []}", "must be specified when operator is 'In'"),
    ("{key: a, operator: Exists, values: ['x']}", "may not be specified when operator is 'Exists'"),
])
def test_node_affinity_validate_refuses_what_simulate_could_not_use(tmp_path: Path, requirement: str, message: str) -> None:
    """``validate`` used to call such a pod valid and ``simulate`` left it pending as invalid:
    both refuse it now, naming the requirement, as kube-apiserver does."""
    app = _write(tmp_path, "pod.yaml", AFFINITY_POD.format(requirement=requirement))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, app)
        assert result.exit_code == 2, result.output
        problems = _problems(result)
        assert any("matchExpressions[0]" in p and message in p for p in problems), problems


def test_node_affinity_gt_with_one_integer_is_valid(tmp_path: Path) -> None:
    app = _write(tmp_path, "pod.yaml", AFFINITY_POD.format(requirement="{key: a, operator: Gt, values: ['3']}"))
    result = invoke_cli("validate", app)
    assert result.exit_code == 0, result.output
