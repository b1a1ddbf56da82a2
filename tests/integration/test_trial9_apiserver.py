"""Parity with the real kube-apiserver (and karpy's CRDs, which carry Karpenter v1.15.0's rules) for
what trial 9's fuzzer found karpy accepting. Each object is POSTed with ``dryRun=All`` and
``fieldValidation=Strict`` (the harness of test_trial3_apiserver.py) and the loader's answer
compared: both accept, or both refuse with a phrase both answers hold."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import workload

pytestmark = pytest.mark.devcluster


def _nodepool(*requirements: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "trial9"},
            "spec": {"template": {"spec": {
                "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}, *requirements],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}


def _spec(kind: str, **spec: Any) -> dict[str, Any]:
    obj = workload(kind)
    obj["spec"].update(copy.deepcopy(spec))
    return obj


HOSTNAME_SPREAD = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": "w"}}}


def _anti_affinity(expression: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": "kubernetes.io/hostname"}]}}}


NODEPOOL_KEY = 'label "karpenter.sh/nodepool" is restricted'
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "nodepool-requirement-nodepool-key": (_nodepool({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}),
                                          False, NODEPOOL_KEY),
    "nodepool-requirement-capacity-type": (_nodepool({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}),
                                           True, ""),
    # accepted: an empty term matches no node (kube-scheduler), which simulate reports as the pod's reason
    "empty-node-selector-term": (workload("Pod", pod={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}), True, ""),
    "empty-match-expressions": (workload("Deployment", pod={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]}}}}), True, ""),
    "spread-empty-topology-key": (workload("Deployment", pod={"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "w"}}}]}),
        False, "topologySpreadConstraints[0].topologyKey: Required value: can not be empty"),
    "spread-duplicate": (workload("Pod", pod={"topologySpreadConstraints": [HOSTNAME_SPREAD, HOSTNAME_SPREAD]}), False,
                         'topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: '
                         '"{kubernetes.io/hostname, DoNotSchedule}"'),
    "spread-same-key-other-policy": (workload("Pod", pod={"topologySpreadConstraints": [
        HOSTNAME_SPREAD, {**HOSTNAME_SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}]}), True, ""),
    "anti-affinity-in-without-values": (workload("Deployment", pod=_anti_affinity({"key": "app", "operator": "In", "values": []})),
                                        False, "values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    "anti-affinity-exists-with-values": (workload("Pod", pod=_anti_affinity({"key": "app", "operator": "Exists", "values": ["x"]})),
                                         False, "values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    "spread-selector-notin-without-values": (workload("Pod", pod={"topologySpreadConstraints": [{
        **HOSTNAME_SPREAD, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn"}]}}]}),
        False, "must be specified when `operator` is 'In' or 'NotIn'"),
    "anti-affinity-doesnotexist": (workload("Pod", pod=_anti_affinity({"key": "app", "operator": "DoesNotExist"})), True, ""),
    "deployment-empty-selector": (_spec("Deployment", selector={}), False, "empty selector is invalid for deployment"),
    "deployment-empty-match-labels": (_spec("Deployment", selector={"matchLabels": {}}), False,
                                      "empty selector is invalid for deployment"),
    "replicaset-empty-selector": (_spec("ReplicaSet", selector={}), False, "empty selector is invalid for deployment"),
    "statefulset-empty-selector": (_spec("StatefulSet", selector={"matchLabels": {}}), False,
                                   "empty selector is invalid for statefulset"),
    "daemonset-empty-selector": (_spec("DaemonSet", selector={}), False, "empty selector is invalid for daemonset"),
    "host-port-twice": (workload("Deployment", container={"ports": [{"containerPort": 80, "hostPort": 80},
                                                                   {"containerPort": 81, "hostPort": 80}]}),
                        False, 'containers[0].ports[1].hostPort: Duplicate value: "TCP//80"'),
    "host-port-two-containers": (workload("Pod", pod={"containers": [
        {"name": "a", "image": "pause", "ports": [{"containerPort": 80, "hostPort": 80}]},
        {"name": "b", "image": "pause", "ports": [{"containerPort": 81, "hostPort": 80}]}]}),
        False, 'containers[1].ports[0].hostPort: Duplicate value: "TCP//80"'),
    "host-port-two-host-ips": (workload("Pod", pod={"containers": [
        {"name": "a", "image": "pause", "ports": [{"containerPort": 80, "hostPort": 80}]},
        {"name": "b", "image": "pause", "ports": [{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}]}]}), True, ""),
    "host-port-tcp-and-udp": (workload("Pod", container={"ports": [{"containerPort": 53, "hostPort": 53},
                                                                   {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]}),
                              True, ""),
    "toleration-seconds-no-schedule": (workload("Deployment", pod={"tolerations": [
        {"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]}), False,
        "effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
    "toleration-seconds-no-effect": (workload("Pod", pod={"tolerations": [{"key": "a", "operator": "Exists", "tolerationSeconds": 5}]}),
                                     False, "effect must be 'NoExecute' when `tolerationSeconds` is set"),
    "toleration-seconds-no-execute": (workload("Pod", pod={"tolerations": [
        {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}), True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_the_trial9_findings(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])
