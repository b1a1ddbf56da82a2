"""What a fresh-user trial found still accepted (or worded wrongly) after issue 35, through ``karpy
validate`` and ``karpy simulate`` as a user runs them: each input gives one problem line naming
file, document, object and field (exit 2), as kube-apiserver or Karpenter's CRD would refuse it,
or the correct result.

* ``metadata.labels`` keys and values and ``metadata.annotations`` keys (apimachinery's
  ``IsQualifiedName``/``IsValidLabelValue``), on every kind the loader reads and in pod templates;
* container names: DNS-1123 labels, unique across ``containers`` and ``initContainers``;
* integers beyond their OpenAPI format (``int32``: priority, replicas, PDB ints; ``int64``:
  terminationGracePeriodSeconds and every other integer);
* ``metadata.creationTimestamp``: an RFC 3339 string or null only;
* a negative NodePool limit: accepted (the CRD's pattern allows a sign), warned about, and its
  pods' reason says so;
* ``validate --max-pods`` names the file and ``karpy validate``;
* a Scenario step applying its own file (or another Scenario) is refused, naming the step;
* what kube-apiserver v1.36.3 refuses (each checked with a ``dryRun=All`` POST on the dev
  cluster): container resource names, extended resources (whole numbers, request == limit, a limit
  set), ``nodeSelector`` labels, ``minDomains`` with ``ScheduleAnyway``, empty
  ``nodeSelectorTerms``, PDB percentages over 100%, pod ``restartPolicy``, a workload selector
  not matching its template; and ``replicas: null``, which it defaults to 1;
* trial 3, also checked by dryRun=All: a Deployment's ``strategy`` (type, ``maxSurge``/``maxUnavailable``
  int or percent, not both 0), user and group IDs in pod and container ``securityContext`` of every
  workload kind, a ``priorityClassName`` no PriorityClass defines (Priority admission), and field and
  cross-field ``resources`` problems reported together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli import invoke_cli
from tests.test_input_classes import _deployment, _nodepool, _problems, _write

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
{meta}spec:
{spec}  containers:
  - name: a
    image: nginx
{containers}"""


def _pod(meta: str = "", spec: str = "", containers: str = "") -> str:
    return POD.format(meta=meta, spec=spec, containers=containers)


def _refused(tmp_path: Path, text: str, *, name: str = "in.yaml") -> list[str]:
    """The problem lines of ``text`` through validate and simulate (the same in both)."""
    path = _write(tmp_path, name, text)
    seen = []
    for command in ("validate", "simulate"):
        result = invoke_cli(command, path)
        assert result.exit_code == 2, (command, result.output)
        seen.append(_problems(result))
    assert seen[0] == seen[1], seen
    return seen[0]


QUALIFIED = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
             "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("labels", "problem"), [
    ("{ключ: v}", f"key 'ключ': name part {QUALIFIED}"),
    ("{app: " + "v" * 100 + "}", "'app': value '" + "v" * 67 + "...': must be no more than 63 characters (got 100)"),
    ('{app: "-x"}', "'app': value '-x': a valid label value must be an empty string or consist of alphanumeric characters"),
    ('{"Example.com/app": x}', "key 'Example.com/app': prefix part must be a lowercase RFC 1123 subdomain"),
    ('{"/app": x}', "key '/app': prefix part must be non-empty"),
    ('{"a/b/c": x}', "key 'a/b/c': a valid label key must consist of"),
    ('{"x/' + "n" * 64 + '": "y"}', "key 'x/" + "n" * 64 + "': name part must be no more than 63 characters (got 64)"),
])
def test_label_keys_and_values_are_checked_as_apimachinery_does(tmp_path: Path, labels: str, problem: str) -> None:
    (line,) = _refused(tmp_path, _pod(meta=f"  labels: {labels}\n"))
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 Pod/p: metadata.labels: {problem}"), line


def test_labels_of_every_kind_and_of_pod_templates_are_checked(tmp_path: Path) -> None:
    bad_template = _deployment().replace("metadata: {labels: {app: web}}", "metadata: {labels: {app: web, ключ: x}}")
    (line,) = _refused(tmp_path, bad_template)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 Deployment/web: spec.template.metadata.labels: key 'ключ'"), line
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {ключ: v}\n"  # a kind karpy does not model
    (line,) = _refused(tmp_path, configmap)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 ConfigMap/c: metadata.labels: key 'ключ'"), line
    nodepool = _nodepool().replace("  name: default\nspec:", "  name: default\n  labels: {ключ: v}\nspec:", 1)
    (line,) = _refused(tmp_path, nodepool)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 NodePool/default: metadata.labels: key 'ключ'"), line


def test_annotation_keys_are_qualified_names_in_any_case_and_values_free(tmp_path: Path) -> None:
    (line,) = _refused(tmp_path, _pod(meta='  annotations: {"bad key!": x}\n'))
    assert line == f"{tmp_path / 'in.yaml'} doc 1 Pod/p: metadata.annotations: key 'bad key!': name part {QUALIFIED}"
    # ValidateAnnotations lower-cases the key first; values are free text of any length
    ok = _write(tmp_path, "ok.yaml", _pod(meta='  annotations: {"Example.COM/Note": "' + "any text, ünïcode! " * 20 + '"}\n'))
    assert invoke_cli("validate", ok).exit_code == 0
    huge = _pod(meta=f'  annotations: {{big: "{"x" * (256 * 1024)}"}}\n')
    (line,) = _refused(tmp_path, huge)
    assert line == f"{tmp_path / 'in.yaml'} doc 1 Pod/p: metadata.annotations: may not be more than 262144 bytes in all (got 262147)"


