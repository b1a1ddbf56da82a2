"""karpy's generated CRDs on a real kube-apiserver: they install, published manifests are accepted
with the upstream defaults applied, and the API server and karpy's loader agree on what is valid.

The CRDs are left installed (other integration tests use them); every object made here has a
unique name and is deleted, and most verdicts are asked with ``dryRun=All`` so nothing is stored.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from karpy_aws.apis import EC2NodeClass
from karpy_kakaocloud.apis import KCNodeClass
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from karpy_core.apis import crds
from karpy_core.apis.base import KubeObject
from karpy_core.apis.kwoknodeclass import KWOKNodeClass
from karpy_core.apis.labels import is_restricted_label
from karpy_core.apis.loader import format_path, load_documents, load_text, substitute
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.apis.nodeoverlay import NodeOverlay
from karpy_core.apis.nodepool import NodePool
from karpy_core.errors import ManifestError

pytestmark = pytest.mark.devcluster

SPECS = {spec.model.KIND: spec for spec in crds.crd_specs()}
MODELS: dict[str, type[KubeObject]] = {
    "NodePool": NodePool,
    "NodeClaim": NodeClaim,
    "NodeOverlay": NodeOverlay,
    "EC2NodeClass": EC2NodeClass,
    "KCNodeClass": KCNodeClass,
    "KWOKNodeClass": KWOKNodeClass,
}
SUFFIX = "t" + uuid.uuid4().hex[:5]


# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def kubeconfig(devcluster: Any) -> Path:
    """The dev cluster's kubeconfig, with karpy's CRDs installed (idempotently) and established."""

    async def install() -> list[str]:
        api = await config.new_client_from_config(config_file=str(devcluster.kubeconfig))
        try:
            return await crds.install(api)
        finally:
            await api.close()

    names = asyncio.run(install())
    assert sorted(names) == sorted(
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "kcnodeclasses.karpenter.kakaocloud.com",
            "nodeoverlays.karpenter.sh",
            "capacitybuffers.autoscaling.x-k8s.io",
            "kwoknodeclasses.karpenter.kwok.sh",
        ]
    )
    return Path(devcluster.kubeconfig)


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api
    finally:
        await api.close()


def _target(body: dict[str, Any]) -> tuple[str, str, str]:
    spec = SPECS[body["kind"]]
    return spec.group, spec.version, spec.plural


async def create(api: client.ApiClient, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """POST with ``fieldValidation=Strict`` (kubectl's default), as kubectl create would."""
    group, version, plural = _target(body)
    options: dict[str, Any] = {"field_validation": "Strict", "dry_run": "All" if dry_run else None}  # None: not a dry run
    return await client.CustomObjectsApi(api).create_cluster_custom_object(group, version, plural, body, **options)


async def get(api: client.ApiClient, kind: str, name: str) -> dict[str, Any]:
    spec = SPECS[kind]
    return await client.CustomObjectsApi(api).get_cluster_custom_object(spec.group, spec.version, spec.plural, name)


async def delete(api: client.ApiClient, kind: str, name: str) -> None:
    spec = SPECS[kind]
    try:
        await client.CustomObjectsApi(api).delete_cluster_custom_object(spec.group, spec.version, spec.plural, name)
    except ApiException as exc:
        if exc.status != 404:
            raise


async def rejected(coro: Any) -> tuple[int, str]:
    """Await a call that must fail; returns (HTTP status, the Status message with every cause)."""
    try:
        result = await coro
    except ApiException as exc:
        assert exc.body is not None
        body = json.loads(exc.body)
        causes = [f"{c.get('field', '')}: {c.get('message', '')}" for c in (body.get("details") or {}).get("causes") or []]
        return exc.status, "\n".join([body.get("message", ""), *causes])
    pytest.fail(f"the API server accepted it: {json.dumps(result)[:500]}")
    raise AssertionError("unreachable")


async def server_verdict(api: client.ApiClient, body: dict[str, Any]) -> str | None:
    """None when the API server would store ``body`` (dry run), else its error text."""
    try:
        await create(api, body, dry_run=True)
    except ApiException as exc:
        assert exc.body is not None
        return f"{exc.status} {json.loads(exc.body).get('message')}"
    return None


def model_verdict(body: dict[str, Any]) -> str | None:
    """None when karpy's model accepts ``body`` the way the loader reads it, else the errors."""
    try:
        MODELS[body["kind"]].model_validate(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        return "; ".join(f"{format_path(e['loc'])}: {e['msg']}" for e in exc.errors())
    return None


class _MergingLoader(yaml.SafeLoader):
    """Reads repeated mapping keys the way karpy's loader continues after reporting them: repeated
    mappings are merged, other repeated values keep the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            value = self.construct_object(value_node, deep=True)
            if isinstance(out.get(key), dict) and isinstance(value, dict):
                _merge(out[key], value)
            else:
                out[key] = value
        return out


def _merge(into: dict[Any, Any], extra: dict[Any, Any]) -> None:
    for key, value in extra.items():
        if isinstance(into.get(key), dict) and isinstance(value, dict):
            _merge(into[key], value)
        else:
            into[key] = value


def unique(body: dict[str, Any], tag: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["metadata"] = {**body.get("metadata", {}), "name": f"{body['metadata']['name']}-{tag}-{SUFFIX}"[:250]}
    return body


# --------------------------------------------------------------------------- base manifests


def nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "crd-test"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                }
            }
        },
    }


def ec2nodeclass() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "crd-test"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
        },
    }


def kcnodeclass() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.kakaocloud.com/v1alpha1",
        "kind": "KCNodeClass",
        "metadata": {"name": "crd-test"},
        "spec": {
            "subnetSelectorTerms": [{"id": "3f1c0a52-0000-4000-8000-000000000001"}],
            "securityGroupSelectorTerms": [{"id": "7a2b0a52-0000-4000-8000-000000000002"}],
            "rootVolume": {"sizeGiB": 50},
            "bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.34"},
        },
    }


def kwoknodeclass() -> dict[str, Any]:
    """Karpenter's kwok/README KWOKNodeClass: no spec at all."""
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "crd-test"}}


