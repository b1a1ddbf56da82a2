"""New-user trial 22 findings (issue 35), and the smaller ones left from trial 21.

A pod asking for ``memory: 1E`` was told its request was ``memory 976562500000000Ki``: byte counts
were written with the largest exact *binary* suffix only, and 10**18 is a multiple of 1Ki but not
of 1Mi. They now take the shorter of the exact binary and decimal forms."""

from __future__ import annotations

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