def test_container_names_are_unique_labels(tmp_path: Path) -> None:
    where = f"{tmp_path / 'in.yaml'} doc 1 Pod/p: spec"
    (line,) = _refused(tmp_path, _pod(containers="  - name: a\n    image: nginx\n"))
    assert line == f"{where}: containers[1].name: Duplicate value: 'a'"
    # an init container is checked against every container (kube-apiserver's validateInitContainers)
    (line,) = _refused(tmp_path, _pod(spec="  initContainers: [{name: a, image: busybox}]\n"))
    assert line == f"{where}: initContainers[0].name: Duplicate value: 'a'"
    (line,) = _refused(tmp_path, _pod(containers="  - name: My_C\n    image: nginx\n"))
    assert line.startswith(f"{where}.containers[1].name: must be a lowercase RFC 1123 label"), line


@pytest.mark.parametrize(("text", "field", "problem"), [
    (_pod(spec="  priority: 2147483648\n"), "spec.priority",
     "2147483648 does not fit in an int32 (the field's OpenAPI format: -2147483648 .. 2147483647)"),
    (_pod(spec="  terminationGracePeriodSeconds: 9223372036854775808\n"), "spec.terminationGracePeriodSeconds",
     "9223372036854775808 does not fit in an int64 (the field's OpenAPI format: -9223372036854775808 .. 9223372036854775807)"),
    # beyond uint64, go-yaml v2 reads a float (ParseInt and ParseUint fail): kubectl sends 1e20; the
    # message shows the digits given (yaml47)
    (_pod(meta="  generation: 99999999999999999999\n"), "metadata.generation",
     "must be an integer; got the number 99999999999999999999 (past 64 bits: kubectl's YAML reader makes it the float 1e+20)"),
    (_deployment().replace("replicas: 2", "replicas: 2147483648"), "spec.replicas",
     "must be <= 2147483647; got the number 2147483648"),
    ("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\nspec: {minAvailable: 2147483648}\n",
     "spec.minAvailable", "2147483648 does not fit in an int32 (an int-or-string's integer: at most 2147483647)"),
])
def test_integers_beyond_their_openapi_format_are_refused(tmp_path: Path, text: str, field: str, problem: str) -> None:
    (line,) = _refused(tmp_path, text)
    assert line.endswith(f": {field}: {problem}"), line
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 "), line


def test_int32_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    # Priority admission refuses a priority other than its PriorityClass's value (0 without one): the class says it
    lowest = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: lowest}\nvalue: -2147483648\n---\n"
    path = _write(tmp_path, "ok.yaml", lowest + _pod(spec="  priorityClassName: lowest\n  priority: -2147483648\n"
                                                          "  terminationGracePeriodSeconds: 9223372036854775807\n"))
    result = invoke_cli("validate", path)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("value", ["2026-01-01", "12345", "2026-01-01 10:00:00Z", "2026-01-01T10:00:00", "true", "[]"])
def test_creation_timestamp_must_be_an_rfc3339_string(tmp_path: Path, value: str) -> None:
    (line,) = _refused(tmp_path, _pod(meta=f"  creationTimestamp: {value}\n"))
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 Pod/p: metadata.creationTimestamp: must be an RFC 3339 timestamp "
                           "string such as '2026-01-01T00:00:00Z'; got "), line


@pytest.mark.parametrize("value", ["null", "2026-01-01T10:00:00Z", "2026-01-01T10:00:00.123456789+05:30"])
def test_creation_timestamp_rfc3339_or_null_is_accepted(tmp_path: Path, value: str) -> None:
    result = invoke_cli("validate", _write(tmp_path, "ok.yaml", _pod(meta=f"  creationTimestamp: {value}\n")))
    assert result.exit_code == 0, result.output


def test_a_negative_nodepool_limit_is_accepted_as_the_crd_does_and_named(tmp_path: Path) -> None:
    """Karpenter v1.15.0's NodePool CRD: ``limits`` values are int-or-string with a pattern that
    allows a sign, so ``cpu: -1`` is stored; no node fits under it (``Limits.ExceededBy``), so the
    NodePool launches nothing. karpy stores it too, and says so."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool("  limits: {cpu: -1}\n"))
    app = _write(tmp_path, "app.yaml", _deployment())
    warning = (f"warning: {nodepool} doc 1 NodePool/default: spec.limits.cpu: -1 is negative: no node fits under it, so this "
               "NodePool launches nothing (Karpenter's CRD accepts it)")
    validated = invoke_cli("validate", nodepool)
    assert validated.exit_code == 0 and warning in validated.stdout.splitlines(), validated.output
    simulated = invoke_cli("simulate", nodepool, app)
    assert simulated.exit_code == 0, simulated.output
    assert "pods: 0 bound, 2 pending" in simulated.stdout
    assert "NodePool default: limits.cpu=-1 is negative: no node fits under it" in simulated.stdout


def test_validate_max_pods_names_the_file_and_validate(tmp_path: Path) -> None:
    app = _write(tmp_path, "app.yaml", _deployment())
    result = invoke_cli("validate", "--max-pods", "1", app)
    assert result.exit_code == 2
    assert _problems(result) == [f"{app} doc 1 Deployment/web: spec.replicas: 2 pods; the simulation would hold 2 pods, "
                                 "more than its cap of 1 (karpy validate --max-pods)"]


SCENARIO = """\
apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {{name: s}}
steps:
  - at: 0s
    apply: [app.yaml]
  - at: 1m
    apply: {target}
