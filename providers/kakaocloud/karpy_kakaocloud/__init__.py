"""karpy's KakaoCloud provider: the ``karpenter.kakaocloud.com/v1alpha1`` KCNodeClass API and the
KakaoCloud (BCS / Kubernetes Engine) cloud provider.

This package module imports nothing; load ``karpy_kakaocloud.apis`` for the models (entry point
``karpy.apis: kakaocloud``) and the plugin module for the cloud provider
(``karpy.cloudprovider: kakaocloud``).
"""
