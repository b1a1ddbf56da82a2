"""Manifests shared by the simulator tests."""

EC2NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
"""
"""The EC2NodeClass ``default`` that the tests' NodePools reference (a NodePool without its
NodeClass is not Ready and launches nothing)."""

RESERVED_NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, reserved]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""
"""The NodePool ``default`` of the reserved-capacity tests: m5.large, on-demand or reserved."""
