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
