"""Parity with kubectl and the real kube-apiserver for the manifest-loader findings of trial 8's
fuzzer (yaml47).

* Merge keys (``<<``): kubectl converts YAML to JSON on its side with go-yaml v2's non-strict
  decoding (``sigs.k8s.io/yaml.YAMLToJSON``) and sends JSON, so a key a merge key sets again is
  not refused: the later value in go-yaml's order is kept. These cases run the ``kubectl`` on PATH
  (skipped without one) with ``create --dry-run=server`` and compare what it would create with what
  karpy loaded. The API server's own strict YAML decoding (a YAML body, not what kubectl sends)
  refuses such keys (``key "name" already set in map``): asserted too, so a change either side shows.
* An explicit ``!!timestamp`` and numbers past 64 bits: POSTed as YAML bodies (``dryRun=All``,
  ``fieldValidation=Strict``); go-yaml's reading is the same on both paths.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from karpy_core.apis.loader import load_text
from karpy_core.errors import ManifestError
from karpy_core.kube.client import AsyncKubeClient

pytestmark = pytest.mark.devcluster

KUBECTL = shutil.which("kubectl")


async def post_yaml(kube: AsyncKubeClient, collection: str, text: str) -> tuple[int, dict[str, Any]]:
    """POST ``text`` as ``application/yaml`` to ``collection`` (``dryRun=All``,
    ``fieldValidation=Strict``); the status and the decoded answer (the object or a Status)."""
    transport = kube.transport
    headers = {"Content-Type": "application/yaml", "Accept": "application/json"}
    auth = await transport.access.auth.header()
    if auth:
        headers["Authorization"] = auth
    session = transport._get_session()
    async with session.post(transport.access.server.rstrip("/") + collection, data=text.encode(), headers=headers,
                            params=[("dryRun", "All"), ("fieldValidation", "Strict")],
                            server_hostname=transport.access.tls_server_name) as resp:
        return resp.status, json.loads(await resp.read())


def kubectl_creates(kubeconfig: str, text: str) -> dict[str, Any]:
    """What ``kubectl create --dry-run=server -f -`` would create from ``text``."""
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-o", "json", "-f", "-"],
                          input=text, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


MERGE_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: merge47, namespace: default}
spec:
  containers:
    - &common {name: c, image: nginx}
    - {<<: *common, name: d, image: busybox}
    - {image: busybox, <<: *common, name: e}
    - <<: [{name: f, image: x}, *common]
"""
MERGE_CONFIGMAPS = {
    "merge-written-after": "metadata: {<<: {name: a}, name: merge-b, namespace: default}\n",
    "merge-written-before": "metadata: {name: merge-b, <<: {name: merge-a}, namespace: default}\n",
    "merge-list": "metadata:\n  <<: [{name: merge-a}, {name: merge-b}]\n  namespace: default\n",
}


@pytest.mark.skipif(KUBECTL is None, reason="no kubectl on PATH to compare with")
async def test_merged_containers_are_what_kubectl_creates(kube, devcluster):
    created = kubectl_creates(str(devcluster.kubeconfig), MERGE_POD)
    theirs = [(c["name"], c["image"]) for c in created["spec"]["containers"]]
    mine = [(c.name, c.image) for c in load_text(MERGE_POD, "m.yaml").pods[0].spec.containers]
    assert mine == theirs == [("c", "nginx"), ("d", "busybox"), ("e", "nginx"), ("f", "x")]
    status, answer = await post_yaml(kube, "/api/v1/namespaces/default/pods", MERGE_POD)
    assert status == 400 and 'key "name" already set in map' in answer["message"], answer


