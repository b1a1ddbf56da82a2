"""New-user trial 14 findings 2-7 (issue 35, fix14b): an in-tree NodeClass read without its plugin
is still type-checked against its CRD's schema and the simulated cloud reads a malformed one
safely; an unrelated broken ``karpy.apis`` entry point does not stop ``karpy simulate``; a
Scenario's NodeClass applied at an earlier step is found; a patch moving a NodePool to static
mode names the CRD's transition rule; the conformance kit and ``simulate`` agree on an instance
type without offerings; ``--explain-node`` and the report's pod counts read right."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from karpy_core.apis.loader import load_text
from karpy_core.apis.registry import kind_registry
from karpy_core.apis.structural import TYPES_FILE, render
from karpy_core.cloudprovider.simulated import nodeclass_settings
from karpy_core.errors import ManifestError

REPO = Path(__file__).resolve().parents[1]

# karpy's CLI in a child process with both cloud plugins' entry points hidden (as after
# `pip install -e '.[sim]'`), and with `--broken` first, one more karpy.apis entry point whose
# module does not exist (trial 14's karpy-broken)
NO_PLUGINS = """
import importlib.metadata as md, sys
real = md.entry_points
PLUGINS = {"karpy-aws", "karpy-kakaocloud", "karpy_aws", "karpy_kakaocloud"}
BROKEN = sys.argv[1:2] == ["--broken"]
def entry_points(**kw):
    found = real(**kw)
    if kw.get("group") in ("karpy.apis", "karpy.cloudprovider"):
        found = [ep for ep in found if ep.dist is None or ep.dist.name not in PLUGINS]
        if BROKEN and kw.get("group") == "karpy.apis":
            found = [*found, md.EntryPoint("broken", "karpy_broken_absent.apis:api_kinds", "karpy.apis")]
    return found
md.entry_points = entry_points
if BROKEN:
    del sys.argv[1]
from karpy_core.cli import main
sys.argv = ["karpy", *sys.argv[1:]]
main()
"""


def _karpy(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_PLUGINS, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general-purpose}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
"""
INFLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 1
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]
"""


def _ec2nodeclass(spec: str) -> str:
    return f"apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: default}}\nspec: {spec}\n"


def _without_aws() -> dict:
    return {key: cls for key, cls in kind_registry().items() if not key[0].startswith(("karpenter.k8s.aws/", "karpenter.kakaocloud.com/"))}


# --------------------------------------------------------------------------- finding 2


@pytest.mark.parametrize("spec", ["abc", "5", "[]", "{amiSelectorTerms: x}", "{amiSelectorTerms: [7], kubelet: abc}",
                                  "{amiFamily: [AL2], kubelet: {maxPods: [1]}}"])
def test_the_simulated_cloud_reads_a_malformed_nodeclass_safely(spec: str) -> None:
    """``spec: abc`` made karpy_get_instance_types raise AttributeError (trial 14); what cannot be
    read is left out."""
    import yaml

    assert nodeclass_settings(yaml.safe_load(_ec2nodeclass(spec))) == {}


@pytest.mark.parametrize(("spec", "line"), [
    ("abc", "spec: must be a mapping; got 'abc'"),
    ("5", "spec: must be a mapping; got the number 5"),
    ("[]", "spec: must be a mapping; got a list"),
    ("{amiSelectorTerms: x}", "spec.amiSelectorTerms: must be a list; got 'x'"),
    ("{subnetSelectorTerms: 5}", "spec.subnetSelectorTerms: must be a list; got the number 5"),
    ("{tags: [1, 2]}", "spec.tags: must be a mapping; got a list"),
    ("{kubelet: abc}", "spec.kubelet: must be a mapping; got 'abc'"),
    ("{blockDeviceMappings: [7]}", "spec.blockDeviceMappings[0]: must be a mapping; got the number 7"),
    ("{kubelet: {maxPods: ten}}", "spec.kubelet.maxPods: must be an integer; got 'ten'"),
    ("{tags: {team: 5}}", "spec.tags.team: must be a string; got the number 5"),
])
def test_an_unvalidated_nodeclass_of_the_wrong_shape_is_refused(spec: str, line: str) -> None:
    """Without karpy-aws the EC2NodeClass is 'not validated', but its JSON types are checked
    against the CRD's schema as kube-apiserver checks them, one line naming the field."""
    with pytest.raises(ManifestError) as caught:
        load_text(NODEPOOL + "---\n" + _ec2nodeclass(spec), "in.yaml", registry=_without_aws())
    assert caught.value.problems == [f"in.yaml doc 2 EC2NodeClass/default: {line}"]


