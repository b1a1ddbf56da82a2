"""The Helm chart (charts/karpy): `helm lint`, and `helm template` output checked object by object.

Helm is built from the Go module proxy by hack/helm.sh on first use (about a minute and a half on
two cores; cached under ~/.cache/karpy afterwards). Without Go and without a cached binary these
tests skip loudly, unless KARPY_REQUIRE_DEVCLUSTER=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.kube.permissions import (
    READ_VERBS,
    SCOPE_CLUSTER,
    SCOPE_KUBE_SYSTEM,
    SCOPE_RELEASE,
    Rule,
    read_rules_for,
    rules_for,
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "karpy"
HELM_SH = REPO / "hack" / "helm.sh"
RELEASE = "karpy"
NAMESPACE = "karpy-system"
NODEPOOL_KEY = "karpenter.sh/nodepool"
EXCLUDE_MANAGED = {"key": NODEPOOL_KEY, "operator": "DoesNotExist"}
CRD_FILES = (
    "karpenter.sh_nodepools.yaml",
    "karpenter.sh_nodeclaims.yaml",
    "karpenter.sh_nodeoverlays.yaml",
    "karpenter.k8s.aws_ec2nodeclasses.yaml",
    "karpenter.kakaocloud.com_kcnodeclasses.yaml",
    "karpenter.kwok.sh_kwoknodeclasses.yaml",
)

AWS_VALUES: dict[str, Any] = {
    "cloud": "aws",
    "clusterName": "dev-cluster",
    "clusterEndpoint": "https://ABCDEF.gr7.ap-northeast-2.eks.amazonaws.com",
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/KarpyController"}},
    "aws": {"region": "ap-northeast-2", "interruptionQueue": "dev-cluster"},
}
AWS_ONLY_ENV = {
    "CLUSTER_ENDPOINT", "CLUSTER_CA_BUNDLE", "INTERRUPTION_QUEUE", "VM_MEMORY_OVERHEAD_PERCENT", "RESERVED_ENIS", "ISOLATED_VPC",
    "EKS_CONTROL_PLANE", "ENABLE_ZONAL_SHIFT", "DISABLE_DRY_RUN", "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL",
    "AWS_FEATURE_GATES", "AWS_REGION",
}
"""Variables the chart passes to the aws provider only (karpy_core.settings refuses the
provider-specific ones with any other provider)."""
KAKAOCLOUD_VALUES: dict[str, Any] = {
    "cloud": "kakaocloud",
    "clusterName": "kc-cluster",
    "kakaocloud": {"projectID": "0123456789abcdef0123456789abcdef"},
    "credentials": {"secretName": "kakaocloud-credentials"},
    "sigKey": {"secretName": "karpenter-sigkey"},
}


def _unavailable(reason: str) -> None:
    if os.environ.get("KARPY_REQUIRE_DEVCLUSTER") == "1":
        pytest.fail(f"KARPY_REQUIRE_DEVCLUSTER=1 but helm is unavailable: {reason}", pytrace=False)
    pytest.skip(f"HELM UNAVAILABLE -- chart tests NOT RUN: {reason}")


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for helm: private config/cache/data dirs, no kubeconfig (nothing contacts a cluster)."""
    home = tmp_path_factory.mktemp("helm-home")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(
        HELM_CACHE_HOME=str(home / "cache"),
        HELM_CONFIG_HOME=str(home / "config"),
        HELM_DATA_HOME=str(home / "data"),
        KUBECONFIG=str(home / "no-kubeconfig"),
    )
    return env


@pytest.fixture(scope="session")
def helm(helm_env: dict[str, str]) -> str:
    """Path of the pinned helm binary, built by hack/helm.sh when not cached."""
    try:
        proc = subprocess.run([str(HELM_SH), "--path"], capture_output=True, text=True, timeout=580, env=helm_env)
    except subprocess.TimeoutExpired:
        _unavailable("hack/helm.sh took more than 580 s to build helm")
    if proc.returncode == 3:
        _unavailable(proc.stderr.strip() or "no Go toolchain")
    assert proc.returncode == 0, f"hack/helm.sh failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    path = proc.stdout.strip().splitlines()[-1]
    assert os.access(path, os.X_OK), path
    return path


