"""What trial 9's fuzzer found karpy accepting that kube-apiserver (or Karpenter's CRD) refuses,
through ``karpy validate`` and ``karpy simulate`` as a user runs them: each input under
``tests/data/trial9/`` (copied from the fuzzer's findings) gives one problem line naming the
field, with the server's wording, and exit 2. The server's side of each is checked by
``tests/integration/test_trial9_apiserver.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.topology import parse_spread
from tests.cli import invoke_cli
from tests.test_input_classes import _problems

DATA = Path(__file__).parent / "data" / "trial9"


def _refused(name: str) -> str:
    """The one problem line of ``tests/data/trial9/<name>.yaml``, the same through validate and simulate."""
    seen = []
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(DATA / f"{name}.yaml"))
        assert result.exit_code == 2, (command, result.output)
        seen.append(_problems(result))
    assert seen[0] == seen[1], seen
    (line,) = seen[0]
    return line


@pytest.mark.parametrize(("name", "where", "problem"), [
    ("c0096_np_bad_key", "doc 1 NodePool/general-purpose: spec.template.spec: requirements[5].key",
     'Invalid value: "karpenter.sh/nodepool": label "karpenter.sh/nodepool" is restricted'),
    ("c0020_spread_bad", "doc 3 Deployment/inflate: spec.template.spec.topologySpreadConstraints[0].topologyKey",
     "Required value: can not be empty"),
    ("c0021_spread_dup", "doc 3 Deployment/inflate: spec.template.spec: topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
     'Duplicate value: "{kubernetes.io/hostname, DoNotSchedule}"'),
    ("c0068_affinity_bad_selector", "doc 3 Deployment/inflate: spec.template.spec.affinity.podAntiAffinity."
     "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]",
     "values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ("c0133_affinity_bad_selector", "doc 3 Deployment/inflate: spec.template.spec.affinity.podAntiAffinity."
     "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]",
     "values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ("c0080_selector_mismatch", "doc 3 Deployment/inflate: spec: selector", "empty selector is invalid for deployment"),
    ("c0288_selector_mismatch", "doc 3 Deployment/inflate: spec: selector", "empty selector is invalid for deployment"),
    ("c0103_hostports", "doc 3 Deployment/inflate: spec.template.spec: containers[0].ports[1].hostPort", 'Duplicate value: "TCP//80"'),
    ("c0170_toleration_bad", "doc 3 Deployment/inflate: spec.template.spec.tolerations[0]",
     "effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
])
def test_refused_with_the_servers_wording(name: str, where: str, problem: str) -> None:
    line = _refused(name)
    assert line.startswith(f"{DATA / name}.yaml {where}: "), line
    assert problem in line, line


EMPTY_TERM = "nodeSelectorTerms[0] has no matchExpressions or matchFields, and kube-scheduler matches no node with an empty term"


@pytest.mark.parametrize("name", ["c0055_pod_empty_terms", "c0088_pod_empty_terms"])
def test_an_empty_node_selector_term_leaves_the_pod_pending(name: str) -> None:
    """kube-apiserver accepts ``nodeSelectorTerms: [{}]`` (or ``[{matchExpressions: []}]``), but
    kube-scheduler's nodeaffinity matches no node with an empty term: nothing is launched.
    ``validate`` warns with the same reason (val48; it said nothing before)."""
    checked = invoke_cli("validate", str(DATA / f"{name}.yaml"))
    assert checked.exit_code == 0, checked.output
    warned = [line for line in checked.output.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and "valid (1 warning below)" in checked.output, checked.output
    assert warned[0].endswith(f" doc 3 Deployment/inflate: spec.template.spec.affinity.nodeAffinity: required node affinity "
                              f"matches no node: {EMPTY_TERM}; its pods stay pending (simulate reports it)"), warned
    result = invoke_cli("simulate", str(DATA / f"{name}.yaml"))
    assert result.exit_code == 0, result.output
    assert "0 nodes (0 launched by karpy)" in result.output
    pending = [line for line in result.output.splitlines() if line.startswith("  default/inflate-")]
    assert pending and all(line.endswith(f": required node affinity matches no node: {EMPTY_TERM}") for line in pending), pending


def test_an_empty_term_beside_a_matching_one_is_skipped() -> None:
    """Terms are ORed: an empty one matches nothing, the other still decides."""
    def pod(terms: list[dict[str, Any]]) -> dict[str, Any]:
        return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}], "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}}

    arch = {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
    info = pod_info(pod([{}, arch]))
    assert info.unsupported == ""
    assert [sorted(t.by_key) for t in info.requirement_terms] == [["kubernetes.io/arch"]]
    assert pod_info(pod([{"matchExpressions": []}, {}])).unsupported == (
        "required node affinity matches no node: nodeSelectorTerms[0], nodeSelectorTerms[1] have no matchExpressions or "
        "matchFields, and kube-scheduler matches no node with an empty term")


def test_an_empty_spread_key_never_reaches_a_reason() -> None:
    """A pod read without the loader (from a cluster, a test) with ``topologyKey: ""`` is refused at
    parse time, so no pending reason names a blank label."""
    with pytest.raises(ValueError, match=r"^topologySpreadConstraints\[1\]\.topologyKey: Required value: can not be empty$"):
        parse_spread([{"topologyKey": "kubernetes.io/hostname", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
                      {"topologyKey": "", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}], {})


def test_a_nodepools_self_contradicting_requirements_are_named_as_written() -> None:
    """``In [c6a.large]`` with ``NotIn [c6a.large]`` intersect to no value; the reason names both
    requirements, not the ``DoesNotExist`` the user never wrote."""
    result = invoke_cli("simulate", str(DATA / "c0003_np_impossible.yaml"))
    assert result.exit_code == 0, result.output
    pending = [line for line in result.output.splitlines() if line.startswith("  default/inflate-")]
    assert len(pending) == 3, result.output
    for line in pending:
        assert (": NodePool general-purpose: no instance type matches the NodePool requirement node.kubernetes.io/instance-type "
                "In [c6a.large] and node.kubernetes.io/instance-type NotIn [c6a.large] (no value meets all of them)") in line, line
        assert "DoesNotExist" not in line, line