def test_a_well_typed_unvalidated_nodeclass_still_loads() -> None:
    spec = "{amiSelectorTerms: [{alias: al2023@latest}], role: r, tags: {a: b}, kubelet: {maxPods: 20}, metadataOptions: {httpPutResponseHopLimit: 2}}"
    loaded = load_text(NODEPOOL + "---\n" + _ec2nodeclass(spec), "in.yaml", registry=_without_aws())
    assert [o.kind for o in loaded.other] == ["EC2NodeClass"]
    assert any("not validated: its plugin, karpy-aws" in w for w in loaded.warnings)


def test_the_shipped_nodeclass_types_match_the_crds() -> None:
    """``karpy_core/data/nodeclass-types.json`` is what ``python -m karpy_core.apis.structural``
    writes from ``crds/`` (regenerate after ``python -m karpy_core.apis.crds``)."""
    shipped = (REPO / "karpy_core" / "data" / TYPES_FILE).read_text(encoding="utf-8")
    assert shipped == render(REPO / "crds")
    assert {"karpenter.k8s.aws/v1 EC2NodeClass", "karpenter.kakaocloud.com/v1alpha1 KCNodeClass"} <= set(json.loads(shipped))


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_validate_and_simulate_refuse_the_trial_repro_alike(tmp_path: Path, command: str) -> None:
    """Trial 14: validate said 'valid', simulate failed with the plugin's AttributeError."""
    (tmp_path / "in.yaml").write_text(NODEPOOL + "---\n" + _ec2nodeclass("abc") + "---\n" + INFLATE)
    done = _karpy(command, "in.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "in.yaml doc 2 EC2NodeClass/default: spec: must be a mapping; got 'abc'" in done.stderr
    assert "AttributeError" not in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- finding 3

BROKEN_LINE = "karpy.apis entry point 'broken' (karpy_broken_absent.apis:api_kinds) skipped: ModuleNotFoundError"


def test_an_unrelated_broken_entry_point_does_not_stop_the_readme_first_command() -> None:
    """Trial 14: ``karpy simulate`` exited 1 ('serves karpenter.k8s.aws EC2NodeClass, ... which no
    karpy.apis entry point modelled') when any karpy.apis entry point failed to import; the
    simulated cloud serves its in-tree kinds unvalidated, so the failure is its warning line."""
    done = _karpy("--broken", "simulate")
    assert done.returncode == 0, done.stderr
    assert "total: 2 nodes (2 launched by karpy), 0.9180 USD/hour" in done.stdout
    assert [line for line in done.stderr.splitlines() if BROKEN_LINE in line] == [f"warning: {BROKEN_LINE}: No module named 'karpy_broken_absent'"]


def test_validate_does_not_guess_an_in_tree_nodeclass_is_the_broken_plugins() -> None:
    """The EC2NodeClass has its own line naming karpy-aws; validate no longer adds 'objects of
    karpenter.k8s.aws/v1 EC2NodeClass may be its kinds: not validated, not simulated'."""
    done = _karpy("--broken", "validate", "examples/nodepools/general-purpose.yaml")
    assert done.returncode == 0, done.stderr
    assert "may be its kinds" not in done.stdout + done.stderr
    assert "not validated: its plugin, karpy-aws (providers/aws), is not installed" in done.stdout + done.stderr


# --------------------------------------------------------------------------- findings 4 and 5

EC2NODECLASS = _ec2nodeclass("{role: r, amiSelectorTerms: [{alias: al2023@latest}], subnetSelectorTerms: [{id: subnet-1}], "
                             "securityGroupSelectorTerms: [{id: sg-1}]}")
DYNAMIC_WITH_WEIGHT = NODEPOOL.replace("metadata: {name: general-purpose}\nspec:\n", "metadata: {name: weighted}\nspec:\n  weight: 10\n")


def _scenario_file(tmp_path: Path, steps: str) -> Path:
    (tmp_path / "class.yaml").write_text(EC2NODECLASS)
    (tmp_path / "pool.yaml").write_text(NODEPOOL)
    (tmp_path / "weighted.yaml").write_text(DYNAMIC_WITH_WEIGHT)
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nuntil: 1h\nsteps:\n" + steps)
    return path


def test_a_nodeclass_applied_at_an_earlier_step_is_found(tmp_path: Path) -> None:
    """Trial 14: 'nodeClassRef names karpenter.k8s.aws EC2NodeClass/default, which is not among the
    loaded manifests' for a NodePool applied after the step applying that EC2NodeClass."""
    from karpy_core.sim.scenario import load_scenario

    scenario = load_scenario(_scenario_file(tmp_path, "  - {at: 0s, apply: class.yaml}\n  - {at: 0s, apply: pool.yaml}\n"))
    assert not [w for w in scenario.warnings if "not among the loaded manifests" in w]


def test_a_nodeclass_applied_later_is_still_missing_when_the_nodepool_is_applied(tmp_path: Path) -> None:
    from karpy_core.sim.scenario import load_scenario

    scenario = load_scenario(_scenario_file(tmp_path, "  - {at: 0s, apply: pool.yaml}\n  - {at: 10m, apply: class.yaml}\n"))
    assert [w.rpartition(": ")[2] for w in scenario.warnings if "not among the loaded manifests" in w] == [
        "spec.template.spec.nodeClassRef names karpenter.k8s.aws EC2NodeClass/default, which is not among the loaded manifests"]



def test_a_patch_making_a_weighted_nodepool_static_names_the_transition_rule_first(tmp_path: Path) -> None:
    """Trial 14: only the weight rule was reported; kube-apiserver lists every failing rule of the
    CRD's spec, the transition rule first (Karpenter's nodepool.go order)."""
    from karpy_core.sim.scenario import load_scenario

    path = _scenario_file(tmp_path, "  - {at: 0s, apply: [class.yaml, weighted.yaml]}\n"
                                    "  - {at: 10m, patch: {kind: NodePool, name: weighted, patch: {spec: {replicas: 2}}}}\n")
    with pytest.raises(ManifestError) as caught:
        load_scenario(path)
    assert caught.value.problems == [
        f"{path}: steps[1].patch: NodePool weighted: Cannot transition NodePool between static (replicas set) and dynamic "
        "(replicas unset) provisioning modes",
        f"{path}: steps[1].patch: the patched NodePool would be invalid: NodePool/weighted: spec: 'weight' is not supported "
        "on static NodePools",
    ]


# --------------------------------------------------------------------------- finding 7


def test_explain_node_says_a_dearer_replacement_would_cost_more() -> None:
    """Trial 14: ``[repack-consolidation] keep: would save -0.0204 USD/h, below the threshold``."""
    from karpy_core.controllers.disruption.methods.repack import RepackOutcome

    dearer = RepackOutcome(group=(), problem=None, price=0.1, required=0.01, min_savings=0.1, replacement_price=0.1204)
    assert dearer.threshold_text() == "would cost 0.0204 USD/h more, so it saves nothing (threshold 0.1 x 0.1000 = 0.0100 USD/h)"
    same = RepackOutcome(group=(), problem=None, price=0.1, required=0.01, min_savings=0.1, replacement_price=0.1 + 1e-12)
    assert same.threshold_text() == "would save 0.0000 USD/h, below the threshold (0.1 x 0.1000 = 0.0100 USD/h)"
    cheaper = RepackOutcome(group=(), problem=None, price=0.4, required=0.12, min_savings=0.3, replacement_price=0.3)
    assert cheaper.threshold_text() == "would save 0.1000 USD/h, below the threshold (0.3 x 0.4000 = 0.1200 USD/h)"


def test_the_report_writes_counts_with_thousands_separators() -> None:
    """Trial 14: the report wrote ``20000 pods`` where the progress and errors write ``20,000``."""
    from karpy_core.sim.optimum import Reference
    from karpy_core.sim.report import PodReport, SimulationReport, render_text

    pods = [PodReport("default", f"p{i}", None if i < 1500 else "n", "pending" if i < 1500 else None) for i in range(20_000)]
    report = SimulationReport(provider={"inputs": "in.yaml"}, nodes=[], pods=pods, events=[],
                              workloads=[{"kind": "Deployment", "namespace": "default", "name": "inflate", "pods": 20_000}],
                              reference=Reference("lower bound", 700.0, {"c6a.large": 1_200}, 20_000, 1_001, note="LP bound"))
    lines = render_text(report).splitlines()
    assert "simulated: 20,000 pods from 1 workload (in.yaml)" in lines
    assert "  1 Deployment: inflate x20,000" in lines
    assert "pods: 18,500 bound, 1,500 pending" in lines
    assert any(line.startswith("lower bound: 700.0000 USD/hour for the 20,000 pods on launched nodes (1,200 x c6a.large) "
                               "(1,001 pods fit no instance type, left out)") for line in lines)


# --------------------------------------------------------------------------- finding 6


def test_simulate_warns_about_an_instance_type_without_offerings_once(caplog: pytest.LogCaptureFixture) -> None:
    """Trial 14: the conformance kit fails 'odd.ghost' without offerings while ``karpy simulate``
    accepted it silently; the run now says so in one warning line naming the plugin and the type
    (Karpenter skips such a type, so it is not an error)."""
    import dataclasses
    import logging

    from karpy_core.cloudprovider.calls import check_instance_types, instance_type_problem
    from tests.scheduling.helpers import make_type

    ghost = dataclasses.replace(make_type("odd.ghost", 2, 4), offerings=[])
    fine = make_type("odd.small", 2, 4)
    assert instance_type_problem([ghost, fine]) == ""  # not an error: the kit's own assertion stays
    with caplog.at_level(logging.WARNING, logger="karpy.cloudprovider"):
        warned: set[str] = set()  # the plugin's calls keep it
        check_instance_types("oddcloud-trial14", [fine, ghost], warned)
        check_instance_types("oddcloud-trial14", [ghost, fine], warned)  # the next pass: not said again
    assert [r.getMessage() for r in caplog.records] == [
        "cloud provider plugin 'oddcloud-trial14': karpy_get_instance_types returned instance type 'odd.ghost' without "
        "offerings: nothing can launch it (list unavailable ones with available=False; the conformance kit fails it)"]


def test_karpy_simulate_prints_the_no_offerings_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through ``karpy simulate --cloud-provider`` with a plugin one of whose types has no
    offerings: exit 0, one ``warning:`` line on stderr naming it."""
    import dataclasses

    from karpy_core.cloudprovider import hookimpl
    from tests.cli import invoke_cli
    from tests.plugins import brokenplugin

    brokenplugin.register(monkeypatch)
    real = brokenplugin.BrokenProvider.karpy_get_instance_types
    ghosts: dict[str, object] = {}

    async def with_a_ghost(self, nodepool):
        types = await real(self, nodepool)
        ghost = ghosts.setdefault("it", dataclasses.replace(types[0], name="odd.ghost", offerings=[]))
        return [*types, ghost]

    monkeypatch.setattr(brokenplugin.BrokenProvider, "karpy_get_instance_types", hookimpl(with_a_ghost))
    result = invoke_cli("simulate", "--cloud-provider", "broken", "examples/nodepools/general-purpose.yaml",
                        "examples/workloads/inflate.yaml")
    assert result.exit_code == 0, result.output
    assert [line for line in result.stderr.splitlines() if "odd.ghost" in line] == [
        "warning: cloud provider plugin 'broken': karpy_get_instance_types returned instance type 'odd.ghost' without "
        "offerings: nothing can launch it (list unavailable ones with available=False; the conformance kit fails it)"]
