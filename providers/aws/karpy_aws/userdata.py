"""Node bootstrap user data per AMI family (what the instance runs to join the cluster).

* **AL2**: a MIME multi-part document; the user's parts (or plain script) first, then karpy's
  shell part calling ``/etc/eks/bootstrap.sh`` with the endpoint, CA, ``--max-pods`` and the
  kubelet's ``--node-labels``/``--register-with-taints``.
* **AL2023**: a MIME multi-part document; the user's parts first, then an
  ``application/node.eks.aws`` part holding a nodeadm ``NodeConfig`` (cluster name, API endpoint,
  CA, service CIDR, kubelet config and flags). nodeadm merges every NodeConfig part in order.
* **Bottlerocket**: TOML. The user's TOML is parsed and karpy's ``settings.kubernetes`` keys are
  merged under it (the user's values win, except cluster identity, which karpy owns).
* **Windows**: a ``<powershell>`` block running ``Start-EKSBootstrap.ps1`` after the user's script.
* **Custom**: the user's data, unchanged (karpy cannot know how that AMI bootstraps).

Source: Karpenter ``pkg/providers/amifamily/bootstrap/{eksbootstrap,nodeadm,bottlerocket,windows}.go``.
"""

from __future__ import annotations

import base64
import json
import tomllib
from dataclasses import dataclass, field
from email import message_from_string
from typing import Any

__all__ = ["BootstrapOptions", "render_user_data", "MIME_BOUNDARY"]

MIME_BOUNDARY = "//"


