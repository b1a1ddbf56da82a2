"""New-user trial 22 findings (issue 35), and the smaller ones left from trial 21.

A pod asking for ``memory: 1E`` was told its request was ``memory 976562500000000Ki``: byte counts
were written with the largest exact *binary* suffix only, and 10**18 is a multiple of 1Ki but not
of 1Mi. They now take the shorter of the exact binary and decimal forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.utils.quantity import format_bytes, format_quantity, to_internal
from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "shown"),
    [("1E", "1E"), ("1Ei", "1Ei"), ("7577Mi", "7577Mi"), ("1G", "1G"), ("512M", "512M"), ("1Gi", "1Gi"),
     ("1024000", "1024k"), ("1000", "1k"), ("1024", "1Ki"), ("5000000001", "5000000001"), ("0", "0")],
)
def test_byte_counts_read_back_in_their_shortest_exact_form(text: str, shown: str) -> None:
    amount = to_internal("memory", text)
    assert format_bytes(amount) == shown
    assert format_quantity("memory", amount) == shown
    assert to_internal("memory", shown) == amount  # the text still means the same number of bytes


def test_an_exabyte_request_is_quoted_as_written(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"},
           "spec": {"containers": [{"name": "c", "image": "x",
                                    "resources": {"requests": {"memory": "1E", "cpu": "100m"}}}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(tmp_path / "pod.yaml"))
    assert result.exit_code == 0, result.output
    assert "default/big: NodePool general-purpose: no instance type has room for the pod's requests (cpu 100m, memory 1E, pods 1)" in result.stdout
    assert "Ki" not in result.stdout.split("default/big:")[1].split("largest")[0]


def test_match_label_keys_are_checked_as_kube_apiserver_checks_them() -> None:
    """The loader's half of tests/integration/test_trial22_apiserver.py (the server's answers are
    checked there): ``matchLabelKeys`` without a selector, not a label key, in both lists, or
    naming a key the selector names once the pod's own value is merged in, is refused."""
    from tests.integration.test_trial3_apiserver import loader_problems
    from tests.integration.test_trial22_apiserver import CASES

    for case, (obj, accepted, phrase) in sorted(CASES.items()):
        mine = "\n".join(loader_problems(obj))
        assert (not mine) is accepted and phrase in mine, (case, mine)


def test_a_template_whose_pods_kube_apiserver_would_refuse_is_refused(tmp_path: Path) -> None:
    deployment: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                      "metadata": {"labels": {"app": "web"}},
                      "spec": {"topologySpreadConstraints": [{
                          "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                          "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]}],
                          "containers": [{"name": "c", "image": "x"}]}}}}
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(deployment))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(REPO / "examples/nodepools/general-purpose.yaml"), str(tmp_path / "d.yaml"))
        assert result.exit_code == 2, result.output
        assert ("Deployment/web: spec.template: spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: 'app': "
                "exists in both matchLabelKeys and labelSelector (kube-apiserver refuses every pod made from this template)"
                in result.output), result.output
    # the same Deployment selecting by pod-template-hash (the field's intended use) is taken
    spec = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"][0]
    spec["matchLabelKeys"] = ["pod-template-hash"]
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(deployment))
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(tmp_path / "d.yaml"))
    assert result.exit_code == 0, result.output
    assert "pods: 1 bound, 0 pending" in result.stdout, result.stdout


# ---------------------------------------------------------------- trial 22's own findings
GP = REPO / "examples/nodepools/general-purpose.yaml"
INFLATE = REPO / "examples/workloads/inflate.yaml"


def _scenario(tmp_path: Path, *steps: str, until: str = "3h") -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(f"apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {{name: s}}\nuntil: {until}\nsteps:\n"
                    f"  - {{at: 0s, apply: [{GP}, {INFLATE}]}}\n" + "".join(f"  - {s}\n" for s in steps))
    return path