def _run(helm: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def template_cmd(helm: str, helm_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `helm template` with values given as a dict (written to a file, passed with -f)."""
    tmp = tmp_path_factory.mktemp("values")
    counter = iter(range(1_000_000))

    def run(values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
        path = tmp / f"values-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(values))
        return _run(helm, helm_env, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path), *extra)

    return run


@pytest.fixture(scope="session")
def render(template_cmd: Callable[..., subprocess.CompletedProcess[str]]) -> Render:
    """Render the chart; returns the parsed objects (fails the test with helm's stderr on error)."""

    def run(values: dict[str, Any], *extra: str) -> list[dict[str, Any]]:
        proc = template_cmd(values, *extra)
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]

    return run


def _one(objects: list[dict[str, Any]], kind: str, namespace: str | None = None, name: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in objects
        if o["kind"] == kind
        and (name is not None or not _aggregated(o))  # the controller's own, not the -admin role
        and (namespace is None or o["metadata"].get("namespace") == namespace)
        and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} (namespace={namespace}, name={name}), got {[o['metadata'] for o in found]}"
    return found[0]


def _aggregated(obj: dict[str, Any]) -> bool:
    """The <fullname>-admin ClusterRole, aggregated into "admin" (bound to nobody by the chart)."""
    return (obj["metadata"].get("labels") or {}).get("rbac.authorization.k8s.io/aggregate-to-admin") == "true"


def _kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return sorted((o["kind"], o["metadata"].get("namespace")) for o in objects)


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def _required_terms(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = deployment["spec"]["template"]["spec"]["affinity"]
    return affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def _env(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The container's literal env values by name (valueFrom entries left out)."""
    return {e["name"]: e["value"] for e in _container(objects)["env"] if "value" in e}


def _rules(role: dict[str, Any]) -> list[dict[str, Any]]:
    return role.get("rules") or []


def _allows(role: dict[str, Any], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r.get("verbs", []) for r in _rules(role)
    )


# --- lint -------------------------------------------------------------------------------------


@pytest.mark.parametrize("values_file", ["aws-values.yaml", "kakaocloud-values.yaml"])
def test_helm_lint_strict(helm: str, helm_env: dict[str, str], values_file: str) -> None:
    proc = _run(helm, helm_env, "lint", "--strict", str(CHART), "-f", str(CHART / "ci" / values_file))
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"
    assert "0 chart(s) failed" in proc.stdout


def test_helm_lint_default_values(helm: str, helm_env: dict[str, str]) -> None:
    """`helm lint charts/karpy` with no values at all passes (clusterName is only reported as missing)."""
    proc = _run(helm, helm_env, "lint", str(CHART))
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"


# --- AWS --------------------------------------------------------------------------------------


def test_aws_objects(render: Render) -> None:
    objects = render(AWS_VALUES)
    assert _kinds(objects) == sorted(
        [
            ("ClusterRole", None),
            ("ClusterRole", None),
            ("ClusterRoleBinding", None),
            ("Deployment", NAMESPACE),
            ("PodDisruptionBudget", NAMESPACE),
            ("Role", NAMESPACE),
            ("RoleBinding", NAMESPACE),
            ("Service", NAMESPACE),
            ("ServiceAccount", NAMESPACE),
        ]
    )


def test_aws_service_account_has_irsa_annotation(render: Render) -> None:
    sa = _one(render(AWS_VALUES), "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/KarpyController"}
    deployment = _one(render(AWS_VALUES), "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


def test_aws_deployment(render: Render) -> None:
    objects = render(AWS_VALUES)
    deployment = _one(objects, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = _container(objects)

    assert spec["replicas"] == 2
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert container["image"] == "karpy-aws:0.1.0"
    assert container["command"] == ["karpy", "controller"]
    # Every setting travels as the environment variable Karpenter's chart sets; the only
    # argument is the provider plugin.
    assert container["args"] == ["--cloud-provider=aws"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SYSTEM_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["CLUSTER_NAME"]["value"] == "dev-cluster"
    assert env["CLUSTER_ENDPOINT"]["value"] == AWS_VALUES["clusterEndpoint"]
    assert env["AWS_REGION"]["value"] == "ap-northeast-2"
    assert env["INTERRUPTION_QUEUE"]["value"] == "dev-cluster"
    assert (env["BATCH_IDLE_DURATION"]["value"], env["BATCH_MAX_DURATION"]["value"]) == ("1s", "10s")
    assert (env["METRICS_PORT"]["value"], env["HEALTH_PROBE_PORT"]["value"]) == ("8080", "8081")
    assert env["FEATURE_GATES"]["value"] == (
        "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
    )
    assert "DISABLE_LEADER_ELECTION" not in env and "NODE_REPAIR" not in env
    assert not [name for name in env if name.startswith("KAKAOCLOUD_")]

    # Non-root, read-only root filesystem with a writable /tmp.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["tmp"]["mountPath"] == "/tmp"
    assert {v["name"]: v for v in pod["volumes"]}["tmp"] == {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}

    # Probes and ports.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080, "http": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]

    # Karpenter's defaults: spread across zones and one replica per node, both selecting
    # exactly this Deployment's pods ...
    own_pods = {"matchLabels": spec["selector"]["matchLabels"]}
    assert pod["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": own_pods}
    ]
    assert pod["affinity"]["podAntiAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname", "labelSelector": own_pods}]
    }
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()

    # ... and the default affinity keeps the controller off nodes karpy manages.
    assert _required_terms(deployment) == [{"matchExpressions": [EXCLUDE_MANAGED]}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_aws_pdb_service_and_no_servicemonitor(render: Render) -> None:
    objects = render(AWS_VALUES)
    selector = _one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    pdb = _one(objects, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    service = _one(objects, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"] == [{"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}]
    assert not [o for o in objects if o["kind"] == "ServiceMonitor"]


PROMETHEUS_OPERATOR = ("--api-versions", "monitoring.coreos.com/v1")
"""`helm template` arguments for a cluster that serves the ServiceMonitor API."""


def test_servicemonitor_when_enabled(render: Render) -> None:
    enabled = _merge(AWS_VALUES, {"serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prom"}, "endpointConfig": {"interval": "15s"}}})
    # as Karpenter's chart: none where the cluster lacks the monitoring.coreos.com API (the install would fail)
    assert not [o for o in render(enabled) if o["kind"] == "ServiceMonitor"]
    objects = render(enabled, *PROMETHEUS_OPERATOR)
    monitor = _one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [{"port": "http-metrics", "path": "/metrics", "interval": "15s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == _one(objects, "Service")["spec"]["selector"]


# --- affinity: the karpenter.sh/nodepool exclusion survives custom values (seeds 000 and 004) ---


def test_user_node_affinity_keeps_nodepool_exclusion(render: Render) -> None:
    user_term = {"matchExpressions": [{"key": "node-role.kubernetes.io/infra", "operator": "In", "values": ["true"]}]}
    fields_term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["infra-1"]}]}
    anti = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "x"}}}}
        ]
    }
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}}]
    values = _merge(
        AWS_VALUES,
        {
            "nodeSelector": {"alpha.eksctl.io/nodegroup-name": "autoscaler-ng"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [user_term, fields_term]},
                    "preferredDuringSchedulingIgnoredDuringExecution": preferred,
                },
                "podAntiAffinity": anti,
            },
        },
    )
    deployment = _one(render(values), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    terms = _required_terms(deployment)
    # nodeSelectorTerms are ORed: the exclusion must be ANDed into each of them, and the user's
    # own expressions stay.
    assert terms == [
        {"matchExpressions": [*user_term["matchExpressions"], EXCLUDE_MANAGED]},
        {"matchFields": fields_term["matchFields"], "matchExpressions": [EXCLUDE_MANAGED]},
    ]
    assert pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == preferred
    # Helm merges the user's podAntiAffinity into the default one (hostname, given this
    # Deployment's pod labels); the user's own term keeps its selector.
    own_pods = {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert pod["affinity"]["podAntiAffinity"] == {
        **anti,
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname", "labelSelector": own_pods}],
    }
    # seed 000: pin to the eksctl node group through nodeSelector; the default OS selector stays.
    assert pod["nodeSelector"] == {"alpha.eksctl.io/nodegroup-name": "autoscaler-ng", "kubernetes.io/os": "linux"}


def test_user_affinity_without_node_affinity_gets_exclusion(render: Render) -> None:
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}
    deployment = _one(render(_merge(AWS_VALUES, {"affinity": {"podAntiAffinity": anti}})), "Deployment")
    assert _required_terms(deployment) == [{"matchExpressions": [EXCLUDE_MANAGED]}]
    assert deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"] == anti


def test_explicit_exclusion_is_not_duplicated(render: Render) -> None:
    """The Karpenter chart's own default (seed 000) passed back in as user affinity renders unchanged."""
    karpenter_default = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [EXCLUDE_MANAGED]}]}}
    }
    deployment = _one(render(_merge(AWS_VALUES, {"affinity": karpenter_default})), "Deployment")
    assert _required_terms(deployment) == [{"matchExpressions": [EXCLUDE_MANAGED]}]


def test_affinity_selecting_managed_nodes_is_rejected(template_cmd: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    term = {"matchExpressions": [{"key": NODEPOOL_KEY, "operator": "Exists"}]}
    values = _merge(AWS_VALUES, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}})
    proc = template_cmd(values)
    assert proc.returncode != 0
    assert "nodeSelectorTerms[0] selects karpenter.sh/nodepool with operator Exists" in proc.stderr
    assert "keepOffManagedNodes=false" in proc.stderr


def test_exclusion_can_be_switched_off(render: Render) -> None:
    deployment = _one(render(_merge(AWS_VALUES, {"keepOffManagedNodes": False})), "Deployment")
    assert "nodeAffinity" not in deployment["spec"]["template"]["spec"]["affinity"]
    deployment = _one(render(_merge(AWS_VALUES, {"keepOffManagedNodes": False, "affinity": {"podAntiAffinity": None}})), "Deployment")
    assert "affinity" not in deployment["spec"]["template"]["spec"]


# --- RBAC -------------------------------------------------------------------------------------


def _rendered_rules(objects: list[dict[str, Any]]) -> set[Rule]:
    """Flatten the rendered ClusterRole and Roles into :class:`Rule` grants (scope from where they apply)."""
    out: set[Rule] = set()
    for role in objects:
        if role["kind"] == "ClusterRole" and _aggregated(role):
            continue
        if role["kind"] == "ClusterRole":
            scope = SCOPE_CLUSTER
        elif role["kind"] == "Role":
            scope = SCOPE_KUBE_SYSTEM if role["metadata"]["namespace"] == "kube-system" else SCOPE_RELEASE
            assert role["metadata"]["namespace"] in (NAMESPACE, "kube-system"), role["metadata"]
        else:
            continue
        for rule in _rules(role):
            assert not rule.get("nonResourceURLs"), rule
            names = tuple(sorted(rule.get("resourceNames") or ()))
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add(Rule(scope, group, resource, verb, names))
    return out


@pytest.mark.parametrize(("cloud", "values"), [("aws", AWS_VALUES), ("kakaocloud", KAKAOCLOUD_VALUES)], ids=["aws", "kakaocloud"])
def test_rbac_equals_the_permission_list(render: Render, cloud: str, values: dict[str, Any]) -> None:
    """The chart grants exactly karpy_core.kube.permissions.PERMISSIONS: nothing missing, nothing extra."""
    rendered = _rendered_rules(render(values))
    wanted = rules_for(cloud, values)
    missing = sorted(wanted - rendered)
    extra = sorted(rendered - wanted)
    assert not missing and not extra, (
        "chart RBAC and karpy_core/kube/permissions.py differ:\n"
        + "".join(f"  missing from the chart: {r}\n" for r in missing)
        + "".join(f"  granted but not in the list: {r}\n" for r in extra)
    )


@pytest.mark.parametrize(("cloud", "values"), [("aws", AWS_VALUES), ("kakaocloud", KAKAOCLOUD_VALUES)], ids=["aws", "kakaocloud"])
def test_dry_run_renders_only_read_verbs(render: Render, notes: Callable[[dict[str, Any]], str], cloud: str,
                                        values: dict[str, Any]) -> None:
    """``dryRun: true``: the controller runs with --dry-run, one replica, and every Role and
    ClusterRole bound to its ServiceAccount grants get, list and watch only: exactly the reads of
    karpy_core/kube/permissions.py (no Lease: no leader election; no Event, eviction or status write)."""
    objects = render(_merge(values, {"dryRun": True}))
    bound = {b["roleRef"]["name"] for b in objects if b["kind"] in ("RoleBinding", "ClusterRoleBinding")}
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole") and o["metadata"]["name"] in bound]
    assert roles and any(r["kind"] == "ClusterRole" for r in roles)
    verbs = {v for role in roles for rule in _rules(role) for v in rule["verbs"]}
    assert verbs <= set(READ_VERBS), f"a dry-run role grants {sorted(verbs - set(READ_VERBS))}"
    rendered = _rendered_rules(objects)
    assert {r.verb for r in rendered} <= set(READ_VERBS)
    assert rendered == read_rules_for(cloud, values)
    assert not [r for r in rendered if r.resource == "leases"]
    assert not [o for o in objects if o["metadata"].get("namespace") == "kube-system"]  # KakaoCloud's bootstrap-token Role
    deployment = _one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert "--dry-run" in _container(objects)["args"]
    assert "DRY RUN" in notes(_merge(values, {"dryRun": True})) and "DRY RUN" not in notes(values)
    # and without it, the acting controller keeps its writes and no --dry-run
    acting = render(values)
    assert "--dry-run" not in _container(acting)["args"]
    assert {r.verb for r in _rendered_rules(acting)} - set(READ_VERBS)