"""


@pytest.mark.parametrize(("target", "problem"), [
    ("self.yaml", "self.yaml is this Scenario file itself; a step applies manifests (name the files or directories holding them)"),
    ("[./self.yaml]", "./self.yaml is this Scenario file itself; a step applies manifests (name the files or directories "
                      "holding them)"),
    ("other.yaml", "other.yaml is a Scenario file; a step applies manifests, not another Scenario (run it on its own)"),
])
def test_a_scenario_step_applying_a_scenario_is_refused(tmp_path: Path, target: str, problem: str) -> None:
    _write(tmp_path, "app.yaml", _deployment())
    _write(tmp_path, "other.yaml", SCENARIO.format(target="app.yaml"))
    scenario = _write(tmp_path, "self.yaml", SCENARIO.format(target=target))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, scenario)
        assert result.exit_code == 2, result.output
        assert _problems(result) == [f"{scenario}: steps[1].apply: {problem}"]


def test_ec2nodeclass_kubelet_int32_fields_are_bounded(tmp_path: Path) -> None:
    """karpenter-provider-aws' KubeletConfiguration: maxPods, podsPerCore and
    evictionMaxPodGracePeriod are ``*int32``."""
    text = _nodepool().replace("  role: KarpenterNodeRole-demo\n", "  role: KarpenterNodeRole-demo\n  kubelet: {maxPods: 2147483648}\n")
    (line,) = _refused(tmp_path, text)
    assert line == (f"{tmp_path / 'in.yaml'} doc 2 EC2NodeClass/default: spec.kubelet.maxPods: 2147483648 does not fit in an "
                    "int32 (the field's OpenAPI format: -2147483648 .. 2147483647)")


def test_a_pod_template_without_containers_is_refused(tmp_path: Path) -> None:
    """Found by hack/fuzz_cli.py: a Deployment whose only container was dropped was valid
    (kube-apiserver: ``spec.template.spec.containers: Required value``)."""
    text = _deployment().replace("      containers:\n      - name: c\n        image: nginx\n", "      containers: []\n")
    text = text.replace("        resources: {requests: {cpu: \"500m\", memory: \"256Mi\"}}\n", "")
    (line,) = _refused(tmp_path, text)
    assert line == f"{tmp_path / 'in.yaml'} doc 1 Deployment/web: spec.template.spec.containers: must have at least 1 item(s)"


# --- v35b: what kube-apiserver v1.36.3 refuses (each answer checked by a dryRun=All POST) --------------


def _resources(requests: str, limits: str = "") -> str:
    text = f"    resources:\n      requests: {requests}\n"
    return _pod(containers=text + (f"      limits: {limits}\n" if limits else ""))


@pytest.mark.parametrize(("text", "field", "problem"), [
    # apiserver: requests[nvidia.com/gpu]: Invalid value: "500m": must be an integer, and (one answer, trial 3)
    # spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources
    (_resources('{nvidia.com/gpu: "0.5"}'), "spec.containers[0].resources",
     "requests[nvidia.com/gpu]: '0.5' must be an integer; limits.nvidia.com/gpu: Limit must be set for non overcommitable "
     "resources (requests.nvidia.com/gpu is set)"),
    # apiserver: requests: Invalid value: "1": must be equal to example.com/foo limit of 2
    (_resources("{example.com/foo: 1}", "{example.com/foo: 2}"), "spec.containers[0].resources",
     "requests.example.com/foo '1' must be equal to example.com/foo limit of '2'"),
    # apiserver: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources
    (_resources("{nvidia.com/gpu: 1}"), "spec.containers[0].resources",
     "limits.nvidia.com/gpu: Limit must be set for non overcommitable resources (requests.nvidia.com/gpu is set)"),
    # apiserver: requests[bad name]: name part must consist of alphanumeric characters, ...
    (_resources('{"bad name": 1}'), "spec.containers[0].resources", f"requests[bad name]: name part {QUALIFIED}"),
    # apiserver: requests[foo]: Invalid value: "foo": must be a standard resource type or fully qualified
    (_resources("{foo: 1}"), "spec.containers[0].resources", "requests[foo]: must be a standard resource type or fully qualified"),
    # apiserver: spec.nodeSelector: Invalid value: "bad key": name part must consist of ...
    (_pod(spec='  nodeSelector: {"bad key": x}\n'), "spec.nodeSelector", f"key 'bad key': name part {QUALIFIED}"),
    # apiserver: spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if
    # whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway
    (_pod(spec="  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, "
               "minDomains: 2, labelSelector: {matchLabels: {a: b}}}\n"),
     "spec.topologySpreadConstraints[0]",
     "minDomains: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
    # apiserver: ...nodeSelectorTerms: Required value: must have at least one node selector term
    (_pod(spec="  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}\n"),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
     "must have at least 1 item(s)"),
    # apiserver: spec.minAvailable: Invalid value: "150%": must not be greater than 100%
    ("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\nspec: {minAvailable: '150%'}\n",
     "spec.minAvailable", "'150%' must not be greater than 100%"),
    # apiserver: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"
    (_pod(spec="  restartPolicy: Sometimes\n"), "spec.restartPolicy",
     "must be one of 'Always', 'OnFailure' or 'Never'; got 'Sometimes'"),
    # apiserver: spec.template.metadata.labels: Invalid value: {"app":"other"}: `selector` does not match template `labels`
    (_deployment().replace("metadata: {labels: {app: web}}", "metadata: {labels: {app: other}}"), "spec.template.metadata.labels",
     'Invalid value: {"app":"other"}: `selector` does not match template `labels`'),
    # apiserver (no template metadata, trial 12): spec.template.metadata.labels: Invalid value: null: ...
    (_deployment().replace("    metadata: {labels: {app: web}}\n", ""), "spec.template.metadata.labels",
     "Invalid value: null: `selector` does not match template `labels`"),
])
def test_what_kube_apiserver_refuses_is_refused(tmp_path: Path, text: str, field: str, problem: str) -> None:
    (line,) = _refused(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 "), line
    assert line.endswith(f": {field}: {problem}"), line


@pytest.mark.parametrize("text", [
    _resources("{nvidia.com/gpu: 2}", "{nvidia.com/gpu: 2}"),
    _resources('{cpu: "0.5", hugepages-2Mi: 2Mi}', '{cpu: "1", hugepages-2Mi: 2Mi}'),
    _deployment().replace("metadata: {labels: {app: web}}", "metadata: {labels: {app: web, tier: x}}"),
    _pod(spec="  restartPolicy: OnFailure\n  nodeSelector: {kubernetes.io/os: linux}\n"),
    "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\nspec: {minAvailable: '100%'}\n",
])
def test_what_kube_apiserver_accepts_is_accepted(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "ok.yaml", text)
    for command in ("validate", "simulate"):
        result = invoke_cli(command, path)
        assert result.exit_code == 0, (command, result.output)


def test_deployment_replicas_null_is_defaulted_to_one_as_the_api_server_does(tmp_path: Path) -> None:
    """kube-apiserver accepts ``replicas: null`` and stores ``replicas: 1`` (checked by a dryRun POST)."""
    path = _write(tmp_path, "app.yaml", _deployment().replace("replicas: 2", "replicas: null"))
    assert invoke_cli("validate", path).exit_code == 0
    simulated = invoke_cli("simulate", path)
    assert simulated.exit_code == 0, simulated.output
    assert "pods: 0 bound, 1 pending" in simulated.stdout, simulated.stdout


def test_text_for_an_option_karpy_sets_itself_is_refused(tmp_path: Path) -> None:
    """``--provider-option kube=foo`` was listed as valid and then silently replaced by the
    simulator's own cluster; the unknown-option list no longer offers it."""
    path = _write(tmp_path, "pool.yaml", _nodepool())
    result = invoke_cli("simulate", "--provider-option", "kube=foo", path)
    assert result.exit_code == 2, result.output
    assert "option(s) kube take an object the program passes (karpy sets them itself), not text" in result.output
    result = invoke_cli("simulate", "--provider-option", "bogus=1", path)
    assert result.exit_code == 2 and "unknown option(s) bogus; valid: " in result.output
    valid = result.output.split("valid: ", 1)[1].split()
    assert "kube" not in valid and "clock," not in valid and "region," in valid


