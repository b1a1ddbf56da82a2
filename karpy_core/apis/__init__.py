"""API models (pydantic v2) for karpenter.sh/v1 and the Kubernetes kinds karpy reads."""
