"""What the plugin's jobs use of it: one frozen :class:`KakaoCloudDeps`.

Creating VMs (:mod:`karpy_kakaocloud.create`), the owned VMs (:mod:`karpy_kakaocloud.instances`),
the VMs karpy cannot prove it owns (:mod:`karpy_kakaocloud.unowned`) and the KCNodeClass/flavor
cache (:mod:`karpy_kakaocloud.catalog`) take this object, as the AWS plugin's functions take the
clients and settings they use, never the plugin itself. The plugin
(:meth:`KakaoCloudProvider.deps <karpy_kakaocloud.plugin.KakaoCloudProvider.deps>`) builds it once
the credentials, keyring and cluster identity are loaded, with the KubeClient it holds at that
moment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from karpy_core.errors import ConfigurationError
from karpy_kakaocloud import ownership

if TYPE_CHECKING:
    from karpy_core.kube.port import KubeClient
    from karpy_kakaocloud.client import KakaoCloudClient
    from karpy_kakaocloud.credentials import Keyring
    from karpy_kakaocloud.settings import KakaoCloudSettings

__all__ = ["DEFAULT_CA_FILE", "ClusterCA", "DepsLoader", "KakaoCloudDeps"]

DEFAULT_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
"""The service account's CA in a pod: the cluster CA nodes are told to trust by default."""


@dataclass(frozen=True, slots=True)
class ClusterCA:
    """Where the cluster CA (PEM) that new nodes trust comes from, in this order.

    Attributes:
        pem: the ``cluster_ca_pem`` option.
        file: the ``cluster_ca_file`` option (default :data:`DEFAULT_CA_FILE`).
        kube_client_pem: the CA karpy's own kube client verifies the API server with
            (:attr:`ProviderContext.cluster_ca_pem <karpy_core.cloudprovider.context.ProviderContext.cluster_ca_pem>`),
            used only when ``file`` is the default and cannot be read (Karpenter's
            ``CLUSTER_CA_BUNDLE`` default: "taken from the controller's TLS configuration").
    """

    pem: str | None = None
    file: str = DEFAULT_CA_FILE
    kube_client_pem: str | None = None


@dataclass(frozen=True, slots=True)
class KakaoCloudDeps:
    """The plugin's state its jobs read (see the module docstring).

    Attributes:
        client: the KakaoCloud OpenAPI client (credentials loaded).
        keyring: the ownership keyring.
        cluster_identity: the identity signed into ownership records (the KE cluster ``id``, or
            the ``cluster_uid`` option).
        cluster_name: the Kubernetes Engine cluster name.
        settings: endpoints, retries and delays (seconds).
        kube: the KubeClient (KCNodeClass, NodeClaims, bootstrap tokens, events), or None.
        clock: seconds since the epoch.
        sleep: waits that many seconds.
        max_pods: pods per node (kubelet ``--max-pods``).
        cluster_ca: where the cluster CA comes from.
    """

    client: KakaoCloudClient
    keyring: Keyring
    cluster_identity: str
    cluster_name: str
    settings: KakaoCloudSettings
    kube: KubeClient | None
    clock: Callable[[], float]
    sleep: Callable[[float], Awaitable[None]]
    max_pods: int
    cluster_ca: ClusterCA

    @property
    def cluster_tag(self) -> str:
        """The 6-hex-digit tag of :attr:`cluster_identity` in VM names and records."""
        return ownership.cluster_tag(self.cluster_identity)

    def need_kube(self, what: str) -> KubeClient:
        """The KubeClient (:func:`require_kube`)."""
        return require_kube(self.kube, what)


DepsLoader = Callable[[], Awaitable[KakaoCloudDeps]]
"""Loads the credentials, keyring and cluster identity once (the plugin's ``ensure``) and returns
the deps: create and the owned VMs call it where they need them, after the checks that need none."""


def require_kube(kube: KubeClient | None, what: str) -> KubeClient:
    """``kube``, the plugin's KubeClient.

    Raises:
        ConfigurationError: none was given (``what`` says what needed it).
    """
    if kube is None:
        raise ConfigurationError(f"kakaocloud provider: {what} needs a KubeClient (option kube, or bind_kube())")
    return kube