def test_a_catalog_price_beyond_any_instance_is_refused(tmp_path: Path) -> None:
    """A catalog price of 1e308 made every total inf and the optimum line say "-0.0% more"."""
    catalog = tmp_path / "cat.json"
    catalog.write_text('[{"name": "t", "offerings": [{"Price": 1e308, "Available": true, "Requirements": ['
                       '{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},'
                       '{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z"]}]}],'
                       '"architecture": "amd64", "operatingSystems": ["linux"], "resources": {"cpu": "2", "memory": "4Gi", "pods": "110"}}]')
    result = invoke_cli("simulate", "--instance-types", str(catalog), _write(tmp_path, "pool.yaml", _nodepool()))
    assert result.exit_code == 2, result.output
    assert "offerings[0].Price: expected a number of USD/hour from 0 to 1,000,000, got 1e+308" in result.output


def test_a_symlink_loop_or_a_dangling_link_is_named_as_such(tmp_path: Path) -> None:
    """A symlink loop was reported as "no such file or directory"."""
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    (tmp_path / "gone").symlink_to(tmp_path / "missing.yaml")
    result = invoke_cli("validate", str(tmp_path / "one"), str(tmp_path / "gone"))
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'one'}: a symbolic link that cannot be followed (too many levels of symbolic links" in result.output
    assert f"{tmp_path / 'gone'}: a symbolic link that cannot be followed (no such file or directory; it points to" in result.output


def test_a_scenarios_manifest_warnings_are_shown_once(tmp_path: Path) -> None:
    """A negative limit (or a placeholder left) in a file a Scenario applies was warned about by
    ``validate FILE`` but not through the Scenario; now once, naming the step, in both commands."""
    pool = _nodepool().replace("spec:\n", "spec:\n  limits:\n    cpu: \"-1\"\n", 1)
    _write(tmp_path, "pool.yaml", pool)
    scenario = _write(tmp_path, "sc.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: neg}\n"
                      "steps:\n- {at: 0s, apply: pool.yaml}\n- {at: 10m, apply: pool.yaml}\n")
    result = invoke_cli("validate", scenario)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("valid (1 warning below): Scenario neg: 2 steps (2 apply) from 0s to 10m\n")
    assert result.output.count("spec.limits.cpu: -1 is negative") == 1 and "steps[0].apply: " in result.output
    result = invoke_cli("simulate", scenario, "--until", "20m")
    assert result.exit_code == 0, result.output
    assert result.output.count("spec.limits.cpu: -1 is negative") == 1


# --- trial 2 (issue 35): input validation and CLI messages ---------------------------------------------


def _pool_requirement(key: str, operator: str, values: str) -> str:
    return _nodepool().replace("requirements: []", f"requirements: [{{key: {key}, operator: {operator}, values: {values}}}]")


JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
  template:
    spec:
{policy}      containers: [{{name: a, image: pause, resources: {{requests: {{cpu: "1"}}}}}}]
"""


@pytest.mark.parametrize(("text", "field", "problem"), [
    # kubectl: no matches for kind "Job" in version "apps/v1" (resource mapping not found)
    ("apiVersion: apps/v1\nkind: Job\nmetadata: {name: j}\nspec: {}\n", "apiVersion",
     'no matches for kind "Job" in version "apps/v1"; Job is served as batch/v1'),
    # kubectl: no matches for kind "Deployment" in version "extensions/v1beta1"
    ("apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n", "apiVersion",
     'no matches for kind "Deployment" in version "extensions/v1beta1" (Kubernetes 1.22 removed extensions/v1beta1); '
     "Deployment is served as apps/v1"),
    # a kind no built-in version serves: the kind is what to change, not the apiVersion
    ("apiVersion: apps/v1\nkind: !foo 12\nmetadata: {name: x}\n", "kind",
     'no matches for kind "12" in version "apps/v1"'),
    # apiserver: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"
    (JOB.format(policy=""), "spec", 'template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    (JOB.format(policy="      restartPolicy: Always\n"), "spec",
     'template.spec.restartPolicy: Unsupported value: "Always": valid values: "OnFailure", "Never"'),
    # Karpenter's CRD: type conversion error from 'string' to 'int' evaluating rule: requirements operator
    # 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value
    (_pool_requirement("karpenter.k8s.aws/instance-generation", "Gt", '["99999999999999999999"]'),
     "spec.template.spec.requirements[0].values",
     "operator 'Gt' needs an integer of at most 9223372036854775807 (Karpenter's CEL rule reads it with int(), "
     "which fails beyond); got '99999999999999999999'"),
    (_pool_requirement("karpenter.k8s.aws/instance-generation", "Lt", '["9223372036854775808"]'),
     "spec.template.spec.requirements[0].values", "got '9223372036854775808'"),
    # karpenter-provider-aws's NodePool CRD: label domain "karpenter.k8s.aws" is restricted
    (_pool_requirement("karpenter.k8s.aws/foo", "In", "[x]"), "spec.template.spec.requirements[0].key",
     "label key 'karpenter.k8s.aws/foo' is restricted: Karpenter sets it itself or it belongs to a reserved domain"),
])
def test_trial2_what_kubectl_kube_apiserver_or_karpenter_refuses_is_refused(
        tmp_path: Path, text: str, field: str, problem: str) -> None:
    (line,) = _refused(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 "), line
    assert f": {field}: " in line and line.endswith(problem), line


@pytest.mark.parametrize("text", [
    JOB.format(policy="      restartPolicy: Never\n"),
    JOB.format(policy="      restartPolicy: OnFailure\n"),
    _pool_requirement("karpenter.k8s.aws/instance-generation", "Gt", '["9223372036854775807"]'),
    _pool_requirement("karpenter.k8s.aws/instance-family", "In", "[m5]"),
    _pool_requirement("karpenter.k8s.aws/instance-tenancy", "In", "[default]"),
    _pool_requirement("example.com/team", "In", "[a]"),
])
def test_trial2_what_they_accept_is_accepted(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "ok.yaml", text)
    result = invoke_cli("validate", path)
    assert result.exit_code == 0, result.output


def test_every_aws_label_karpy_knows_is_allowed_by_the_aws_domain_restriction() -> None:
    """The ``karpenter.k8s.aws`` keys a NodePool may use cover every AWS label the catalog resolves,
    registers for metrics or cannot derive (all of them Karpenter's well-known labels)."""
    from karpy_core.apis.labels import (
        LABEL_RESERVATION_ID,
        LABEL_RESERVATION_TYPE,
        PROVIDER_LABEL_DOMAINS,
        is_restricted_label,
    )
    from karpy_core.cloudprovider.catalog import aws

    known = aws.AWS_WELL_KNOWN_LABELS | aws.AWS_METRIC_ONLY_LABELS | aws.UNDERIVABLE_AWS_LABELS
    known |= {LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE}
    in_domain = {k for k in known if k.startswith("karpenter.k8s.aws/")}
    assert in_domain and in_domain <= PROVIDER_LABEL_DOMAINS["karpenter.k8s.aws"]
    assert not any(is_restricted_label(k) for k in in_domain)
    assert is_restricted_label("karpenter.k8s.aws/foo") and is_restricted_label("sub.karpenter.k8s.aws/foo")


def test_cpu_null_reads_as_zero_as_the_api_server_stores_it(tmp_path: Path) -> None:
    """kube-apiserver v1.36.3 stores ``requests: {cpu: null}`` as ``cpu: "0"`` (dryRun create)."""
    path = _write(tmp_path, "pod.yaml", _pod(containers="    resources: {requests: {cpu: null, memory: 1Gi}}\n"))
    assert invoke_cli("validate", path).exit_code == 0
    from karpy_core.apis.loader import load_documents

    (pod,) = load_documents([path]).pods
    assert pod.spec.containers[0].resources.requests == {"cpu": "0", "memory": "1Gi"}


@pytest.mark.parametrize("flag", ["--batch-idle-duration", "--batch-max-duration"])
def test_a_nanosecond_batch_duration_is_accepted_like_a_microsecond(tmp_path: Path, flag: str) -> None:
    """Karpenter reads these with ``flag.DurationVar`` (any Go duration); karpy keeps refusing 0
    and negatives, but 1ns no longer rounded down to 0s and refused while 1us passed."""
    path = _write(tmp_path, "pool.yaml", _nodepool())
    for value in ("1ns", "1us"):
        result = invoke_cli("simulate", flag, value, path)
        assert result.exit_code == 0, (value, result.output)
    result = invoke_cli("simulate", flag, "0s", path)
    assert result.exit_code == 2 and "must be longer than 0s, not '0s'" in result.output


def test_a_symlink_loop_inside_a_directory_is_named(tmp_path: Path) -> None:
    """``karpy validate DIR`` with a.yaml -> b.yaml -> a.yaml said "no *.yaml or *.yml files"."""
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "a.yaml").symlink_to("b.yaml")
    (loop / "b.yaml").symlink_to("a.yaml")
    result = invoke_cli("validate", str(loop))
    assert result.exit_code == 2, result.output
    assert "no *.yaml" not in result.output
    for name, target in (("a", "b"), ("b", "a")):
        assert (f"{loop / (name + '.yaml')}: a symbolic link that cannot be followed (too many levels of symbolic "
                f"links; it points to '{target}.yaml')") in result.output


def test_kubeconfig_naming_a_directory_says_so(tmp_path: Path) -> None:
    result = invoke_cli("simulate", "--from-cluster", "--kubeconfig", str(tmp_path))
    assert result.exit_code != 0
    assert f"--kubeconfig {tmp_path}: is a directory, not a kubeconfig file" in result.output
    assert "no such file" not in result.output


def test_feature_gate_errors_name_the_flag_and_the_env_var(tmp_path: Path) -> None:
    path = _write(tmp_path, "pool.yaml", _nodepool())
    result = invoke_cli("simulate", "--feature-gates", "Bogus=true", path)
    assert result.exit_code == 2
    assert "error: FEATURE_GATES (--feature-gates): unknown feature gate 'Bogus'" in result.output
    result = invoke_cli("simulate", "--feature-gates", "NodeRepair=maybe", path)
    assert "FEATURE_GATES (--feature-gates): 'NodeRepair=maybe': 'maybe' is not true or false" in result.output


def test_one_ignored_object_is_singular_and_an_unset_weight_is_not_weight_0(tmp_path: Path) -> None:
    service = "---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    pod = "---\n" + _pod(containers="    resources: {requests: {cpu: '1000'}}\n")
    path = _write(tmp_path, "all.yaml", _nodepool() + service + pod)
    result = invoke_cli("simulate", path)
    assert result.exit_code == 0, result.output
    assert "ignored (not simulated): 1 object (Service)" in result.output
    result = invoke_cli("simulate", "--explain", "p", path)
    assert "NodePool default (no weight): " in result.output and "(weight 0)" not in result.output
    weighted = _write(tmp_path, "weighted.yaml", _nodepool("  weight: 5\n") + pod)
    result = invoke_cli("simulate", "--explain", "p", weighted)
    assert "NodePool default (weight 5): " in result.output, result.output


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    import ipaddress

    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_an_untrusted_server_certificate_is_named_not_called_unreachable(tmp_path: Path) -> None:
    """A loopback TLS server with a self-signed certificate (the kubeconfig trusts no CA for it):
    karpy said "cannot reach the Kubernetes API server" though the server answered."""
    import http.server
    import ssl

    pytest.importorskip("cryptography")
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    url, result = _from_cluster_over_https(tmp_path, server)
    assert result.exit_code != 0
    assert (f"the Kubernetes API server at {url} answered, but its TLS certificate is not trusted "
            "(self-signed certificate); check the kubeconfig's certificate-authority(-data)") in result.output
    assert "cannot reach" not in result.output


def _from_cluster_over_https(tmp_path: Path, server: Any) -> tuple[str, Any]:
    """``simulate --from-cluster`` with a kubeconfig naming ``https://`` on the loopback ``server``
    (served in a thread, shut down after): its URL and the CLI result."""
    import threading

    from tests.test_cli_errors import loopback_kubeconfig

    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        result = invoke_cli("simulate", "--from-cluster", "--kubeconfig", loopback_kubeconfig(tmp_path, port, "https"))
    finally:
        server.shutdown()
        server.server_close()
    return f"https://127.0.0.1:{port}", result


def test_a_plain_http_server_behind_an_https_url_is_named(tmp_path: Path) -> None:
    """The same loopback server without TLS: the handshake fails with "wrong version number"."""
    import http.server

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    url, result = _from_cluster_over_https(tmp_path, server)
    assert result.exit_code != 0
    assert f"the Kubernetes API server at {url} answered, but the TLS handshake failed: " in result.output
    assert "(the server seems to speak plain HTTP, not HTTPS)" in result.output


# --- trial 3 (issue 35): what kube-apiserver v1.36.3 refuses, each answer checked by a dryRun=All POST --------


def _workload(kind: str, *, pod: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
              spec: dict[str, Any] | None = None) -> str:
    """A ``kind`` (Pod or a workload) whose pod spec has ``pod`` and first container ``container`` added."""
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}},
                                                **(container or {})}], **(pod or {})}
    if kind == "Pod":
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"}, "spec": pod_spec})
    if kind == "Job":
        pod_spec["restartPolicy"] = "Never"
        body: dict[str, Any] = {"template": {"spec": pod_spec}}
    else:
        body = {"selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}}, "spec": pod_spec}}
    api = "batch/v1" if kind == "Job" else "apps/v1"
    return yaml.safe_dump({"apiVersion": api, "kind": kind, "metadata": {"name": "w"}, "spec": {**body, **(spec or {})}})


KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("where", "field", "value", "problem"), [
    # apiserver: spec.securityContext.runAsUser: Invalid value: -5: must be between 0 and 2147483647, inclusive
    ("pod", "runAsUser", -5, "must be between 0 and 2147483647, inclusive; got -5"),
    ("pod", "runAsGroup", -1, "must be between 0 and 2147483647, inclusive; got -1"),
    ("pod", "fsGroup", 2**31, "must be between 0 and 2147483647, inclusive; got 2147483648"),
    ("container", "runAsUser", -5, "must be between 0 and 2147483647, inclusive; got -5"),
    ("container", "runAsGroup", 2**31, "must be between 0 and 2147483647, inclusive; got 2147483648"),
    # apiserver (decoder): cannot unmarshal string into Go struct field ...runAsUser of type int64
    ("pod", "runAsUser", "1000", "must be an integer; got '1000'"),
    ("pod", "fsGroup", "2000", "must be an integer; got '2000'"),
    ("container", "runAsUser", "1000", "must be an integer; got '1000'"),
    ("container", "runAsGroup", "3000", "must be an integer; got '3000'"),
])
def test_security_context_ids_are_checked_in_every_workload_kind(tmp_path: Path, kind: str, where: str, field: str,
                                                                  value: Any, problem: str) -> None:
    text = _workload(kind, **{where: {"securityContext": {field: value}}})
    (line,) = _refused(tmp_path, text)
    base = "spec" if kind == "Pod" else "spec.template.spec"
    path = f"{base}.securityContext.{field}" if where == "pod" else f"{base}.containers[0].securityContext.{field}"
    assert line == f"{tmp_path / 'in.yaml'} doc 1 {kind}/w: {path}: {problem}", line