def test_a_budget_whose_schedule_never_fires_is_always_active_as_in_karpenter(tmp_path: Path) -> None:
    """``0 0 31 2 *`` (February 31st) ended a scenario in a CroniterBadDateError traceback and
    ``budgets`` in ``error: failed to find next date``. robfig/cron's ``Next`` gives up after five
    years with Go's zero time, which Karpenter's ``Budget.IsActive`` reads as active."""
    from datetime import UTC, datetime

    from karpy_core.apis.nodepool import Budget
    from karpy_core.controllers.disruption.budgets import budget_active, next_budget_change, next_tick

    now = datetime(2026, 12, 8, tzinfo=UTC).timestamp()
    never = Budget.model_validate({"nodes": "0", "schedule": "0 0 31 2 *", "duration": "1h"})
    assert next_tick("0 0 31 2 *", now) is None
    assert budget_active(never, now) and next_budget_change((never,), now) is None
    # a leap day is within robfig's five years, so it is a tick: inactive until then
    leap = Budget.model_validate({"nodes": "0", "schedule": "0 0 29 2 *", "duration": "1h"})
    assert next_tick("0 0 29 2 *", now) == datetime(2028, 2, 29, tzinfo=UTC).timestamp()
    assert not budget_active(leap, now)

    patch = "{spec: {disruption: {budgets: [{duration: 1h, nodes: '0', schedule: '0 0 31 2 *'}]}}}"
    scenario = _scenario(tmp_path, "{at: 30m, scale: {deployment: inflate, replicas: 10}}",
                         f"{{at: 1h, patch: {{kind: NodePool, name: general-purpose, patch: {patch}}}}}",
                         "{at: 2h, scale: {deployment: inflate, replicas: 1}}")
    result = invoke_cli("simulate", str(scenario), "--set", "CLUSTER_NAME=demo", "-o", "json")
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    # the budget (nodes: 0) is always active from 1h on: nothing is disrupted after the scale-down at 2h
    assert not [e for e in events if e["kind"] == "disrupt" and e["t"] >= 3600], events

    pool = tmp_path / "pool.yaml"
    pool.write_text("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n"
                    "  disruption: {budgets: [{nodes: 10%, schedule: '0 0 31 2 *', duration: 1h}]}\n"
                    "  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default},"
                    " requirements: []}}\n")
    result = invoke_cli("budgets", str(pool), "--nodes", "3", "--at", "2026-12-08T00:00Z")
    assert result.exit_code == 0, result.output
    assert ("budget[0] nodes=10% schedule='0 0 31 2 *' duration=1h (never fires: no tick within 5 years; Karpenter's "
            "cron then answers its zero time, so the budget is always active)") in result.stdout
    assert result.stdout.splitlines()[-1].split() == ["2026-12-08T00:00:00Z", "1", "1", "1", "1", "budget[0]"]


def test_a_patch_cannot_rename_or_move_what_it_patches(tmp_path: Path) -> None:
    """A scenario patch setting ``metadata.name`` was valid, then doubled the Deployment's pods
    (the in-memory cluster stored the renamed copy under the old key) or, on a NodePool, ended in
    exit 1 naming no step. kube-apiserver refuses it (``checkName``): 400 BadRequest, in both."""
    scenario = _scenario(tmp_path, "{at: 1h, patch: {kind: Deployment, name: inflate, patch: {metadata: {name: renamed}}}}",
                         "{at: 2h, patch: {kind: NodePool, name: general-purpose, patch: {metadata: {name: other}}}}")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(scenario), "--set", "CLUSTER_NAME=demo")
        assert result.exit_code == 2, result.output
        assert [line for line in result.output.splitlines() if line.startswith("  - ")] == [
            f"  - {scenario}: steps[1].patch: 400 BadRequest: the name of the object (renamed) does not match the name on the URL (inflate)",
            f"  - {scenario}: steps[2].patch: 400 BadRequest: the name of the object (other) does not match the name on the URL "
            "(general-purpose)"], result.output


