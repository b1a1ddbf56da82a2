"""karpy's AWS provider: the ``karpenter.k8s.aws/v1`` EC2NodeClass API and the EC2 cloud provider.

This package module imports nothing; load ``karpy_aws.apis`` for the models (entry point
``karpy.apis: aws``) and the plugin module for the cloud provider (``karpy.cloudprovider: aws``).
"""