def test_supplemental_groups_are_group_ids(tmp_path: Path) -> None:
    (line,) = _refused(tmp_path, _workload("Deployment", pod={"securityContext": {"supplementalGroups": [1, -1]}}))
    assert line.endswith("spec.template.spec.securityContext.supplementalGroups[1]: "
                         "must be between 0 and 2147483647, inclusive; got -1"), line


@pytest.mark.parametrize(("strategy", "field", "problem"), [
    # apiserver: spec.strategy.type: Unsupported value: "Sideways": supported values: "Recreate", "RollingUpdate"
    ({"type": "Sideways"}, "spec.strategy.type", 'Unsupported value: "Sideways": supported values: "Recreate", "RollingUpdate"'),
    # apiserver: spec.strategy.rollingUpdate.maxSurge: Invalid value: "200": a valid percent string must be ...
    ({"rollingUpdate": {"maxSurge": "200"}}, "spec.strategy.rollingUpdate.maxSurge",
     "'200': a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
     "regex used for validation is '[0-9]+%')"),
    ({"rollingUpdate": {"maxUnavailable": "1"}}, "spec.strategy.rollingUpdate.maxUnavailable",
     "'1': a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
     "regex used for validation is '[0-9]+%')"),
    # apiserver: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%
    ({"rollingUpdate": {"maxUnavailable": "150%"}}, "spec.strategy.rollingUpdate.maxUnavailable",
     "'150%' must not be greater than 100%"),
    ({"rollingUpdate": {"maxSurge": -1}}, "spec.strategy.rollingUpdate.maxSurge", "must not be negative; got -1"),
    # apiserver: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0
    ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}, "spec.strategy",
     "rollingUpdate.maxUnavailable: 0: may not be 0 when `maxSurge` is 0"),
    ({"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}}, "spec.strategy",
     "rollingUpdate.maxUnavailable: 0: may not be 0 when `maxSurge` is 0"),
    # apiserver: spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'
    ({"type": "Recreate", "rollingUpdate": {}}, "spec.strategy",
     "rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"),
])
def test_a_deployment_strategy_is_checked_as_the_api_server_does(tmp_path: Path, strategy: dict[str, Any], field: str,
                                                                 problem: str) -> None:
    (line,) = _refused(tmp_path, _workload("Deployment", spec={"strategy": strategy}))
    assert line == f"{tmp_path / 'in.yaml'} doc 1 Deployment/w: {field}: {problem}", line