def test_the_default_namespace_cannot_be_deleted_and_a_namespace_no_step_applied_is_a_404(tmp_path: Path) -> None:
    """``delete: {kind: Namespace, name: default}`` was valid for ``validate`` and a 404 for ``simulate``;
    kube-apiserver forbids it (NamespaceLifecycle admission)."""
    namespace = tmp_path / "ns.yaml"
    namespace.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n")
    scenario = _scenario(tmp_path, f"{{at: 10m, apply: {namespace}}}", "{at: 30m, delete: {kind: Namespace, name: team}}",
                         "{at: 1h, delete: {kind: Namespace, name: default}}", "{at: 2h, delete: {kind: Namespace, name: gone}}")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(scenario), "--set", "CLUSTER_NAME=demo")
        assert result.exit_code == 2, result.output
        assert [line for line in result.output.splitlines() if line.startswith("  - ")] == [
            f'  - {scenario}: steps[3].delete: 403 Forbidden: namespaces "default" is forbidden: this namespace may not be deleted',
            f"  - {scenario}: steps[4].delete: 404 NotFound: Namespace/gone does not exist at 2h (no earlier step applies it)"]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_name_with_a_unicode_line_break_is_quoted_and_escaped(tmp_path: Path, separator: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"a{separator}b"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    (tmp_path / "pod.yaml").write_text(json.dumps(pod))
    result = invoke_cli("validate", str(tmp_path / "pod.yaml"))
    assert result.exit_code == 2 and separator not in result.output, result.output
    escaped = f"\\x{ord(separator):02x}" if ord(separator) <= 0xFF else f"\\u{ord(separator):04x}"
    assert f"doc 1 'Pod/a{escaped}b': metadata.name: " in result.output, result.output


def test_a_misspelt_scenario_kind_is_refused_not_ignored(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: karpy.sh/v1alpha1\nkind: scenario\nmetadata: {name: s}\nsteps: []\n")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(path))
        assert result.exit_code == 2, result.output
        assert 'doc 1 scenario/s: kind: no matches for kind "scenario" in version "karpy.sh/v1alpha1"; did you mean Scenario?' \
            in result.output


def test_an_unsupported_region_names_the_option() -> None:
    result = invoke_cli("simulate", "--region", "mars-1", str(GP))
    assert result.exit_code == 2
    assert "region 'mars-1' (--region) is not supported; use one of us-east-1, ap-northeast-2" in result.output


def test_worst_prices_agree_with_each_offering_checked_alone() -> None:
    """The repack's pricing reads the requirements once per claim (:func:`worst_prices`); it must
    give what checking every offering with ``Offering.compatible`` gives."""
    import random

    from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_RESERVATION_ID, LABEL_ZONE
    from karpy_core.cloudprovider.types import InstanceType, Offering
    from karpy_core.controllers.disruption.simulation import worst_prices
    from karpy_core.scheduling.requirements import Requirement, Requirements
    from karpy_core.scheduling.scheduler import PlannedNodeClaim

    rng = random.Random(22)
    zones, kinds = ["a", "b", "c"], ["on-demand", "spot", "reserved"]
    for _ in range(200):
        types = [InstanceType(name=f"t{i}", requirements=Requirements({}), capacity={"cpu": 1000},
                              offerings=[Offering(rng.choice(zones), ct, round(rng.random(), 3), rng.random() < 0.8,
                                                  reservation_id=(rng.choice(["r1", "r2"]) if ct == "reserved" else None))
                                         for ct in rng.choices(kinds, k=rng.randint(0, 5))])
                 for i in range(4)]
        reqs = Requirements({})
        if rng.random() < 0.7:
            reqs.add(Requirement(LABEL_ZONE, rng.random() < 0.3, frozenset(rng.sample(zones, 2))))
        if rng.random() < 0.7:
            reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset(rng.sample(kinds, 2))))
        if rng.random() < 0.3:
            reqs.add(Requirement(LABEL_RESERVATION_ID, False, frozenset({"r1"})))
        claim = PlannedNodeClaim(nodepool="p", template=None, pods=[], requirements=reqs,  # type: ignore[arg-type]
                                 instance_types=types, requests={}, hostname="h")
        expected = [max((o.price for o in it.offerings if o.available and o.compatible(reqs)), default=float("inf"))
                    for it in types]
        assert worst_prices(claim) == expected