def nodeclaim() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "crd-test", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"], "minValues": 2},
            ],
            "resources": {"requests": {"cpu": "1500m", "memory": "2Gi", "pods": 3}},
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        },
    }


def nodeoverlay() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "crd-test"},
        "spec": {
            "weight": 10,
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
            "priceAdjustment": "-10%",
        },
    }


# --------------------------------------------------------------------------- installation


async def test_crds_are_established_with_names_and_columns(kube: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(kube)
    for spec in crds.crd_specs():
        # _preload_content=False: the raw aiohttp response, not the typed model
        response: Any = await ext.read_custom_resource_definition(f"{spec.plural}.{spec.group}", _preload_content=False)
        crd = json.loads(await response.text())
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
        assert crd["status"]["acceptedNames"]["kind"] == spec.model.KIND
        assert crd["status"]["acceptedNames"].get("shortNames", []) == list(spec.short_names)
        versions = crd["spec"]["versions"]
        assert [v["name"] for v in versions] == [*spec.also_served, spec.version]
        assert [v["name"] for v in versions if v["storage"]] == [spec.version]
        for version in versions:
            assert [c["name"] for c in version.get("additionalPrinterColumns", [])] == [c["name"] for c in spec.columns]


async def test_install_is_idempotent(kube: client.ApiClient) -> None:
    assert len(await crds.install(kube)) == len(crds.crd_specs())


# --------------------------------------------------------------------------- published manifests


def _published(examples_dir: Path) -> list[tuple[str, int, dict[str, Any], KubeObject]]:
    """(file, document index, raw document, what karpy's loader made of it) for every example."""
    out = []
    for path in sorted((examples_dir / "nodepools").glob("*.yaml")):
        text = substitute(path.read_text(), {"CLUSTER_NAME": "demo"})
        loaded = {(o.KIND, o.name): o for o in load_text(text, path.name).objects()}
        for index, doc in enumerate(d for d in yaml.safe_load_all(text) if d):
            out.append((path.name, index, doc, loaded[(doc["kind"], doc["metadata"]["name"])]))
    return out


async def test_published_examples_are_accepted_with_defaults(kube: client.ApiClient, examples_dir: Path) -> None:
    docs = _published(examples_dir)
    assert len(docs) >= 30 and {d["kind"] for _, _, d, _ in docs} == {"NodePool", "EC2NodeClass"}
    created: list[tuple[str, str]] = []
    failures: list[str] = []
    from_loader: Any  # NodePool or EC2NodeClass: kinds with a spec
    try:
        for file, index, doc, from_loader in docs:
            body = unique(doc, f"{Path(file).stem}-{index}")
            try:
                await create(kube, body)
            except ApiException as exc:
                failures.append(f"{file} doc {index + 1} {doc['kind']}/{doc['metadata']['name']}: {exc.status} {exc.body!r}")
                continue
            created.append((doc["kind"], body["metadata"]["name"]))
            stored = await get(kube, doc["kind"], body["metadata"]["name"])
            _check_defaults(doc, stored, f"{file} doc {index + 1}")
            # The server's object, read back through karpy's model, is what the loader produced.
            from_server: Any = MODELS[doc["kind"]].model_validate(stored, by_alias=True, by_name=False)
            assert from_server.spec == from_loader.spec, f"{file} doc {index + 1}"
    finally:
        for kind, name in created:
            await delete(kube, kind, name)
    assert failures == []


def _check_defaults(doc: dict[str, Any], stored: dict[str, Any], where: str) -> None:
    spec = stored["spec"]
    if doc["kind"] == "NodePool":
        template = doc["spec"]["template"]["spec"]
        if "expireAfter" not in template:
            assert spec["template"]["spec"]["expireAfter"] == "720h", where
        disruption = doc["spec"].get("disruption", {})
        if "consolidationPolicy" not in disruption:
            assert spec["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized", where
        if "consolidateAfter" not in disruption:
            assert spec["disruption"]["consolidateAfter"] == "0s", where
        if "budgets" not in disruption:
            assert spec["disruption"]["budgets"] == [{"nodes": "10%"}], where
    else:
        options = doc["spec"].get("metadataOptions", {})
        defaults = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}
        assert spec["metadataOptions"] == {**defaults, **options}, where


async def test_defaults_on_a_bare_nodepool_nodeclaim_and_nodeclasses(kube: client.ApiClient) -> None:
    stored = await create(kube, nodepool(), dry_run=True)
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert stored["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    stored = await create(kube, nodeclaim(), dry_run=True)
    assert stored["spec"]["expireAfter"] == "720h"
    stored = await create(kube, kcnodeclass(), dry_run=True)
    assert stored["spec"]["rootVolume"] == {"sizeGiB": 50, "deleteOnTermination": True}
    body = ec2nodeclass()
    body["spec"]["metadataOptions"] = {"httpPutResponseHopLimit": 2}
    stored = await create(kube, body, dry_run=True)
    assert stored["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 2,
        "httpTokens": "required",
    }


# --------------------------------------------------------------------------- the rejections users rely on


async def test_seed_000_as_published_is_rejected_naming_the_unknown_fields(kube: client.ApiClient, repo_dir: Path) -> None:
    path = repo_dir / "tests" / "data" / "seeds" / "000-nodepool-as-published.yaml"
    with pytest.raises(ManifestError) as loader_error:
        load_documents([path])
    assert "spec.cluster" in str(loader_error.value)
    # kubectl refuses the repeated `spec` itself; what a tool merging it would send still fails.
    (doc,) = [d for d in yaml.load_all(path.read_text(), Loader=_MergingLoader) if d]
    assert {"cluster", "name", "namespace", "template"} <= set(doc["spec"])
    status, message = await rejected(create(kube, unique(doc, "seed000"), dry_run=True))
    # Unknown fields under fieldValidation=Strict are a decoding error: 400 BadRequest, not 422.
    assert status == 400, message
    for field in ("spec.cluster", "spec.name", "spec.namespace"):
        assert f'unknown field "{field}"' in message


async def test_requirement_in_without_values_is_rejected_by_cel(kube: client.ApiClient) -> None:
    for requirement in ({"key": "kubernetes.io/os", "operator": "In"}, {"key": "kubernetes.io/os", "operator": "In", "values": []}):
        body = nodepool()
        body["spec"]["template"]["spec"]["requirements"].append(requirement)
        status, message = await rejected(create(kube, body, dry_run=True))
        assert status == 422
        assert "spec.template.spec.requirements[1].values" in message
        assert "requirements with operator 'In' must have a value defined" in message


async def test_kcnodeclass_root_volume_below_30_gib_is_rejected(kube: client.ApiClient) -> None:
    body = kcnodeclass()
    body["spec"]["rootVolume"]["sizeGiB"] = 20
    status, message = await rejected(create(kube, body, dry_run=True))
    assert status == 422 and "spec.rootVolume.sizeGiB" in message and "30" in message


async def test_nodeclaim_spec_is_immutable(kube: client.ApiClient) -> None:
    api = client.CustomObjectsApi(kube)
    body = unique(nodeclaim(), "immutable")
    name = body["metadata"]["name"]
    created = await create(kube, body)
    try:
        changed = copy.deepcopy(created)
        changed["spec"]["expireAfter"] = "24h"
        status, message = await rejected(
            api.replace_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", name, changed, field_validation="Strict")
        )
        assert status == 422 and "spec is immutable" in message
        # metadata and status may still change.
        created["metadata"]["labels"]["team"] = "a"
        updated = await api.replace_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", name, created)
        updated["status"] = {"nodeName": "node-1", "providerID": "kwok://node-1", "conditions": [{"type": "Launched", "status": "True"}]}
        stored = await api.replace_cluster_custom_object_status("karpenter.sh", "v1", "nodeclaims", name, updated)
        assert stored["status"]["providerID"] == "kwok://node-1"
        assert NodeClaim.model_validate(stored, by_alias=True, by_name=False).status.node_name == "node-1"
    finally:
        await delete(kube, "NodeClaim", name)


async def test_static_nodepool_cannot_switch_mode_and_scales_through_the_scale_subresource(kube: client.ApiClient) -> None:
    """Karpenter's transition rule (replicas set <-> unset is refused) and ``kubectl scale nodepool``
    (the ``scale`` subresource: spec.replicas, status.nodes)."""
    api = client.CustomObjectsApi(kube)
    static = unique(nodepool(), "static")
    static["spec"]["replicas"] = 2
    dynamic = unique(nodepool(), "dynamic")
    names = [static["metadata"]["name"], dynamic["metadata"]["name"]]
    created = await create(kube, static)
    plain = await create(kube, dynamic)
    try:
        changed = copy.deepcopy(created)
        del changed["spec"]["replicas"]
        status, message = await rejected(api.replace_cluster_custom_object("karpenter.sh", "v1", "nodepools", names[0], changed))
        assert status == 422 and "Cannot transition NodePool between static" in message
        plain["spec"]["replicas"] = 1
        status, message = await rejected(api.replace_cluster_custom_object("karpenter.sh", "v1", "nodepools", names[1], plain))
        assert status == 422 and "Cannot transition NodePool between static" in message
        # as `kubectl scale nodepool NAME --replicas=5` (the client sends a JSON patch to /scale)
        await api.patch_cluster_custom_object_scale("karpenter.sh", "v1", "nodepools", names[0],
                                                    [{"op": "replace", "path": "/spec/replicas", "value": 5}])
        stored = await get(kube, "NodePool", names[0])
        assert stored["spec"]["replicas"] == 5
        assert NodePool.model_validate(stored, by_alias=True, by_name=False).spec.replicas == 5
    finally:
        for name in names:
            await delete(kube, "NodePool", name)


async def test_ec2nodeclass_cannot_switch_between_role_and_instance_profile(kube: client.ApiClient) -> None:
    api = client.CustomObjectsApi(kube)
    body = unique(ec2nodeclass(), "role")
    name = body["metadata"]["name"]
    created = await create(kube, body)
    try:
        changed = copy.deepcopy(created)
        del changed["spec"]["role"]
        changed["spec"]["instanceProfile"] = "KarpenterNodeInstanceProfile-demo"
        status, message = await rejected(api.replace_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", name, changed))
        assert status == 422 and "changing from 'role' to 'instanceProfile'" in message
        changed = copy.deepcopy(created)
        changed["spec"]["role"] = "AnotherRole"  # a new role is fine: Karpenter makes a new profile
        await api.replace_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", name, changed)
    finally:
        await delete(kube, "EC2NodeClass", name)


# --------------------------------------------------------------------------- loader and API server agree


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting ``value`` at a dotted path (``[n]`` indexes lists; ``value`` None deletes)."""

    def apply(doc: dict[str, Any]) -> None:
        parts = path.replace("[", ".[").split(".")
        node: Any = doc
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
        last = parts[-1]
        if value is None:
            del node[last]
        elif last.startswith("["):
            node[int(last[1:-1])] = value
        else:
            node[last] = copy.deepcopy(value)

    return apply


def _requirement(req: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["spec"]["template"]["spec"]["requirements"].append(copy.deepcopy(req))


REQS = "spec.template.spec.requirements[1]"
# (id, base, mutation, field the loader and the API server must both name, or None when both accept)
CASES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], object], str | None]] = [
    # NodePool
    ("np-ok-base", nodepool, lambda d: None, None),
    ("np-bad-operator", nodepool, _requirement({"key": "kubernetes.io/os", "operator": "Equals", "values": ["linux"]}), f"{REQS}.operator"),
    (
        "np-minvalues-gt-values",
        nodepool,
        _requirement({"key": "example.com/x", "operator": "In", "values": ["a"], "minValues": 2}),
        f"{REQS}.minValues",
    ),
    ("np-minvalues-ok", nodepool, _requirement({"key": "example.com/x", "operator": "In", "values": ["a", "b"], "minValues": 2}), None),
    (
        "np-minvalues-exists-ok",
        nodepool,
        _requirement({"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 5}),
        None,
    ),
    ("np-minvalues-51", nodepool, _requirement({"key": "example.com/x", "operator": "Exists", "minValues": 51}), f"{REQS}.minValues"),
    ("np-restricted-karpenter", nodepool, _requirement({"key": "karpenter.sh/custom", "operator": "Exists"}), f"{REQS}.key"),
    ("np-restricted-hostname", nodepool, _requirement({"key": "kubernetes.io/hostname", "operator": "Exists"}), f"{REQS}.key"),
    ("np-restricted-k8s-io", nodepool, _requirement({"key": "example.k8s.io/x", "operator": "Exists"}), f"{REQS}.key"),
    ("np-capacity-type-ok", nodepool, _requirement({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}), None),
    (
        "np-gt-not-integer",
        nodepool,
        _requirement({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["x"]}),
        f"{REQS}.values",
    ),
    (
        "np-gt-two-values",
        nodepool,
        _requirement({"key": "karpenter.k8s.aws/instance-generation", "operator": "Lt", "values": ["1", "2"]}),
        f"{REQS}.values",
    ),
    (  # beyond int64: Karpenter's int() fails ("type conversion error"), karpy's rule too
        "np-gt-beyond-int64",
        nodepool,
        _requirement({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["9223372036854775808"]}),
        REQS,
    ),
    ("np-gt-int64-max-ok", nodepool,
     _requirement({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["9223372036854775807"]}), None),
    ("np-gte-ok", nodepool, _requirement({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["2"]}), None),
    ("np-bad-value", nodepool, _requirement({"key": "example.com/x", "operator": "In", "values": ["has space"]}), f"{REQS}.values"),
    (
        "np-bad-cron-3-fields",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "schedule": "* * *", "duration": "1h"}]}),
        "spec.disruption.budgets[0].schedule",
    ),
    (
        "np-bad-cron-6-fields",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "schedule": "0 0 0 * * *", "duration": "1h"}]}),
        "spec.disruption.budgets[0].schedule",
    ),
    (
        "np-bad-cron-minute-60",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "schedule": "60 * * * *", "duration": "1h"}]}),
        "spec.disruption.budgets[0].schedule",
    ),
    (
        "np-cron-names-ok",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "0", "schedule": "0 9 * * MON-fri", "duration": "8h", "reasons": ["Drifted"]}]}),
        None,
    ),
    (
        "np-cron-croniter-extras-ok",
        nodepool,
        _set(
            "spec.disruption",
            {"budgets": [{"nodes": "0", "schedule": "0 0 15W * ?", "duration": "1h30m"}, {"schedule": "0 0 * * 1#2", "duration": "30m"}]},
        ),
        None,
    ),
    (
        "np-schedule-without-duration",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "schedule": "@daily"}]}),
        "spec.disruption.budgets[0]",
    ),
    (
        "np-duration-seconds",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "schedule": "@daily", "duration": "30s"}]}),
        "spec.disruption.budgets[0].duration",
    ),
    ("np-budget-110pct", nodepool, _set("spec.disruption", {"budgets": [{"nodes": "110%"}]}), "spec.disruption.budgets[0].nodes"),
    (
        "np-budget-reason",
        nodepool,
        _set("spec.disruption", {"budgets": [{"nodes": "1", "reasons": ["Expired"]}]}),
        "spec.disruption.budgets[0].reasons[0]",
    ),
    ("np-policy", nodepool, _set("spec.disruption", {"consolidationPolicy": "WhenUnderutilized"}), "spec.disruption.consolidationPolicy"),
    ("np-balanced-never-ok", nodepool, _set("spec.disruption", {"consolidationPolicy": "Balanced", "consolidateAfter": "Never"}), None),
    ("np-expire-30d", nodepool, _set("spec.template.spec.expireAfter", "30d"), "spec.template.spec.expireAfter"),
    ("np-expire-int", nodepool, _set("spec.template.spec.expireAfter", 720), "spec.template.spec.expireAfter"),
    ("np-tgp-never", nodepool, _set("spec.template.spec.terminationGracePeriod", "Never"), "spec.template.spec.terminationGracePeriod"),
    (
        "np-label-hostname",
        nodepool,
        _set("spec.template.metadata", {"labels": {"kubernetes.io/hostname": "x"}}),
        "spec.template.metadata.labels",
    ),
    (
        "np-label-nodepool",
        nodepool,
        _set("spec.template.metadata", {"labels": {"karpenter.sh/nodepool": "x"}}),
        "spec.template.metadata.labels",
    ),
    ("np-label-bad-key", nodepool, _set("spec.template.metadata", {"labels": {"-bad": "x"}}), "spec.template.metadata.labels"),
    (
        "np-label-ok",
        nodepool,
        _set("spec.template.metadata", {"labels": {"team": "a", "karpenter.sh/capacity-type": "spot", "node.kubernetes.io/role": "x"}}),
        None,
    ),
    ("np-template-metadata-name", nodepool, _set("spec.template.metadata", {"name": "x"}), "spec.template.metadata.name"),
    ("np-weight-0", nodepool, _set("spec.weight", 0), "spec.weight"),
    ("np-weight-string", nodepool, _set("spec.weight", "10"), "spec.weight"),
    ("np-limits-bad", nodepool, _set("spec.limits", {"cpu": "lots"}), "spec.limits.cpu"),
    # static NodePools (spec.replicas): only limits.nodes, no weight (Karpenter nodepool.go XValidation)
    ("np-static-ok", nodepool, lambda d: (_set("spec.replicas", 2)(d), _set("spec.limits", {"nodes": "3"})(d)), None),
    ("np-static-weight", nodepool, lambda d: (_set("spec.replicas", 2)(d), _set("spec.weight", 10)(d)), "spec"),
    ("np-static-cpu-limit", nodepool, lambda d: (_set("spec.replicas", 2)(d), _set("spec.limits", {"cpu": "8", "nodes": "3"})(d)),
     "spec"),
    ("np-replicas-negative", nodepool, _set("spec.replicas", -1), "spec.replicas"),
    ("np-limits-ok", nodepool, _set("spec.limits", {"cpu": 1000, "memory": "1000Gi", "nodes": "10", "nvidia.com/gpu": 2}), None),
    ("np-group-with-version", nodepool, _set("spec.template.spec.nodeClassRef.group", "karpenter.k8s.aws/v1"),
     "spec.template.spec.nodeClassRef.group"),
    (
        "np-group-bad-version",
        nodepool,
        _set("spec.template.spec.nodeClassRef.group", "karpenter.k8s.aws/latest"),
        "spec.template.spec.nodeClassRef.group",
    ),
    ("np-noderef-missing", nodepool, _set("spec.template.spec.nodeClassRef", None), "spec.template.spec.nodeClassRef"),
    (
        "np-taint-effect",
        nodepool,
        _set("spec.template.spec.taints", [{"key": "dedicated", "effect": "NoWay"}]),
        "spec.template.spec.taints[0].effect",
    ),
    (
        "np-taint-key",
        nodepool,
        _set("spec.template.spec.taints", [{"key": "has space", "effect": "NoSchedule"}]),
        "spec.template.spec.taints[0].key",
    ),
    (
        "np-taints-ok",
        nodepool,
        _set("spec.template.spec.startupTaints", [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}]),
        None,
    ),
    ("np-unknown-field", nodepool, _set("spec.cluster", {"name": "eks"}), "spec.cluster"),
    ("np-snake-case", nodepool, _set("spec.template.spec.expire_after", "1h"), "spec.template.spec.expire_after"),
    # EC2NodeClass
    ("ec2-ok-base", ec2nodeclass, lambda d: None, None),
    ("ec2-role-and-profile", ec2nodeclass, _set("spec.instanceProfile", "p"), "spec"),
    ("ec2-neither", ec2nodeclass, _set("spec.role", None), "spec"),
    ("ec2-profile-ok", ec2nodeclass, lambda d: (d["spec"].pop("role"), d["spec"].update(instanceProfile="p")), None),
    (
        "ec2-alias-and-id-terms",
        ec2nodeclass,
        _set("spec.amiSelectorTerms", [{"alias": "al2023@latest"}, {"id": "ami-123"}]),
        "spec.amiSelectorTerms",
    ),
    (
        "ec2-alias-with-owner",
        ec2nodeclass,
        _set("spec.amiSelectorTerms", [{"alias": "al2023@latest", "owner": "self"}]),
        "spec.amiSelectorTerms[0]",
    ),
    (
        "ec2-id-with-name",
        ec2nodeclass,
        lambda d: d["spec"].update(amiFamily="AL2", amiSelectorTerms=[{"id": "ami-123", "name": "x"}]),
        "spec.amiSelectorTerms[0]",
    ),
    ("ec2-empty-term", ec2nodeclass, _set("spec.amiSelectorTerms", [{}]), "spec.amiSelectorTerms[0]"),
    ("ec2-no-terms", ec2nodeclass, _set("spec.amiSelectorTerms", []), "spec.amiSelectorTerms"),
    ("ec2-windows-pinned", ec2nodeclass, _set("spec.amiSelectorTerms", [{"alias": "windows2022@v1"}]), "spec.amiSelectorTerms[0].alias"),
    ("ec2-windows-latest-ok", ec2nodeclass, _set("spec.amiSelectorTerms", [{"alias": "windows2022@latest"}]), None),
    ("ec2-alias-family", ec2nodeclass, _set("spec.amiSelectorTerms", [{"alias": "ubuntu@latest"}]), "spec.amiSelectorTerms[0].alias"),
    ("ec2-alias-format", ec2nodeclass, _set("spec.amiSelectorTerms", [{"alias": "al2023"}]), "spec.amiSelectorTerms[0].alias"),
    ("ec2-alias-pinned-ok", ec2nodeclass, _set("spec.amiSelectorTerms", [{"alias": "al2023@v20240625"}]), None),
    ("ec2-family-required", ec2nodeclass, _set("spec.amiSelectorTerms", [{"id": "ami-123"}]), "spec"),
    ("ec2-family-mismatch", ec2nodeclass, _set("spec.amiFamily", "AL2"), "spec"),
    (
        "ec2-family-custom-ok",
        ec2nodeclass,
        lambda d: d["spec"].update(amiFamily="Custom", amiSelectorTerms=[{"alias": "bottlerocket@latest"}]),
        None,
    ),
    ("ec2-family-unknown", ec2nodeclass, _set("spec.amiFamily", "Ubuntu"), "spec.amiFamily"),
    (
        "ec2-subnet-id-and-tags",
        ec2nodeclass,
        _set("spec.subnetSelectorTerms", [{"id": "subnet-1", "tags": {"a": "b"}}]),
        "spec.subnetSelectorTerms[0]",
    ),
    ("ec2-subnet-bad-id", ec2nodeclass, _set("spec.subnetSelectorTerms", [{"id": "vpc-1"}]), "spec.subnetSelectorTerms[0].id"),
    ("ec2-subnet-empty-tag", ec2nodeclass, _set("spec.subnetSelectorTerms", [{"tags": {"a": ""}}]), "spec.subnetSelectorTerms[0].tags"),
    (
        "ec2-sg-name-and-tags",
        ec2nodeclass,
        _set("spec.securityGroupSelectorTerms", [{"name": "a", "tags": {"a": "b"}}]),
        "spec.securityGroupSelectorTerms[0]",
    ),
    ("ec2-sg-name-ok", ec2nodeclass, _set("spec.securityGroupSelectorTerms", [{"name": "default"}, {"id": "sg-0123"}]), None),
    ("ec2-tag-cluster", ec2nodeclass, _set("spec.tags", {"kubernetes.io/cluster/demo": "owned"}), "spec.tags"),
    ("ec2-tag-nodepool", ec2nodeclass, _set("spec.tags", {"karpenter.sh/nodepool": "x"}), "spec.tags"),
    ("ec2-tag-eks", ec2nodeclass, _set("spec.tags", {"eks:eks-cluster-name": "x"}), "spec.tags"),
    ("ec2-tags-ok", ec2nodeclass, _set("spec.tags", {"team": "a", "karpenter.sh/discovery": "demo"}), None),
    (
        "ec2-two-root-volumes",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}}] * 2),
        "spec.blockDeviceMappings",
    ),
    (
        "ec2-ebs-no-size",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]),
        "spec.blockDeviceMappings[0].ebs",
    ),
    (
        "ec2-ebs-size-mi",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Mi"}}]),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
    ),
    (
        "ec2-ebs-size-65t",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "65T"}}]),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
    ),
    (
        "ec2-ebs-size-int",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 20}}]),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
    ),
    (
        "ec2-ebs-ok",
        ec2nodeclass,
        _set(
            "spec.blockDeviceMappings",
            [
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {"volumeSize": "64T", "volumeType": "gp3", "iops": 3000, "encrypted": True, "kmsKeyID": "k"},
                },
                {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 200}},
            ],
        ),
        None,
    ),
    (
        "ec2-ebs-type",
        ec2nodeclass,
        _set("spec.blockDeviceMappings", [{"ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}]),
        "spec.blockDeviceMappings[0].ebs.volumeType",
    ),
    ("ec2-reserved-key", ec2nodeclass, _set("spec.kubelet", {"systemReserved": {"gpu": "1"}}), "spec.kubelet.systemReserved"),
    ("ec2-reserved-negative", ec2nodeclass, _set("spec.kubelet", {"kubeReserved": {"cpu": "-100m"}}), "spec.kubelet.kubeReserved"),
    ("ec2-eviction-value", ec2nodeclass, _set("spec.kubelet", {"evictionHard": {"memory.available": "lots"}}), "spec.kubelet.evictionHard"),
    ("ec2-eviction-soft-no-grace", ec2nodeclass, _set("spec.kubelet", {"evictionSoft": {"memory.available": "5%"}}), "spec.kubelet"),
    (
        "ec2-image-gc",
        ec2nodeclass,
        _set("spec.kubelet", {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
        "spec.kubelet",
    ),
    ("ec2-max-pods", ec2nodeclass, _set("spec.kubelet", {"maxPods": -1}), "spec.kubelet.maxPods"),
    (
        "ec2-kubelet-ok",
        ec2nodeclass,
        _set(
            "spec.kubelet",
            {
                "clusterDNS": ["10.100.0.10"],
                "maxPods": 110,
                "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": 1000},
                "evictionHard": {"memory.available": "5%", "nodefs.available": "10%", "imagefs.available": "100Mi"},
                "evictionSoft": {"memory.available": "500Mi"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
                "cpuCFSQuota": True,
            },
        ),
        None,
    ),
    (
        "ec2-hop-limit",
        ec2nodeclass,
        _set("spec.metadataOptions", {"httpPutResponseHopLimit": 65}),
        "spec.metadataOptions.httpPutResponseHopLimit",
    ),
    ("ec2-store-policy", ec2nodeclass, _set("spec.instanceStorePolicy", "RAID1"), "spec.instanceStorePolicy"),
    ("ec2-monitoring-string", ec2nodeclass, _set("spec.detailedMonitoring", "yes"), "spec.detailedMonitoring"),
    ("ec2-unknown-field", ec2nodeclass, _set("spec.userDatas", "x"), "spec.userDatas"),
    ("ec2-v114-fields-ok", ec2nodeclass, lambda d: d["spec"].update(
        networkInterfaces=[{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                           {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}],
        connectionTracking={"tcpEstablishedTimeout": 3600}, placementGroupSelector={"id": "pg-0abc"},
        cpuOptions={"nestedVirtualization": "enabled"}), None),
    ("ec2-conntrack-range", ec2nodeclass, _set("spec.connectionTracking", {"udpTimeout": 90}), "spec.connectionTracking.udpTimeout"),
    ("ec2-nic-no-primary", ec2nodeclass, _set("spec.networkInterfaces", [
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "interface"}]), "spec.networkInterfaces"),
    ("ec2-pg-both", ec2nodeclass, _set("spec.placementGroupSelector", {"name": "a", "id": "pg-1"}), "spec.placementGroupSelector"),
    ("ec2-cpu-options-value", ec2nodeclass, _set("spec.cpuOptions", {"nestedVirtualization": "on"}),
     "spec.cpuOptions.nestedVirtualization"),
    # KCNodeClass
    ("kc-ok-base", kcnodeclass, lambda d: None, None),
    ("kc-root-20", kcnodeclass, _set("spec.rootVolume.sizeGiB", 20), "spec.rootVolume.sizeGiB"),
    ("kc-root-string", kcnodeclass, _set("spec.rootVolume.sizeGiB", "50"), "spec.rootVolume.sizeGiB"),
    ("kc-version-patch", kcnodeclass, _set("spec.bootstrap.kubernetesVersion", "1.34.2"), "spec.bootstrap.kubernetesVersion"),
    ("kc-version-float", kcnodeclass, _set("spec.bootstrap.kubernetesVersion", 1.3), "spec.bootstrap.kubernetesVersion"),
    ("kc-mode", kcnodeclass, _set("spec.bootstrap.mode", "CloudInit"), "spec.bootstrap.mode"),
    ("kc-no-bootstrap", kcnodeclass, _set("spec.bootstrap", None), "spec.bootstrap"),
    ("kc-no-subnets", kcnodeclass, _set("spec.subnetSelectorTerms", []), "spec.subnetSelectorTerms"),
    ("kc-subnet-tags", kcnodeclass, _set("spec.subnetSelectorTerms", [{"tags": {"a": "b"}}]), "spec.subnetSelectorTerms[0]"),
    ("kc-key-short", kcnodeclass, _set("spec.keyName", "k"), "spec.keyName"),
    ("kc-key-ok", kcnodeclass, lambda d: d["spec"].update(keyName="my-key", tags={"team": "a"}), None),
    ("kc-keyring-field", kcnodeclass, _set("spec.activeKeyID", "k1"), "spec.activeKeyID"),
    # KWOKNodeClass
    ("kwok-ok-readme", kwoknodeclass, lambda d: None, None),
    ("kwok-ok-delay", kwoknodeclass, _set("spec.nodeRegistrationDelay", "1m30s"), None),
    ("kwok-delay-fraction", kwoknodeclass, _set("spec.nodeRegistrationDelay", "1.5s"), "spec.nodeRegistrationDelay"),
    ("kwok-delay-days", kwoknodeclass, _set("spec.nodeRegistrationDelay", "1d"), "spec.nodeRegistrationDelay"),
    ("kwok-unknown-field", kwoknodeclass, _set("spec.instanceTypes", ["a"]), "spec.instanceTypes"),
    # NodeClaim
    # NodeOverlay
    ("no-ok-base", nodeoverlay, lambda d: None, None),
    ("no-ok-capacity", nodeoverlay, _set("spec.capacity", {"hugepages-2Mi": "1Gi", "example.com/fpga": 2}), None),
    ("no-ok-capacity-type", nodeoverlay, _set("spec.requirements[0]", {"key": "karpenter.sh/capacity-type", "operator": "In",
                                                                       "values": ["spot"]}), None),
    ("no-both-prices", nodeoverlay, _set("spec.price", "5"), "spec"),
    ("no-bad-adjustment", nodeoverlay, _set("spec.priceAdjustment", "-150%"), "spec.priceAdjustment"),
    ("no-capacity-cpu", nodeoverlay, _set("spec.capacity", {"cpu": "1"}), "spec.capacity"),
    ("no-weight-high", nodeoverlay, _set("spec.weight", 10001), "spec.weight"),
    ("no-key-restricted", nodeoverlay, _set("spec.requirements[0].key", "karpenter.sh/foo"), "spec.requirements[0].key"),
    ("no-key-hostname", nodeoverlay, _set("spec.requirements[0].key", "kubernetes.io/hostname"), "spec.requirements[0].key"),
    ("no-notin-empty", nodeoverlay, _set("spec.requirements[0]", {"key": "example.com/x", "operator": "NotIn"}),
     "spec.requirements[0].values"),
    ("nc-ok-base", nodeclaim, lambda d: None, None),
    ("nc-minvalues", nodeclaim, _set("spec.requirements[1].minValues", 3), "spec.requirements[1].minValues"),
    ("nc-requests-bad", nodeclaim, _set("spec.resources.requests", {"cpu": "lots"}), "spec.resources.requests.cpu"),
]


@pytest.mark.parametrize(("case", "base", "mutate", "field"), CASES, ids=[c[0] for c in CASES])
async def test_loader_and_api_server_agree(
    kube: client.ApiClient, case: str, base: Callable[[], dict[str, Any]], mutate: Callable[[dict[str, Any]], None], field: str | None
) -> None:
    doc = base()
    mutate(doc)
    doc = unique(doc, case)
    server = await server_verdict(kube, doc)
    try:
        load_text(yaml.safe_dump(doc), f"{case}.yaml")
        loader = None
    except ManifestError as exc:
        loader = str(exc)
    if field is None:
        assert (loader, server) == (None, None)
        return
    assert loader is not None, f"the loader accepted it; the API server said {server}"
    assert server is not None, f"the API server accepted it; the loader said {loader}"
    assert f": {field}" in loader, loader
    assert field in server, server


LABEL_KEYS = [
    "example.com/team",
    "team",
    "kubernetes.io",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "kubernetes.io/hostname",
    "kubernetes.io/custom",
    "beta.kubernetes.io/arch",
    "node.kubernetes.io/instance-type",
    "node.kubernetes.io/anything",
    "node-restriction.kubernetes.io/team",
    "xnode.kubernetes.io/foo",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/rack",
    "k8s.io/x",
    "example.k8s.io/x",
    "kops.k8s.io/instancegroup",
    "a.kops.k8s.io/x",
    "karpenter.sh/capacity-type",
    "karpenter.sh/nodepool",
    "karpenter.sh/registered",
    "sub.karpenter.sh/x",
    "notkarpenter.sh/x",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/foo",
    "sub.karpenter.k8s.aws/foo",
    "karpenter.kakaocloud.com/flavor",
    "Example.com/x",
    "example.com/" + "x" * 63,
    "example.com/" + "x" * 64,
    "a" * 253 + "/x",
    "a" * 254 + "/x",
]


@pytest.mark.parametrize("key", LABEL_KEYS)
async def test_requirement_and_label_keys_agree(kube: client.ApiClient, key: str) -> None:
    """Restricted domains and key syntax: requirement keys and template label keys, both ways."""
    requirement = nodepool()
    requirement["spec"]["template"]["spec"]["requirements"].append({"key": key, "operator": "Exists"})
    label = nodepool()
    label["spec"]["template"]["metadata"] = {"labels": {key: "x"}}
    for doc, what in ((requirement, "requirement"), (label, "template label")):
        doc = unique(doc, "key")
        model, server = model_verdict(doc), await server_verdict(kube, doc)
        assert (model is None) == (server is None), f"{what} {key!r}: model {model!r}, API server {server!r}"
    if key not in ("example.com/" + "x" * 64, "a" * 254 + "/x", "Example.com/x", "kubernetes.io", "karpenter.sh/nodepool"):
        assert (model_verdict(unique(requirement, "key")) is None) == (not is_restricted_label(key))


SEED_VARIABLES = {
    "CLUSTER_NAME": "demo",
    "SUBNET_ID": "3f1c0a52-0000-4000-8000-000000000001",
    "WORKER_SECURITY_GROUP_ID": "7a2b0a52-0000-4000-8000-000000000002",
    "KUBERNETES_VERSION": "1.34",
}


async def test_every_seed_document_gets_the_same_verdict(kube: client.ApiClient, repo_dir: Path) -> None:
    """Every NodePool, NodeClaim, EC2NodeClass and KCNodeClass in the seeds, valid or not."""
    seen = 0
    disagreements = []
    for path in sorted((repo_dir / "tests" / "data" / "seeds").glob("*.yaml")):
        text = substitute(path.read_text(), SEED_VARIABLES)
        for index, doc in enumerate(yaml.load_all(text, Loader=_MergingLoader)):
            if not isinstance(doc, dict) or doc.get("kind") not in MODELS or doc.get("apiVersion") != MODELS[doc["kind"]].API_VERSION:
                continue
            seen += 1
            body = unique(doc, f"seed{index}")
            model, server = model_verdict(body), await server_verdict(kube, body)
            if (model is None) != (server is None):
                disagreements.append(f"{path.name} doc {index + 1}: model {model!r}, API server {server!r}")
    assert seen >= 6
    assert disagreements == []


async def test_capacitybuffer_v1alpha1_is_served_and_read_as_v1beta1(kube: client.ApiClient) -> None:
    """The version Karpenter's docs show (``autoscaling.x-k8s.io/v1alpha1``) is served by the same
    CRD with the same schema (a strict create, an unknown field refused) and read back at the
    stored v1beta1."""
    api = client.CustomObjectsApi(kube)
    body: dict[str, Any] = {"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityBuffer",
            "metadata": {"name": "docs-example", "namespace": "default"},
            "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity", "podTemplateRef": {"name": "web-buffer-template"},
                     "replicas": 5, "limits": {"cpu": "20", "memory": "40Gi"}}}
    try:
        await api.create_namespaced_custom_object("autoscaling.x-k8s.io", "v1alpha1", "default", "capacitybuffers", body,
                                                  field_validation="Strict")
        got = await api.get_namespaced_custom_object("autoscaling.x-k8s.io", "v1beta1", "default", "capacitybuffers", "docs-example")
        assert got["apiVersion"] == "autoscaling.x-k8s.io/v1beta1" and got["spec"]["replicas"] == 5
        bad = {**body, "metadata": {"name": "bad", "namespace": "default"}, "spec": {**body["spec"], "replicaz": 1}}
        with pytest.raises(ApiException) as err:
            await api.create_namespaced_custom_object("autoscaling.x-k8s.io", "v1alpha1", "default", "capacitybuffers", bad,
                                                      field_validation="Strict")
        assert "replicaz" in str(err.value.body)
    finally:
        try:
            await api.delete_namespaced_custom_object("autoscaling.x-k8s.io", "v1beta1", "default", "capacitybuffers", "docs-example")
        except ApiException:
            pass