@pytest.mark.parametrize("strategy", [
    {"type": "Recreate"}, {"type": "RollingUpdate"}, {"rollingUpdate": {"maxSurge": 200}},
    {"rollingUpdate": {"maxSurge": "200%", "maxUnavailable": "100%"}}, {"rollingUpdate": {"maxSurge": 0}},
    {"rollingUpdate": {"maxUnavailable": 0}}, {"type": "Recreate", "rollingUpdate": None},
])
def test_deployment_strategies_the_api_server_accepts_are_accepted(tmp_path: Path, strategy: dict[str, Any]) -> None:
    text = _workload("Deployment", spec={"strategy": strategy}, pod={"securityContext": {"runAsUser": 0, "fsGroup": 2**31 - 1}},
                     container={"securityContext": {"runAsGroup": 2**31 - 1, "runAsNonRoot": True}})
    path = _write(tmp_path, "ok.yaml", text)
    for command in ("validate", "simulate"):
        result = invoke_cli(command, path)
        assert result.exit_code == 0, (command, result.output)


PRIORITY_CLASS = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: nope}\nvalue: 1000\n"


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_priority_class_is_an_error_naming_the_field(tmp_path: Path, kind: str) -> None:
    """kube-apiserver's Priority admission: ``pods "w" is forbidden: no PriorityClass with name nope was found``;
    a workload's pods are never created."""
    (line,) = _refused(tmp_path, _workload(kind, pod={"priorityClassName": "nope"}))
    base = "spec" if kind == "Pod" else "spec.template.spec"
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 1 {kind}/w: {base}.priorityClassName: no PriorityClass with name "
                           "nope was found (kube-apiserver's Priority admission refuses "), line