@pytest.mark.parametrize(("values", "group", "resource"), [(AWS_VALUES, "karpenter.k8s.aws", "ec2nodeclasses"), (KAKAOCLOUD_VALUES, "karpenter.kakaocloud.com", "kcnodeclasses")])
def test_cluster_role_is_scoped(render: Render, values: dict[str, Any], group: str, resource: str) -> None:
    objects = render(values)
    role = _one(objects, "ClusterRole")
    for rule in _rules(role):
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard in {field}: {rule}"
        assert not rule.get("nonResourceURLs"), rule
    assert _allows(role, "", "pods/eviction", "create")
    # terminationGracePeriod deadline and node repair delete pods; binding is kube-scheduler's job
    assert _allows(role, "", "pods", "delete") and not _allows(role, "", "pods/binding", "create")
    assert _allows(role, "", "nodes", "delete") and not _allows(role, "", "nodes", "create")
    for verb in ("create", "delete", "patch", "watch"):
        assert _allows(role, "karpenter.sh", "nodeclaims", verb)
    assert _allows(role, "karpenter.sh", "nodepools/status", "patch")
    assert _allows(role, "karpenter.sh", "nodepools/finalizers", "update")  # blockOwnerDeletion on NodeClaims
    assert not _allows(role, "karpenter.sh", "nodepools", "create") and not _allows(role, "karpenter.sh", "nodepools", "delete")
    assert _allows(role, group, resource, "watch") and _allows(role, group, f"{resource}/status", "patch")
    other_group = {"karpenter.k8s.aws", "karpenter.kakaocloud.com"} - {group}
    assert not [r for r in _rules(role) if set(r["apiGroups"]) & other_group], "the other cloud's NodeClass must not be granted"
    for resource_name in ("persistentvolumeclaims", "persistentvolumes"):
        assert _allows(role, "", resource_name, "list")
    assert _allows(role, "storage.k8s.io", "storageclasses", "list")
    assert _allows(role, "apps", "daemonsets", "watch")
    assert _allows(role, "policy", "poddisruptionbudgets", "watch")
    assert _allows(role, "", "events", "create")
    # Read-only kinds stay read-only (pods: delete only, no create/update/patch); no Secret or
    # ConfigMap access cluster-wide.
    for rule in _rules(role):
        if set(rule["resources"]) & {"persistentvolumes", "persistentvolumeclaims", "storageclasses", "daemonsets", "poddisruptionbudgets"}:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        if "pods" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch", "delete"}, rule
        assert not set(rule["resources"]) & {"secrets", "configmaps", "namespaces", "serviceaccounts"}, rule

    binding = _one(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]}
    sa = _one(objects, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]


@pytest.mark.parametrize("values", [AWS_VALUES, KAKAOCLOUD_VALUES], ids=["aws", "kakaocloud"])
def test_lease_role_in_release_namespace(render: Render, values: dict[str, Any]) -> None:
    objects = render(values)
    role = _one(objects, "Role", namespace=NAMESPACE)
    for verb in ("get", "create", "update"):
        assert _allows(role, "coordination.k8s.io", "leases", verb)
    binding = _one(objects, "RoleBinding", namespace=NAMESPACE)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["namespace"] == NAMESPACE


def test_aws_has_no_secret_access(render: Render) -> None:
    objects = render(AWS_VALUES)
    assert not [o for o in objects if o["metadata"].get("namespace") == "kube-system"]
    for role in (o for o in objects if o["kind"] in ("Role", "ClusterRole")):
        assert not [r for r in _rules(role) if "secrets" in r["resources"]], role["metadata"]


# --- KakaoCloud -------------------------------------------------------------------------------


def test_kakaocloud_deployment(render: Render) -> None:
    objects = render(KAKAOCLOUD_VALUES)
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = _container(objects)
    assert container["image"] == "karpy-kakaocloud:0.1.0"
    assert "--cloud-provider=kakaocloud" in container["args"]

    # The signing keyring: the Secret's keyring.json, mounted read-only.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["keyring"]["secret"]["secretName"] == "karpenter-sigkey"
    assert volumes["keyring"]["secret"]["items"] == [{"key": "keyring.json", "path": "keyring.json"}]
    assert mounts["keyring"] == {"name": "keyring", "mountPath": "/etc/karpy/keyring", "readOnly": True}
    mode = volumes["keyring"]["secret"]["defaultMode"]
    assert mode & 0o007 == 0, f"keyring readable by others: {oct(mode)}"

    env = {e["name"]: e for e in container["env"]}
    assert env["KAKAOCLOUD_PROJECT_ID"]["value"] == "0123456789abcdef0123456789abcdef"
    assert env["KAKAOCLOUD_KEYRING_FILE"]["value"] == "/etc/karpy/keyring/keyring.json"
    assert {name: e["valueFrom"]["secretKeyRef"] for name, e in env.items() if "secretKeyRef" in e.get("valueFrom", {})} == {
        "KAKAOCLOUD_APPLICATION_CREDENTIAL_ID": {"name": "kakaocloud-credentials", "key": "applicationCredentialId"},
        "KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET": {"name": "kakaocloud-credentials", "key": "applicationCredentialSecret"},
        "KAKAOCLOUD_REGION": {"name": "kakaocloud-credentials", "key": "region"},
    }
    # Secret material never appears as a literal: the only literal env values are these settings.
    literal = {name for name, e in env.items() if "value" in e}
    assert literal == {
        "CLUSTER_NAME",
        "LOG_LEVEL",
        "LOG_OUTPUT_PATHS",
        "LOG_ERROR_OUTPUT_PATHS",
        "METRICS_PORT",
        "HEALTH_PROBE_PORT",
        "FEATURE_GATES",
        "BATCH_IDLE_DURATION",
        "BATCH_MAX_DURATION",
        "PREFERENCE_POLICY",
        "MIN_VALUES_POLICY",
        "IGNORE_DRA_REQUESTS",
        "KAKAOCLOUD_PROJECT_ID",
        "KAKAOCLOUD_KEYRING_FILE",
    }
    # The AWS-only settings, which karpy refuses for other providers, are not passed.
    assert not [name for name in env if name.startswith("AWS_") or name in AWS_ONLY_ENV]
    # And no Secret object is rendered: the chart references Secrets the user made, never creates one.
    assert not [o for o in objects if o["kind"] == "Secret"]


def test_kakaocloud_secret_rbac(render: Render) -> None:
    objects = render(KAKAOCLOUD_VALUES)
    role = _one(objects, "Role", namespace=NAMESPACE)
    secret_rules = [r for r in _rules(role) if "secrets" in r["resources"]]
    assert secret_rules == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kakaocloud-credentials", "karpenter-sigkey"], "verbs": ["get"]}
    ]
    bootstrap = _one(objects, "Role", namespace="kube-system")
    assert _rules(bootstrap) == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    binding = _one(objects, "RoleBinding", namespace="kube-system")
    assert binding["roleRef"]["name"] == bootstrap["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": _one(objects, "ServiceAccount")["metadata"]["name"], "namespace": NAMESPACE}]


def test_kakaocloud_top_level_project_id_alias(render: Render) -> None:
    """The KakaoCloud provider chart's `--set projectID=...` (seed 004) works too."""
    values = {k: v for k, v in KAKAOCLOUD_VALUES.items() if k != "kakaocloud"} | {"projectID": "p-123"}
    env = {e["name"]: e for e in _container(render(values))["env"]}
    assert env["KAKAOCLOUD_PROJECT_ID"]["value"] == "p-123"


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("credentials", "credentials.secretName is required when cloud=kakaocloud"),
        ("sigKey", "sigKey.secretName is required when cloud=kakaocloud"),
        ("kakaocloud", "kakaocloud.projectID is required when cloud=kakaocloud"),
        ("clusterName", "clusterName is required"),
    ],
)
def test_kakaocloud_required_values(template_cmd: Callable[..., subprocess.CompletedProcess[str]], missing: str, message: str) -> None:
    proc = template_cmd({k: v for k, v in KAKAOCLOUD_VALUES.items() if k != missing})
    assert proc.returncode != 0
    assert message in proc.stderr