@dataclass(frozen=True)
class BootstrapOptions:
    """What a node needs to join: cluster identity plus the NodeClaim's labels/taints and kubelet
    settings. ``taints`` are ``key=value:Effect`` strings; ``ca_bundle`` is base64 PEM."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str = ""
    cluster_cidr: str = "10.100.0.0/16"
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[str, ...] = ()
    max_pods: int | None = None
    cluster_dns: tuple[str, ...] = ()
    kubelet: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    instance_store_raid0: bool = False


def _label_arg(opts: BootstrapOptions) -> str:
    return ",".join(f"{k}={v}" for k, v in opts.labels)


def _user_parts(user_data: str | None) -> list[tuple[str, str]]:
    """(content type, body) parts of the user's data: a MIME document is split, anything else is
    one ``text/x-shellscript`` part."""
    if not user_data:
        return []
    if user_data.lstrip().startswith("MIME-Version"):
        msg = message_from_string(user_data)
        if msg.is_multipart():
            return [(p.get_content_type(), str(p.get_payload())) for p in msg.get_payload()]  # type: ignore[union-attr]
        return [(msg.get_content_type(), str(msg.get_payload()))]
    return [("text/x-shellscript", user_data)]


def _mime(parts: list[tuple[str, str]]) -> str:
    out = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for ctype, body in parts:
        charset = '; charset="us-ascii"' if ctype.startswith("text/") else ""
        out += [f"--{MIME_BOUNDARY}", f"Content-Type: {ctype}{charset}", "", body.rstrip("\n"), ""]
    out.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(out) + "\n"


def _al2(opts: BootstrapOptions, user: str | None) -> str:
    extra = []
    if opts.labels:
        extra.append(f"--node-labels={_label_arg(opts)}")
    if opts.taints:
        extra.append(f"--register-with-taints={','.join(opts.taints)}")
    args = [f"/etc/eks/bootstrap.sh '{opts.cluster_name}' --apiserver-endpoint '{opts.cluster_endpoint}'"]
    if opts.ca_bundle:
        args.append(f"--b64-cluster-ca '{opts.ca_bundle}'")
    if opts.instance_store_raid0:
        args.append("--local-disks raid0")
    if opts.max_pods is not None:
        args.append(f"--use-max-pods false --kubelet-extra-args '--max-pods={opts.max_pods} {' '.join(extra)}'")
    elif extra:
        args.append(f"--kubelet-extra-args '{' '.join(extra)}'")
    if opts.cluster_dns:
        args.append(f"--dns-cluster-ip '{opts.cluster_dns[0]}'")
    script = "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n" + " \\\n".join(args)
    return _mime([*_user_parts(user), ("text/x-shellscript", script)])


def _al2023(opts: BootstrapOptions, user: str | None) -> str:
    kubelet_config: dict[str, Any] = dict(opts.kubelet)
    if opts.max_pods is not None:
        kubelet_config["maxPods"] = opts.max_pods
    if opts.cluster_dns:
        kubelet_config["clusterDNS"] = list(opts.cluster_dns)
    flags = []
    if opts.labels:
        flags.append(f"--node-labels={_label_arg(opts)}")
    if opts.taints:
        flags.append(f"--register-with-taints={','.join(opts.taints)}")
    spec: dict[str, Any] = {"cluster": {"name": opts.cluster_name, "apiServerEndpoint": opts.cluster_endpoint,
                                        "certificateAuthority": opts.ca_bundle, "cidr": opts.cluster_cidr}}
    spec["kubelet"] = {"config": kubelet_config, "flags": flags}
    if opts.instance_store_raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    # JSON is valid YAML; nodeadm reads either.
    node_config = json.dumps({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}, indent=2, sort_keys=True)
    return _mime([*_user_parts(user), ("application/node.eks.aws", node_config)])


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def _toml(doc: dict[str, Any], prefix: str = "") -> str:
    """A minimal TOML writer for nested tables of scalars/lists (Bottlerocket settings)."""
    lines = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    if scalars and prefix:
        lines.append(f"[{prefix}]")
    for k, v in scalars.items():
        lines.append(f"{json.dumps(k) if not k.replace('-', '').replace('_', '').isalnum() else k} = {_toml_value(v)}")
    if scalars:
        lines.append("")
    for k, v in tables.items():
        key = json.dumps(k) if not k.replace("-", "").replace("_", "").isalnum() else k
        lines.append(_toml(v, f"{prefix}.{key}" if prefix else key))
    return "\n".join(lines)


def _bottlerocket(opts: BootstrapOptions, user: str | None) -> str:
    doc: dict[str, Any] = tomllib.loads(user) if user else {}
    k8s = doc.setdefault("settings", {}).setdefault("kubernetes", {})
    k8s["cluster-name"] = opts.cluster_name
    k8s["api-server"] = opts.cluster_endpoint
    if opts.ca_bundle:
        k8s["cluster-certificate"] = opts.ca_bundle
    if opts.max_pods is not None:
        k8s.setdefault("max-pods", opts.max_pods)
    if opts.cluster_dns:
        k8s.setdefault("cluster-dns-ip", opts.cluster_dns[0])
    if opts.labels:
        k8s.setdefault("node-labels", {}).update(dict(opts.labels))
    if opts.taints:
        taints = k8s.setdefault("node-taints", {})
        for t in opts.taints:
            key, _, rest = t.partition("=")
            if ":" in key:  # key:Effect without value
                key, _, effect = key.partition(":")
                rest = f":{effect}"
            taints.setdefault(key, []).append(rest)
    return _toml(doc)


def _windows(opts: BootstrapOptions, user: str | None) -> str:
    body = (user or "").replace("<powershell>", "").replace("</powershell>", "").strip()
    extra = []
    if opts.labels:
        extra.append(f"--node-labels={_label_arg(opts)}")
    if opts.taints:
        extra.append(f"--register-with-taints={','.join(opts.taints)}")
    boot = (f"[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n"
            f"& $EKSBootstrapScriptFile -EKSClusterName '{opts.cluster_name}' -APIServerEndpoint '{opts.cluster_endpoint}'"
            + (f" -Base64ClusterCA '{opts.ca_bundle}'" if opts.ca_bundle else "")
            + (f" -KubeletExtraArgs '{' '.join(extra)}'" if extra else ""))
    return "<powershell>\n" + (body + "\n" if body else "") + boot + "\n</powershell>\n"


def render_user_data(ami_family: str, opts: BootstrapOptions, user_data: str | None) -> str:
    """The user data (plain text) for ``ami_family``; base64-encode it for the launch template
    with :func:`encode`. Raises ``tomllib.TOMLDecodeError`` on invalid Bottlerocket TOML."""
    if ami_family == "AL2":
        return _al2(opts, user_data)
    if ami_family == "AL2023":
        return _al2023(opts, user_data)
    if ami_family == "Bottlerocket":
        return _bottlerocket(opts, user_data)
    if ami_family.startswith("Windows"):
        return _windows(opts, user_data)
    return user_data or ""


def encode(text: str) -> str:
    """Base64 of the UTF-8 text (launch templates carry user data base64-encoded)."""
    return base64.b64encode(text.encode()).decode()