def test_a_priority_class_among_the_inputs_or_a_system_one_is_accepted(tmp_path: Path) -> None:
    for name, text in (("defined", PRIORITY_CLASS + "---\n" + _workload("Deployment", pod={"priorityClassName": "nope"})),
                       ("system", _workload("Deployment", pod={"priorityClassName": "system-node-critical"}))):
        path = _write(tmp_path, f"{name}.yaml", text)
        for command in ("validate", "simulate"):
            result = invoke_cli(command, path)
            assert result.exit_code == 0, (name, command, result.output)
            assert "PriorityClass" not in result.output or command == "validate", result.output


def test_a_priority_other_than_the_class_value_is_an_error(tmp_path: Path) -> None:
    """apiserver: the integer value of priority (5) must not be provided in pod spec; priority admission
    controller computed 1000 from the given PriorityClass name."""
    text = PRIORITY_CLASS + "---\n" + _workload("Pod", pod={"priorityClassName": "nope", "priority": 5})
    (line,) = _refused(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'in.yaml'} doc 2 Pod/w: spec.priority: the integer value of priority (5) must not "
                           "be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass "
                           "name"), line


@pytest.mark.parametrize(("resources", "problems"), [
    # apiserver: limits[cpu]: Invalid value: "-1": must be greater than or equal to 0, and
    # requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi (both in one answer)
    ({"limits": {"cpu": "-1", "memory": "1Gi"}, "requests": {"memory": "2Gi"}},
     ["limits.cpu: must not be negative; got '-1'", "requests.memory '2Gi' must be less than or equal to memory limit of '1Gi'"]),
    ({"limits": {"memory": "1Gi", "nvidia.com/gpu": 1}, "requests": {"memory": "2Gi", "nvidia.com/gpu": "0.5"}},
     ["requests[nvidia.com/gpu]: '0.5' must be an integer", "requests.nvidia.com/gpu '0.5' must be equal to nvidia.com/gpu limit of '1'",
      "requests.memory '2Gi' must be less than or equal to memory limit of '1Gi'"]),
])
def test_field_and_cross_field_resource_problems_are_reported_together(tmp_path: Path, resources: dict[str, Any],
                                                                        problems: list[str]) -> None:
    (line,) = _refused(tmp_path, _workload("Pod", container={"resources": resources}))
    assert line == f"{tmp_path / 'in.yaml'} doc 1 Pod/w: spec.containers[0].resources: {'; '.join(problems)}", line