# --- values validation and knobs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"cloud": "gcp"}, "value must be one of 'aws', 'kakaocloud'"),
        ({"projectId": "typo"}, "additional properties 'projectId' not allowed"),
        # A misspelt Karpenter key is named, wherever it is.
        ({"settings": {"clusterNmae": "x"}}, "additional properties 'clusterNmae' not allowed"),
        ({"settings": {"featureGates": {"spotToSpot": False}}}, "additional properties 'spotToSpot' not allowed"),
        ({"controller": {"extraArg": ["--x"]}}, "additional properties 'extraArg' not allowed"),
        ({"controller": {"metrics": {"prot": 9090}}}, "additional properties 'prot' not allowed"),
        ({"serviceMonitor": {"relabeling": []}}, "additional properties 'relabeling' not allowed"),
        ({"webhook": {"enable": True}}, "additional properties 'enable' not allowed"),
        ({"settings": {"preferencePolicy": "respect"}}, "/settings/preferencePolicy"),
        ({"settings": {"minValuesPolicy": "Loose"}}, "/settings/minValuesPolicy"),
        ({"cloudProvider": "Bad Name"}, "/cloudProvider"),
        ({"settings": {"batchIdleDuration": "one second"}}, "/settings/batchIdleDuration"),
        ({"replicas": 2, "leaderElection": {"enabled": False}}, "leaderElection.enabled=false needs replicas: 1"),
    ],
)
def test_invalid_values_are_rejected(template_cmd: Callable[..., subprocess.CompletedProcess[str]], values: dict[str, Any], message: str) -> None:
    proc = template_cmd(_merge(AWS_VALUES, values))
    assert proc.returncode != 0
    assert message in proc.stderr


def test_single_replica_without_leader_election(render: Render) -> None:
    objects = render(_merge(AWS_VALUES, {"replicas": 1, "leaderElection": {"enabled": False}}))
    assert _one(objects, "Deployment")["spec"]["replicas"] == 1
    assert _env(objects)["DISABLE_LEADER_ELECTION"] == "true"


def test_image_overrides(render: Render) -> None:
    digest = "sha256:" + "a" * 64
    assert _container(render(_merge(AWS_VALUES, {"image": {"repository": "123.dkr.ecr.ap-northeast-2.amazonaws.com/karpy-aws", "tag": "v9"}})))["image"] == (
        "123.dkr.ecr.ap-northeast-2.amazonaws.com/karpy-aws:v9"
    )
    assert _container(render(_merge(AWS_VALUES, {"image": {"digest": digest}})))["image"] == f"karpy-aws@{digest}"
    # Karpenter's controller.image.* wins over image.*.
    karpenter_image = {"image": {"repository": "old/karpy", "tag": "v1"}, "controller": {"image": {"repository": "reg/karpy-aws", "tag": "v2"}}}
    assert _container(render(_merge(AWS_VALUES, karpenter_image)))["image"] == "reg/karpy-aws:v2"
    assert _container(render(_merge(AWS_VALUES, {"controller": {"image": {"digest": digest}}})))["image"] == f"karpy-aws@{digest}"
    assert _container(render(_merge(AWS_VALUES, {"imagePullPolicy": "Always"})))["imagePullPolicy"] == "Always"
    assert _container(render(_merge(AWS_VALUES, {"image": {"pullPolicy": "Never"}})))["imagePullPolicy"] == "Never"


def test_existing_service_account(render: Render) -> None:
    objects = render(_merge(AWS_VALUES, {"serviceAccount": {"create": False, "name": "pre-made"}}))
    assert not [o for o in objects if o["kind"] == "ServiceAccount"]
    assert _one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "pre-made"
    assert _one(objects, "ClusterRoleBinding")["subjects"][0]["name"] == "pre-made"


# --- CRDs -------------------------------------------------------------------------------------


def _generated_crds() -> list[Path]:
    crds = sorted((REPO / "crds").glob("*.yaml"))
    if not crds:
        pytest.skip("CRDS NOT GENERATED YET: crds/*.yaml is empty or missing, so the chart's copies cannot be checked")
    return crds


def test_chart_crds_equal_generated_crds() -> None:
    generated = {p.name: p.read_bytes() for p in _generated_crds()}
    in_chart = {p.name: p.read_bytes() for p in sorted((CHART / "crds").glob("*.yaml"))}
    assert sorted(in_chart) == sorted(generated), "charts/karpy/crds/ does not list the same files as crds/; run charts/sync-crds.sh"
    stale = sorted(name for name in generated if in_chart[name] != generated[name])
    assert not stale, f"charts/karpy/crds/ copies are stale ({stale}); run charts/sync-crds.sh"
    check = subprocess.run([str(REPO / "charts" / "sync-crds.sh"), "--check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


def test_chart_ships_the_crds(render: Render) -> None:
    _generated_crds()
    for name in CRD_FILES:
        assert (CHART / "crds" / name).is_file(), f"charts/karpy/crds/{name} missing"
    crds = [o for o in render(AWS_VALUES, "--include-crds") if o["kind"] == "CustomResourceDefinition"]
    assert sorted(c["metadata"]["name"] for c in crds) == sorted(
        ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "nodeoverlays.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
         "kcnodeclasses.karpenter.kakaocloud.com", "capacitybuffers.autoscaling.x-k8s.io",
         "kwoknodeclasses.karpenter.kwok.sh"]  # charts/karpy ships every CRD in crds/, the simulated provider's too
    )
    for crd in crds:
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        namespaced = crd["metadata"]["name"] == "capacitybuffers.autoscaling.x-k8s.io"  # as upstream's CRD
        assert crd["spec"]["scope"] == ("Namespaced" if namespaced else "Cluster"), crd["metadata"]["name"]


def test_log_debug_loggers_env_only_when_set(render: Render) -> None:
    env = {e["name"]: e for e in _container(render(AWS_VALUES))["env"]}
    assert "KARPY_LOG_DEBUG_LOGGERS" not in env
    env = {e["name"]: e for e in _container(render({**AWS_VALUES, "logDebugLoggers": "botocore,httpx=INFO"}))["env"]}
    assert env["KARPY_LOG_DEBUG_LOGGERS"] == {"name": "KARPY_LOG_DEBUG_LOGGERS", "value": "botocore,httpx=INFO"}


# --- a Karpenter 1.x values file, unchanged ---------------------------------------------------

KARPENTER_VALUES_FILE = Path(__file__).with_name("karpenter-values.yaml")


def karpenter_values() -> dict[str, Any]:
    """The Karpenter 1.x values fixture (tests/charts/karpenter-values.yaml) as a dict."""
    return yaml.safe_load(KARPENTER_VALUES_FILE.read_text())


def _notes(helm: str, env: dict[str, str], tmp: Path, values: dict[str, Any]) -> str:
    """The rendered NOTES.txt. `helm template` skips NOTES and `helm install --dry-run` needs a
    cluster, so a copy of the chart renders it into a ConfigMap."""
    chart = tmp / "karpy"
    if not chart.exists():
        import shutil

        shutil.copytree(CHART, chart)
        notes = (chart / "templates" / "NOTES.txt").read_text()
        (chart / "templates" / "zz-notes.yaml").write_text(
            '{{- define "test.notes" }}' + notes + "{{ end }}\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n"
            '  notes: {{ include "test.notes" . | toJson }}\n'
        )
    path = tmp / f"notes-{len(list(tmp.glob('notes-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(values))
    proc = _run(helm, env, "template", RELEASE, str(chart), "--namespace", NAMESPACE, "-f", str(path),
                "--show-only", "templates/zz-notes.yaml")
    assert proc.returncode == 0, proc.stderr
    return str(yaml.safe_load(proc.stdout)["data"]["notes"])


@pytest.fixture(scope="session")
def notes(helm: str, helm_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], str]:
    tmp = tmp_path_factory.mktemp("notes")
    return lambda values: _notes(helm, helm_env, tmp, values)