@pytest.mark.skipif(KUBECTL is None, reason="no kubectl on PATH to compare with")
@pytest.mark.parametrize("case", sorted(MERGE_CONFIGMAPS))
async def test_a_merged_name_is_the_one_kubectl_uses(kube, devcluster, case):
    text = "apiVersion: v1\nkind: ConfigMap\n" + MERGE_CONFIGMAPS[case] + "data: {k: v}\n"
    theirs = kubectl_creates(str(devcluster.kubeconfig), text)["metadata"]["name"]
    loaded = load_text(text, "m.yaml")
    assert [obj.metadata.name for obj in loaded.other] == [theirs], case
    assert bool(loaded.warnings) is (case == "merge-written-before"), loaded.warnings
    status, answer = await post_yaml(kube, "/api/v1/namespaces/default/configmaps", text)
    assert status == 400 and "already set in map" in answer["message"], answer


def _loader_problems(text: str) -> list[str]:
    try:
        load_text(text, "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return []


TIMESTAMPS = {  # value: what both store ("" when both refuse, in go-yaml's words)
    "2024-01-01": "2024-01-01",
    "2024-01-01T10:00:00Z": "2024-01-01T10:00:00Z",
    "2024-01-01 10:00:00.5": "2024-01-01 10:00:00.5",
    "abc": "",
    "2024-13-01": "",
    "2024-01-01T10:00:00": "",
    "12": "",
}


@pytest.mark.parametrize("value", sorted(TIMESTAMPS))
async def test_an_explicit_timestamp_is_read_as_go_yaml_reads_it(kube, value):
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ts47, namespace: default}}\ndata: {{k: !!timestamp {value}}}\n"
    status, answer = await post_yaml(kube, "/api/v1/namespaces/default/configmaps", text)
    mine = _loader_problems(text)
    if TIMESTAMPS[value]:
        assert status == 201 and answer["data"] == {"k": TIMESTAMPS[value]} and mine == [], (answer, mine)
        assert load_text(text, "in.yaml").other[0].model_dump()["data"] == answer["data"]
    else:
        phrase = "as a !!timestamp"
        assert status == 400 and phrase in answer["message"], answer
        (problem,) = mine
        words = answer["message"].split("yaml: ", 1)[1].split(" (", 1)[0]  # "cannot decode !!str `abc` as a !!timestamp"
        assert problem.endswith(f"data.k: line 4 column 11: {words}"), (problem, words)


NUMBERS = {  # replicas as written: what the API server keeps (None: both refuse)
    "123456789012345678901234567890": None,
    "-9223372036854775809": None,
    "18446744073709551616": None,
    "1e400": None,
    "2147483648": None,
    "3.0": 3,
}


@pytest.mark.parametrize("written", sorted(NUMBERS))
async def test_a_number_past_64_bits_is_refused_by_both_and_karpy_shows_its_digits(kube, written):
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: num47, namespace: default}\n"
            f"spec:\n  replicas: {written}\n  selector: {{matchLabels: {{a: b}}}}\n"
            "  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: x}]}\n")
    status, answer = await post_yaml(kube, "/apis/apps/v1/namespaces/default/deployments", text)
    mine = _loader_problems(text)
    if NUMBERS[written] is not None:
        assert status == 201 and answer["spec"]["replicas"] == NUMBERS[written] and mine == [], (answer, mine)
        assert load_text(text, "in.yaml").deployments[0].spec.replicas == NUMBERS[written]
        return
    assert status == 400 and "spec.replicas of type int32" in answer["message"], answer
    (problem,) = mine
    assert problem.startswith("in.yaml doc 1 Deployment/default/num47: spec.replicas: ") and written in problem, problem


async def test_a_whole_float_below_2_63_is_stored_with_go_s_digits(kube):
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: num47, namespace: default}\n"
            "spec: {terminationGracePeriodSeconds: 9.2e18, containers: [{name: c, image: x}]}\n")
    status, answer = await post_yaml(kube, "/api/v1/namespaces/default/pods", text)
    assert status == 201, answer
    stored = answer["spec"]["terminationGracePeriodSeconds"]
    assert stored == 9200000000000000000 == load_text(text, "in.yaml").pods[0].spec.termination_grace_period_seconds