def test_a_quantity_the_decoder_refuses_stays_the_only_resource_problem(tmp_path: Path) -> None:
    """apiserver (400, before validation): quantities must match the regular expression ..."""
    (line,) = _refused(tmp_path, _workload("Pod", container={"resources": {"limits": {"cpu": "1x", "memory": "1Gi"},
                                                                           "requests": {"memory": "2Gi"}}}))
    assert "spec.containers[0].resources.limits.cpu: " in line and "must be less than" not in line, line


@pytest.mark.parametrize(("kind", "strategy", "field", "problem"), [
    # apiserver: spec.updateStrategy: Unsupported value: {"Type":"Sideways",...}: supported values: "RollingUpdate", "OnDelete"
    ("DaemonSet", {"type": "Sideways"}, "spec.updateStrategy.type",
     'Unsupported value: "Sideways": supported values: "RollingUpdate", "OnDelete"'),
    # apiserver: spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0
    ("DaemonSet", {"rollingUpdate": {"maxUnavailable": 0}}, "spec.updateStrategy",
     "rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"),
    # apiserver: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero
    ("DaemonSet", {"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}, "spec.updateStrategy",
     "rollingUpdate.maxSurge: 1: may not be set when maxUnavailable is non-zero"),
    # apiserver: spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "200%": must not be greater than 100%
    ("DaemonSet", {"rollingUpdate": {"maxSurge": "200%"}}, "spec.updateStrategy.rollingUpdate.maxSurge",
     "'200%' must not be greater than 100%"),
    # apiserver: spec.updateStrategy: Invalid value: {"Type":"Sideways",...}: must be 'RollingUpdate' or 'OnDelete'
    ("StatefulSet", {"type": "Sideways"}, "spec.updateStrategy.type", "'Sideways': must be 'RollingUpdate' or 'OnDelete'"),
    # apiserver: spec.updateStrategy.rollingUpdate: Invalid value: {...}: only allowed for updateStrategy 'RollingUpdate'
    ("StatefulSet", {"type": "OnDelete", "rollingUpdate": {}}, "spec.updateStrategy",
     "rollingUpdate: only allowed for updateStrategy 'RollingUpdate'"),
    # apiserver: spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0
    ("StatefulSet", {"rollingUpdate": {"partition": -1}}, "spec.updateStrategy.rollingUpdate.partition",
     "must be >= 0; got the number -1"),
])
def test_daemonset_and_statefulset_update_strategies_are_checked(tmp_path: Path, kind: str, strategy: dict[str, Any],
                                                                 field: str, problem: str) -> None:
    (line,) = _refused(tmp_path, _workload(kind, spec={"updateStrategy": strategy}))
    assert line == f"{tmp_path / 'in.yaml'} doc 1 {kind}/w: {field}: {problem}", line


@pytest.mark.parametrize(("kind", "strategy"), [
    ("DaemonSet", {"type": "OnDelete"}), ("DaemonSet", {"type": "OnDelete", "rollingUpdate": {}}),
    ("DaemonSet", {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}), ("DaemonSet", {"rollingUpdate": {"maxUnavailable": "10%"}}),
    ("StatefulSet", {"type": "OnDelete"}), ("StatefulSet", {"rollingUpdate": {"partition": 0, "maxUnavailable": "5"}}),
])
def test_update_strategies_the_api_server_accepts_are_accepted(tmp_path: Path, kind: str, strategy: dict[str, Any]) -> None:
    path = _write(tmp_path, "ok.yaml", _workload(kind, spec={"updateStrategy": strategy}))
    result = invoke_cli("validate", path)
    assert result.exit_code == 0, result.output