def test_karpenter_values_file_renders_unchanged(helm: str, helm_env: dict[str, str]) -> None:
    """`helm template -f karpenter-values.yaml` with no other value: schema-valid, lint-clean."""
    proc = _run(helm, helm_env, "lint", "--strict", str(CHART), "-f", str(KARPENTER_VALUES_FILE))
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"
    proc = _run(helm, helm_env, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(KARPENTER_VALUES_FILE),
                *PROMETHEUS_OPERATOR)
    assert proc.returncode == 0, proc.stderr
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    assert {o["kind"] for o in objects} >= {"Deployment", "ServiceAccount", "ClusterRole", "Role", "PodDisruptionBudget",
                                           "Service", "ServiceMonitor"}


def test_karpenter_values_file_deployment(render: Render) -> None:
    values = karpenter_values()
    objects = render(values, *PROMETHEUS_OPERATOR)
    deployment = _one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = _container(objects)
    own_pods = {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}

    assert container["name"] == "controller"
    assert container["image"] == "111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/karpy-aws:0.1.0"
    assert container["args"] == ["--cloud-provider=aws"]
    env = _env(objects)
    assert {k: env[k] for k in ("CLUSTER_NAME", "CLUSTER_ENDPOINT", "INTERRUPTION_QUEUE", "AWS_REGION", "MIN_VALUES_POLICY",
                                "METRICS_PORT", "HEALTH_PROBE_PORT", "LOG_LEVEL", "LOG_OUTPUT_PATHS")} == {
        "CLUSTER_NAME": "prod",
        "CLUSTER_ENDPOINT": values["settings"]["clusterEndpoint"],
        "INTERRUPTION_QUEUE": "Karpenter-prod",
        "AWS_REGION": "ap-northeast-2",  # from controller.env, as Karpenter's docs set it
        "MIN_VALUES_POLICY": "BestEffort",
        "METRICS_PORT": "8080",
        "HEALTH_PROBE_PORT": "8081",
        "LOG_LEVEL": "info",
        "LOG_OUTPUT_PATHS": "stdout",
    }
    assert "NodeRepair=true" in env["FEATURE_GATES"].split(",")
    assert container["resources"] == values["controller"]["resources"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["aws-iam-token"]["mountPath"] == "/var/run/secrets/eks.amazonaws.com/serviceaccount"
    assert {v["name"] for v in pod["volumes"]} == {"tmp", "aws-iam-token"}

    assert pod["serviceAccountName"] == "karpenter"
    assert pod["terminationGracePeriodSeconds"] == 60
    assert pod["dnsConfig"] == values["dnsConfig"] and pod["dnsPolicy"] == "ClusterFirst"
    assert pod["tolerations"] == values["tolerations"]
    assert deployment["metadata"]["annotations"] == {"platform.example.com/owner": "sre"}
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.example.com/tier"] == "system"
    # The user's spread (DoNotSchedule) and anti-affinity, given this Deployment's pod labels; the
    # node-group term keeps its karpenter.sh/nodepool exclusion.
    assert pod["topologySpreadConstraints"] == [{**values["topologySpreadConstraints"][0], "labelSelector": own_pods}]
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": own_pods}]
    assert _required_terms(deployment) == values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    sa = _one(objects, "ServiceAccount")
    assert sa["metadata"]["name"] == "karpenter"
    assert sa["metadata"]["annotations"] == values["serviceAccount"]["annotations"]
    assert _one(objects, "PodDisruptionBudget")["metadata"]["name"] == "karpenter"
    monitor = _one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["sampleLimit"] == 10000
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"] == values["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"] == values["serviceMonitor"]["metricRelabelings"]
    assert endpoint["interval"] == "30s"


def test_karpenter_values_file_env_loads_as_controller_settings(render: Render) -> None:
    """The rendered env, as the kubelet hands it over, is accepted by the controller's settings
    model: no refused value, no unknown feature gate (the e2e test then runs it)."""
    from karpy_core.settings import load_settings

    objects = render(karpenter_values())
    env = {**_env(objects), "SYSTEM_NAMESPACE": NAMESPACE}
    settings = load_settings({"cloud_provider": _container(objects)["args"][0].split("=", 1)[1]}, env)
    assert settings.cluster_name == "prod"
    assert settings.interruption_queue == "Karpenter-prod"
    assert settings.min_values_policy == "BestEffort"
    assert (settings.metrics_port, settings.health_probe_port) == (8080, 8081)
    assert settings.gates().NodeRepair is True
    assert settings.provider_options()["interruption_queue"] == "Karpenter-prod"


@pytest.mark.parametrize("values", [AWS_VALUES, KAKAOCLOUD_VALUES], ids=["aws", "kakaocloud"])
def test_rendered_env_loads_as_controller_settings(render: Render, values: dict[str, Any]) -> None:
    from karpy_core.settings import load_settings

    objects = render(values)
    provider = _container(objects)["args"][0].split("=", 1)[1]
    settings = load_settings({"cloud_provider": provider}, {**_env(objects), "SYSTEM_NAMESPACE": NAMESPACE})
    assert settings.cluster_name == values["clusterName"]
    assert settings.provider_options()["cluster_name"] == values["clusterName"]


def test_karpenter_webhook_block_is_ignored_with_a_note(render: Render, notes: Callable[[dict[str, Any]], str]) -> None:
    values = _merge(karpenter_values(), {"webhook": {"enabled": True}})
    objects = render(values)
    assert not [p for p in _container(objects)["ports"] if p["containerPort"] in (8443, 8001)]
    assert "webhook.* is ignored: karpy has no webhook" in notes(values)
    assert "webhook" not in notes(karpenter_values())


# Each settings.* key (and karpy's older aliases) -> (value set, env var Karpenter's chart sets, its value).
SETTINGS_ENV: list[tuple[dict[str, Any], str, str]] = [
    ({"settings": {"clusterName": "c1"}}, "CLUSTER_NAME", "c1"),
    ({"settings": {"clusterName": "{{ .Release.Name }}-eks"}}, "CLUSTER_NAME", "karpy-eks"),  # tpl, as Karpenter
    ({"settings": {"clusterEndpoint": "https://api.example"}}, "CLUSTER_ENDPOINT", "https://api.example"),
    ({"settings": {"clusterCABundle": "LS0tLS1CRUdJTg=="}}, "CLUSTER_CA_BUNDLE", "LS0tLS1CRUdJTg=="),
    ({"settings": {"interruptionQueue": "q1"}}, "INTERRUPTION_QUEUE", "q1"),
    ({"settings": {"featureGates": {"nodeRepair": False}}}, "FEATURE_GATES",
     "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"),
    ({"settings": {"featureGates": {"reservedCapacity": False}}}, "FEATURE_GATES",
     "ReservedCapacity=false,SpotToSpotConsolidation=false,NodeRepair=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"),
    ({"settings": {"featureGates": {"nodeOverlay": True}}}, "FEATURE_GATES",
     "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=true,NodeOverlay=true,StaticCapacity=false,CapacityBuffer=false"),
    ({"settings": {"vmMemoryOverheadPercent": 0.1}}, "VM_MEMORY_OVERHEAD_PERCENT", "0.1"),
    ({"settings": {"reservedENIs": "2"}}, "RESERVED_ENIS", "2"),
    ({"settings": {"isolatedVPC": True}}, "ISOLATED_VPC", "true"),
    ({"settings": {"eksControlPlane": True}}, "EKS_CONTROL_PLANE", "true"),
    ({"settings": {"disableDryRun": True}}, "DISABLE_DRY_RUN", "true"),
    ({"settings": {"batchMaxDuration": "30s"}}, "BATCH_MAX_DURATION", "30s"),
    ({"settings": {"batchIdleDuration": "2s"}}, "BATCH_IDLE_DURATION", "2s"),
    ({"settings": {"preferencePolicy": "Ignore"}}, "PREFERENCE_POLICY", "Ignore"),
    ({"settings": {"minValuesPolicy": "BestEffort"}}, "MIN_VALUES_POLICY", "BestEffort"),
    ({"settings": {"ignoreDRARequests": True}}, "IGNORE_DRA_REQUESTS", "true"),
    ({"settings": {"amiRefreshInterval": "1m"}}, "AMI_REFRESH_INTERVAL", "1m"),
    ({"settings": {"subnetRefreshInterval": "1m"}}, "SUBNET_REFRESH_INTERVAL", "1m"),
    ({"settings": {"awsFeatureGates": {"nodeClassCEL": False}}}, "AWS_FEATURE_GATES", "NodeClassCEL=false"),
    ({"settings": {"kubeClientQPS": 50}}, "KUBE_CLIENT_QPS", "50"),
    ({"settings": {"kubeClientBurst": 80}}, "KUBE_CLIENT_BURST", "80"),
    ({"settings": {"consolidationMinSavings": 0.2}}, "KARPY_CONSOLIDATION_MIN_SAVINGS", "0.2"),
    ({"settings": {"consolidationMinSavings": 0}}, "KARPY_CONSOLIDATION_MIN_SAVINGS", "0"),
    ({"logLevel": "debug"}, "LOG_LEVEL", "debug"),
    ({"logOutputPaths": ["stdout", "/tmp/karpy.log"]}, "LOG_OUTPUT_PATHS", "stdout,/tmp/karpy.log"),
    ({"logErrorOutputPaths": ["stderr"]}, "LOG_ERROR_OUTPUT_PATHS", "stderr"),
    ({"controller": {"metrics": {"port": 9090}}}, "METRICS_PORT", "9090"),
    ({"controller": {"healthProbe": {"port": 9091}}}, "HEALTH_PROBE_PORT", "9091"),
    ({"replicas": 1, "leaderElection": {"enabled": False}}, "DISABLE_LEADER_ELECTION", "true"),
    ({"aws": {"region": "eu-west-1"}}, "AWS_REGION", "eu-west-1"),
    # karpy's older names
    ({"clusterName": "old", "settings": {"clusterName": ""}}, "CLUSTER_NAME", "old"),
    ({"aws": {"interruptionQueue": "old-q"}, "settings": {"interruptionQueue": ""}}, "INTERRUPTION_QUEUE", "old-q"),
    ({"metricsPort": 9100}, "METRICS_PORT", "9100"),
    ({"healthPort": 9101}, "HEALTH_PROBE_PORT", "9101"),
    ({"settings": {"nodeRepair": False}}, "FEATURE_GATES",
     "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"),
]


@pytest.mark.parametrize(("values", "name", "value"), SETTINGS_ENV, ids=[f"{n}-{i}" for i, (_, n, _v) in enumerate(SETTINGS_ENV)])
def test_each_setting_becomes_karpenters_env_var(render: Render, values: dict[str, Any], name: str, value: str) -> None:
    base = {**AWS_VALUES, "clusterName": "", "clusterEndpoint": "", "aws": {"region": "ap-northeast-2"},
            "settings": {"clusterName": "dev-cluster"}}
    env = _env(render(_merge(base, values)))
    assert env[name] == value


def test_every_settings_key_is_mapped() -> None:
    """Every key under settings in values.yaml (and the schema) has a row in SETTINGS_ENV."""
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    keys = set(schema["properties"]["settings"]["properties"])
    assert keys == set(yaml.safe_load((CHART / "values.yaml").read_text())["settings"])
    covered = {k for values, _, _ in SETTINGS_ENV for k in values.get("settings", {}) if values["settings"][k] not in ("", None)}
    # enableZonalShift and disableClusterStateObservability: only their defaults (false) are accepted,
    # and false is not passed (as in Karpenter's chart); see test_values_the_controller_refuses_fail_the_install.
    assert keys - covered == {"enableZonalShift", "disableClusterStateObservability"}


def test_every_env_var_is_one_the_controller_reads(render: Render) -> None:
    """The chart passes no variable karpy's settings model (or the provider, or the AWS SDK) does not read."""
    from karpy_core.settings import setting_names

    read = {env for _, env, *_ in setting_names()} | {"POD_NAME", "AWS_REGION"}
    read |= {"KAKAOCLOUD_PROJECT_ID", "KAKAOCLOUD_APPLICATION_CREDENTIAL_ID", "KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET",
             "KAKAOCLOUD_REGION", "KAKAOCLOUD_KEYRING_FILE"}
    everything = {**AWS_VALUES, "clusterEndpoint": "", "aws": {"region": "ap-northeast-2"}}
    for values, _, _ in SETTINGS_ENV:
        everything = _merge(everything, {"settings": values.get("settings", {})})
    everything = _merge(everything, {"settings": {"clusterName": ""}})
    for values in (everything, KAKAOCLOUD_VALUES, karpenter_values(), _merge(AWS_VALUES, {"replicas": 1, "leaderElection": {"enabled": False}})):
        names = {e["name"] for e in _container(render(values))["env"]} - {"AWS_WEB_IDENTITY_TOKEN_FILE"}  # the fixture's own
        assert len(names) > 15
        assert names <= read, f"not read by the controller: {sorted(names - read)}"


def test_alias_and_karpenter_name_must_agree(template_cmd: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    proc = template_cmd(_merge(AWS_VALUES, {"settings": {"clusterName": "other"}}))
    assert proc.returncode != 0
    assert "settings.clusterName (other) and its alias clusterName (dev-cluster) differ" in proc.stderr
    proc = template_cmd(_merge(AWS_VALUES, {"settings": {"clusterName": "dev-cluster"}}))
    assert proc.returncode == 0, proc.stderr


def _refused_values() -> list[tuple[dict[str, Any], str]]:
    return [
        ({"settings": {"disableClusterStateObservability": True}}, "settings.disableClusterStateObservability"),
        ({"settings": {"ignoreDRARequests": False}}, "settings.ignoreDRARequests"),
        ({"settings": {"enableZonalShift": True}}, "settings.enableZonalShift"),
        ({"settings": {"amiRefreshInterval": "5m"}}, "settings.amiRefreshInterval"),
        ({"settings": {"subnetRefreshInterval": "30s"}}, "settings.subnetRefreshInterval"),
        ({"settings": {"awsFeatureGates": {"nodeClassCEL": True}}}, "settings.awsFeatureGates.nodeClassCEL"),
        ({"logErrorOutputPaths": ["stdout"]}, "logErrorOutputPaths"),
    ]


@pytest.mark.parametrize(("values", "key"), _refused_values(), ids=[k for _, k in _refused_values()])
def test_values_the_controller_refuses_fail_the_install(template_cmd: Callable[..., subprocess.CompletedProcess[str]],
                                                         values: dict[str, Any], key: str) -> None:
    """A value karpy's controller would refuse at start fails `helm install` instead, naming the key."""
    proc = template_cmd(_merge(AWS_VALUES, values))
    assert proc.returncode != 0
    assert f"{key}: this value is not supported by karpy" in proc.stderr


def test_refused_values_match_the_settings_model() -> None:
    """The chart refuses exactly what karpy_core.settings refuses among the values it maps."""
    from karpy_core.featuregates import AWS_GATES, UNIMPLEMENTED_GATES
    from karpy_core.settings import KarpySettings

    chart_keys = {k for _, k in _refused_values()}
    gate_keys = {f"settings.featureGates.{g[0].lower()}{g[1:]}" for g in UNIMPLEMENTED_GATES}
    aws_gate_keys = {f"settings.awsFeatureGates.{g[0].lower()}{g[1:]}" for g in AWS_GATES}
    # REFUSED fields the chart has a value for (the rest are reachable through controller.env only).
    mapped = {"disable_cluster_state_observability": "settings.disableClusterStateObservability",
              "ignore_dra_requests": "settings.ignoreDRARequests", "enable_zonal_shift": "settings.enableZonalShift",
              "ami_refresh_interval": "settings.amiRefreshInterval", "subnet_refresh_interval": "settings.subnetRefreshInterval",
              "log_error_output_paths": "logErrorOutputPaths"}
    unmapped = {"enable_profiling", "disable_controller_warmup", "scheduler_config"}
    assert set(KarpySettings.REFUSED) == set(mapped) | unmapped
    assert chart_keys == gate_keys | aws_gate_keys | set(mapped.values())


def test_aws_only_settings_are_not_passed_to_other_providers(render: Render, notes: Callable[[dict[str, Any]], str]) -> None:
    values = _merge(KAKAOCLOUD_VALUES, {"settings": {"interruptionQueue": "q", "isolatedVPC": True, "clusterEndpoint": "https://x"},
                                        "aws": {"region": "ap-northeast-2"}})
    env = _env(render(values))
    assert not set(env) & AWS_ONLY_ENV
    text = notes(values)
    assert "settings.clusterEndpoint, settings.interruptionQueue, settings.isolatedVPC, aws.region apply to the aws provider only" in text


def test_controller_env_wins_over_the_charts(render: Render) -> None:
    """A variable set again in extraEnv or controller.env replaces the chart's (one entry, the user's)."""
    values = _merge(AWS_VALUES, {"extraEnv": [{"name": "LOG_LEVEL", "value": "debug"}],
                                 "controller": {"env": [{"name": "AWS_REGION", "value": "eu-west-1"}, {"name": "FOO", "value": "1"}],
                                                "envFrom": [{"configMapRef": {"name": "karpy-env"}}]}})
    container = _container(render(values))
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names)), names
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["LOG_LEVEL"], env["AWS_REGION"], env["FOO"]) == ("debug", "eu-west-1", "1")
    assert names[-3:] == ["LOG_LEVEL", "AWS_REGION", "FOO"]
    assert container["envFrom"] == [{"configMapRef": {"name": "karpy-env"}}]


def test_extra_args(render: Render) -> None:
    values = _merge(AWS_VALUES, {"controller": {"extraArgs": ["--leader-election-name=karpy-prod", "--kube-client-qps=50"]}})
    assert _container(render(values))["args"] == ["--cloud-provider=aws", "--leader-election-name=karpy-prod", "--kube-client-qps=50"]


def test_extra_args_are_flags_the_controller_takes(render: Render) -> None:
    """The rendered command line parses as `karpy controller` arguments (typer), extraArgs included."""
    import typer.main

    from karpy_core.cli import app

    values = _merge(AWS_VALUES, {"controller": {"extraArgs": ["--leader-election-name=karpy-prod", "--kube-client-qps=50"]}})
    container = _container(render(values))
    assert container["command"] == ["karpy", "controller"]
    command = typer.main.get_command(app)
    ctx = command.make_context("karpy", ["controller", *container["args"]], resilient_parsing=True)
    sub = command.get_command(ctx, "controller")  # type: ignore[attr-defined]
    assert sub is not None
    parsed = sub.make_context("controller", list(container["args"]))
    assert parsed.params["cloud_provider"] == "aws"
    assert parsed.params["leader_election_name"] == "karpy-prod"
    assert parsed.params["kube_client_qps"] == 50


def test_third_party_provider(render: Render, template_cmd: Callable[..., subprocess.CompletedProcess[str]],
                              notes: Callable[[dict[str, Any]], str]) -> None:
    values = _merge({"cloud": "aws", "settings": {"clusterName": "c"}}, {
        "cloudProvider": "example",
        "nodeClass": {"group": "karpenter.example.com", "resource": "examplenodeclasses"},
        "controller": {"env": [{"name": "EXAMPLE_ENDPOINT", "value": "https://api.example"}]},
        "additionalClusterRoleRules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    })
    objects = render(values)
    container = _container(objects)
    assert container["args"] == ["--cloud-provider=example"]
    assert container["image"] == "karpy-example:0.1.0"
    env = _env(objects)
    assert env["CLUSTER_NAME"] == "c" and env["EXAMPLE_ENDPOINT"] == "https://api.example"
    assert not set(env) & AWS_ONLY_ENV and not [n for n in env if n.startswith("KAKAOCLOUD_")]
    assert {m["name"] for m in container["volumeMounts"]} == {"tmp"}
    role = _one(objects, "ClusterRole")
    assert _allows(role, "karpenter.example.com", "examplenodeclasses", "watch")
    assert _allows(role, "karpenter.example.com", "examplenodeclasses/status", "patch")
    assert not [r for r in _rules(role) if set(r["apiGroups"]) & {"karpenter.k8s.aws", "karpenter.kakaocloud.com"}]
    assert _allows(role, "", "configmaps", "get")
    # Everything else is the aws grant list minus its NodeClass: the core controllers' needs.
    core = {r for r in _rendered_rules(render(AWS_VALUES)) if r.group != "karpenter.k8s.aws"}
    assert core <= _rendered_rules(objects)
    assert not [o for o in objects if o["metadata"].get("namespace") == "kube-system"]
    assert "Third-party provider example" in notes(values)

    from karpy_core.settings import load_settings

    assert load_settings({"cloud_provider": "example"}, {**env, "SYSTEM_NAMESPACE": NAMESPACE}).provider_options() == {"cluster_name": "c"}

    # Without its NodeClass kind the chart cannot grant RBAC: an error naming the value.
    proc = template_cmd({k: v for k, v in values.items() if k != "nodeClass"})
    assert proc.returncode != 0
    assert 'nodeClass.group is required for the third-party provider "example"' in proc.stderr


def test_cloud_provider_naming_a_builtin_cloud(render: Render) -> None:
    """cloudProvider: kakaocloud beside the default cloud: aws is the kakaocloud install."""
    values = {**{k: v for k, v in KAKAOCLOUD_VALUES.items() if k != "cloud"}, "cloudProvider": "kakaocloud"}
    objects = render(values)
    assert _container(objects)["args"] == ["--cloud-provider=kakaocloud"]
    assert "KAKAOCLOUD_PROJECT_ID" in _env(objects)


def test_pod_level_karpenter_keys(render: Render) -> None:
    sidecar = {"name": "log-shipper", "image": "fluent-bit:3", "args": ["-c", "/etc/fb.conf"]}
    values = _merge(AWS_VALUES, {
        "hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet", "schedulerName": "custom",
        "initContainers": [{"name": "wait", "image": "busybox", "command": ["true"]}],
        "terminationGracePeriodSeconds": None,
        "extraVolumes": [{"name": "cfg", "configMap": {"name": "fb"}}],
        "controller": {"containerName": "karpenter", "sidecarContainer": [sidecar],
                       "extraVolumeMounts": [{"name": "cfg", "mountPath": "/etc/fb"}],
                       "sidecarVolumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                       "resources": {"requests": {"cpu": "2"}},
                       "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
    })
    pod = _one(render(values), "Deployment")["spec"]["template"]["spec"]
    controller, shipper = pod["containers"]
    assert controller["name"] == "karpenter"
    assert controller["resources"] == {"requests": {"cpu": "2"}}
    assert controller["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert controller["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["name"] for m in controller["volumeMounts"]} == {"tmp", "cfg"}
    assert shipper["name"] == "log-shipper" and shipper["args"] == sidecar["args"]
    assert shipper["volumeMounts"] == [{"name": "cfg", "mountPath": "/etc/fb"}, {"name": "tmp", "mountPath": "/tmp"}]
    assert (pod["hostNetwork"], pod["dnsPolicy"], pod["schedulerName"]) == (True, "ClusterFirstWithHostNet", "custom")
    assert pod["initContainers"][0]["name"] == "wait"
    assert "terminationGracePeriodSeconds" not in pod


# --- Karpenter's names, resources and the admin role (issue 29) ------------------------------------


def test_release_named_karpenter_renders_karpenters_names(helm: str, helm_env: dict[str, str], tmp_path: Path) -> None:
    """`helm install karpenter charts/karpy -n kube-system` with a Karpenter values file that names
    no ServiceAccount: every object is "karpenter" as with Karpenter's chart (IRSA / Pod Identity
    trust `system:serviceaccount:kube-system:karpenter`; the dashboards select job="karpenter",
    the Service's name, which a ServiceMonitor scrape job takes)."""
    values = karpenter_values()
    del values["serviceAccount"]["name"]
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    proc = _run(helm, helm_env, "template", "karpenter", str(CHART), "--namespace", "kube-system", "-f", str(path), *PROMETHEUS_OPERATOR)
    assert proc.returncode == 0, proc.stderr
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert names >= {("ServiceAccount", "karpenter"), ("Service", "karpenter"), ("Deployment", "karpenter"),
                     ("ClusterRole", "karpenter"), ("ClusterRole", "karpenter-admin"), ("ClusterRoleBinding", "karpenter"),
                     ("PodDisruptionBudget", "karpenter"), ("ServiceMonitor", "karpenter")}
    service = _one(objects, "Service")
    assert service["metadata"]["labels"]["app.kubernetes.io/name"] == "karpenter"
    assert _one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "karpenter"
    monitor = _one(objects, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    # Prometheus names a ServiceMonitor's scrape job after the Service: Karpenter's dashboard finds it
    import re

    dashboard = (REPO / "tests" / "data" / "grafana" / "karpenter-performance-dashboard.json").read_text()
    jobs = set(re.findall(r'job=\\"([^"\\]+)\\"', dashboard))
    assert jobs == {service["metadata"]["name"]}


def test_admin_role_aggregates_nodepools_nodeclaims_and_the_nodeclass(render: Render) -> None:
    for values, group, resource in ((AWS_VALUES, "karpenter.k8s.aws", "ec2nodeclasses"),
                                    (KAKAOCLOUD_VALUES, "karpenter.kakaocloud.com", "kcnodeclasses")):
        (admin,) = [o for o in render(values) if o["kind"] == "ClusterRole" and _aggregated(o)]
        assert admin["metadata"]["name"].endswith("-admin")
        verbs = ["get", "list", "watch", "create", "delete", "patch"]
        assert admin["rules"] == [
            {"apiGroups": ["karpenter.sh"], "resources": ["nodepools", "nodepools/status", "nodeclaims", "nodeclaims/status"], "verbs": verbs},
            {"apiGroups": [group], "resources": [resource], "verbs": verbs}]
        bound = {b["roleRef"]["name"] for b in render(values) if b["kind"] in ("ClusterRoleBinding", "RoleBinding")}
        assert admin["metadata"]["name"] not in bound  # aggregated into "admin", granted to nobody by the chart


@pytest.mark.parametrize(("values", "expected"), [
    ({}, {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}),  # karpy's default
    ({"controller": {"resources": {}}}, None),  # Karpenter's default: none
    ({"controller": {"resources": {"requests": {"cpu": "1"}}}}, {"requests": {"cpu": "1"}}),
    # karpy's older name, merged with its default as Helm merges maps
    ({"resources": {"requests": {"cpu": "2"}}}, {"requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}),
])
def test_controller_resources_empty_means_none(render: Render, values: dict[str, Any], expected: dict[str, Any] | None) -> None:
    container = _container(render(_merge(AWS_VALUES, values)))
    assert container.get("resources") == expected


# --- one chart per cloud (hack/charts.py) -----------------------------------------------------------

KAKAOCLOUD_CHART = REPO / "charts" / "karpenter-provider-kakaocloud"
KARPENTER_CHART = REPO / "charts" / "karpenter"
GUIDE_SETS = ("--set", "clusterName=kc-cluster", "--set", "projectID=0123456789abcdef0123456789abcdef",
              "--set", "credentials.secretName=kakaocloud-credentials", "--set", "sigKey.secretName=karpenter-sigkey")
"""The values of KakaoCloud's provider guide, as its `helm upgrade --install karpenter-provider-kakaocloud` command sets them."""


def _guide_install(helm: str, helm_env: dict[str, str], chart: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The guide's command (`helm upgrade --install karpenter-provider-kakaocloud <chart> --namespace
    karpenter-kakaocloud --set ...`), rendered with `helm template` (CRDs included)."""
    return _run(helm, helm_env, "template", "karpenter-provider-kakaocloud", str(chart), "--namespace", "karpenter-kakaocloud",
                "--include-crds", *GUIDE_SETS, *extra)


def test_kakaocloud_guide_command_installs_the_kakaocloud_controller(helm: str, helm_env: dict[str, str]) -> None:
    proc = _guide_install(helm, helm_env, KAKAOCLOUD_CHART)
    assert proc.returncode == 0, proc.stderr
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    deployment = _one(objects, "Deployment")
    # the guide checks `kubectl -n karpenter-kakaocloud get deployment karpenter-provider-kakaocloud`
    assert (deployment["metadata"]["name"], deployment["metadata"]["namespace"]) == ("karpenter-provider-kakaocloud", "karpenter-kakaocloud")
    container = _container(objects)
    assert container["image"] == "karpy-kakaocloud:0.1.0"
    assert container["args"] == ["--cloud-provider=kakaocloud"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KAKAOCLOUD_PROJECT_ID"]["value"] == "0123456789abcdef0123456789abcdef"
    assert env["CLUSTER_NAME"]["value"] == "kc-cluster"
    assert env["KAKAOCLOUD_APPLICATION_CREDENTIAL_ID"]["valueFrom"]["secretKeyRef"]["name"] == "kakaocloud-credentials"
    assert not set(env) & AWS_ONLY_ENV
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert any((v.get("secret") or {}).get("secretName") == "karpenter-sigkey" for v in volumes.values())
    crds = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition")
    assert "kcnodeclasses.karpenter.kakaocloud.com" in crds and "nodepools.karpenter.sh" in crds
    assert "ec2nodeclasses.karpenter.k8s.aws" not in crds
    role = _one(objects, "ClusterRole")
    assert _allows(role, "karpenter.kakaocloud.com", "kcnodeclasses", "watch")
    assert not [r for r in _rules(role) if "karpenter.k8s.aws" in r.get("apiGroups", [])]


def test_kakaocloud_guide_command_against_the_aws_default_names_cloud(helm: str, helm_env: dict[str, str]) -> None:
    """charts/karpy defaults to cloud=aws: the guide's values there are refused, not an AWS controller."""
    for chart in (CHART, KARPENTER_CHART):
        proc = _guide_install(helm, helm_env, chart)
        assert proc.returncode != 0, f"{chart.name} rendered:\n{proc.stdout[:2000]}"
        assert ('cloud is "aws", but projectID, credentials.secretName, sigKey.secretName are KakaoCloud\'s: set cloud=kakaocloud '
                "(or install the karpenter-provider-kakaocloud chart, charts/karpenter-provider-kakaocloud, whose cloud is kakaocloud)"
                ) in proc.stderr
        assert "karpy-aws" not in proc.stdout
    # ... and with cloud=kakaocloud charts/karpy renders what the per-cloud chart renders
    ok = _guide_install(helm, helm_env, CHART, "--set", "cloud=kakaocloud")
    assert ok.returncode == 0, ok.stderr
    assert _container([d for d in yaml.safe_load_all(ok.stdout) if d])["image"] == "karpy-kakaocloud:0.1.0"


@pytest.mark.parametrize(("values", "message"), [
    ({"kakaocloud": {"projectID": "p"}}, 'cloud is "aws", but kakaocloud.projectID is KakaoCloud\'s'),
    ({"sigKey": {"secretName": "s"}}, 'cloud is "aws", but sigKey.secretName is KakaoCloud\'s'),
    ({"cloudProvider": "example", "nodeClass": {"group": "karpenter.example.com", "resource": "examplenodeclasses"},
      "credentials": {"secretName": "c"}}, 'cloudProvider is "example", but credentials.secretName is KakaoCloud\'s'),
])
def test_kakaocloud_values_with_another_provider_are_refused(template_cmd: Callable[..., subprocess.CompletedProcess[str]],
                                                             values: dict[str, Any], message: str) -> None:
    proc = template_cmd(_merge(AWS_VALUES, values))
    assert proc.returncode != 0
    assert message in proc.stderr


def test_karpenter_chart_renders_as_charts_karpy(helm: str, helm_env: dict[str, str]) -> None:
    """charts/karpenter with Karpenter's values file renders charts/karpy's objects (only the chart
    label and the template paths name the chart), and passes `helm lint --strict`."""
    rendered = {}
    for chart in (CHART, KARPENTER_CHART):
        proc = _run(helm, helm_env, "template", "karpenter", str(chart), "--namespace", "kube-system", "-f", str(KARPENTER_VALUES_FILE),
                    *PROMETHEUS_OPERATOR)
        assert proc.returncode == 0, proc.stderr
        rendered[chart.name] = proc.stdout.replace(f"# Source: {chart.name}/", "# Source: ").replace(
            f"helm.sh/chart: {chart.name}-", "helm.sh/chart: ")
    assert rendered["karpenter"] == rendered["karpy"]
    proc = _run(helm, helm_env, "lint", "--strict", str(KARPENTER_CHART), "-f", str(KARPENTER_VALUES_FILE))
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize(("chart", "values_file"), [(KARPENTER_CHART, "aws-values.yaml"), (KAKAOCLOUD_CHART, "kakaocloud-values.yaml")])
def test_cloud_charts_lint_strict(helm: str, helm_env: dict[str, str], chart: Path, values_file: str) -> None:
    proc = _run(helm, helm_env, "lint", "--strict", str(chart), "-f", str(chart / "ci" / values_file))
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"
    proc = _run(helm, helm_env, "lint", str(chart))
    assert proc.returncode == 0, f"helm lint (no values) failed:\n{proc.stdout}\n{proc.stderr}"


def test_plugin_guide_values_install_a_third_party_provider(render: Render) -> None:
    """docs/cloudprovider.md section 6 installs tinycloud with the chart's generic values: the
    values file on the page renders a controller running that plugin with its NodeClass RBAC."""
    page = (REPO / "docs" / "cloudprovider.md").read_text()
    block = page.split("For tinycloud, `tinycloud-values.yaml`:", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    values = yaml.safe_load("\n".join(line.removeprefix("   ") for line in block.splitlines()))
    assert values["cloudProvider"] == "tinycloud"
    objects = render(values)
    container = _container(objects)
    assert container["args"] == ["--cloud-provider=tinycloud", "--provider-option=zones=tiny-1a,tiny-1b"]
    assert container["image"] == "registry.example.com/karpy-tinycloud:0.1.0"
    assert _env(objects)["CLUSTER_NAME"] == "demo"
    role = _one(objects, "ClusterRole")
    assert _allows(role, "tinycloud.example.com", "tinynodeclasses", "watch")
    assert _allows(role, "tinycloud.example.com", "tinynodeclasses/status", "patch")
    assert "helm upgrade --install karpy charts/karpy -n karpy --create-namespace -f tinycloud-values.yaml" in page
