"""The EC2NodeClass CustomResourceDefinition's rules: what :mod:`karpy_aws.apis`'s pydantic
validators check, restated as OpenAPI patterns and CEL ``x-kubernetes-validations`` so the API
server refuses what the loader refuses (and accepts what it accepts).

:func:`karpy_aws.apis.api_kinds` (entry point ``karpy.apis: aws``) returns ``EC2NodeClass`` as a
:class:`~karpy_core.apis.crdspec.CRDSpec` whose overlays are :func:`ec2nodeclass_overlays`;
:mod:`karpy_core.apis.crds` renders it into ``crds/karpenter.k8s.aws_ec2nodeclasses.yaml`` without
importing this package. Behaviour reference (the YAML is not copied): aws/karpenter-provider-aws
``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml``.
"""

from __future__ import annotations

from typing import Any

from karpy_aws.apivalues import ALIAS_FAMILIES, EVICTION_SIGNALS, RESERVED_KEYS, RESTRICTED_TAG_KEYS
from karpy_core.apis.crds import (
    GO_DURATION_PATTERN,
    PERCENT_PATTERN,
    QUANTITY_PATTERN,
    cel_list,
    cel_rule,
    cel_string,
)
from karpy_core.apis.crdspec import Overlay

__all__ = ["ec2nodeclass_overlays"]


def _selector_tags() -> dict[str, Any]:
    return {
        "x-kubernetes-validations": [
            cel_rule(
                "self.all(k, k != '' && self[k] != '')",
                "empty tag keys or values aren't supported (use '*' to match any value)",
            )
        ]
    }


def ec2nodeclass_overlays() -> dict[str, Overlay]:
    """Model class name -> :class:`~karpy_core.apis.crdspec.Overlay` for the EC2NodeClass CRD:
    the rules of :mod:`karpy_aws.apis`'s validators as patterns and CEL (selector terms, AMI
    aliases, role/instanceProfile, restricted tags, kubelet keys, block devices, network
    interfaces), as karpenter-provider-aws's ``karpenter.k8s.aws_ec2nodeclasses.yaml`` has them."""
    reserved = list(RESERVED_KEYS)
    signals = list(EVICTION_SIGNALS)

    def reserved_map() -> dict[str, Any]:
        return {
            "maxProperties": len(reserved),
            "x-kubernetes-validations": [
                cel_rule(f"self.all(k, k in {cel_list(reserved)})", f"valid keys are {reserved}"),
                cel_rule(
                    "self.all(k, !isQuantity(string(self[k])) || !quantity(string(self[k])).isLessThan(quantity('0')))",
                    "cannot be a negative resource quantity",
                ),
            ],
        }

    def signal_map(values: dict[str, Any]) -> dict[str, Any]:
        return {
            "maxProperties": len(signals),
            "additionalProperties": values,
            "x-kubernetes-validations": [
                cel_rule(f"self.all(k, k in {cel_list(signals)})", f"valid keys are {signals}"),
            ],
        }

    eviction_value = {"pattern": rf"^({PERCENT_PATTERN}|{QUANTITY_PATTERN[1:-1]})$"}
    families = ", ".join(repr(f) for f in ALIAS_FAMILIES)
    tag_rules = [cel_rule("self.all(k, k != '')", "empty tag keys aren't supported")]
    tag_rules += [
        cel_rule(f"self.all(k, k != {cel_string(key)})", f"tag contains a restricted tag matching {key}")
        for key in RESTRICTED_TAG_KEYS
    ]
    tag_rules.append(
        cel_rule("self.all(k, !k.startsWith('kubernetes.io/cluster'))", "tag contains a restricted tag matching kubernetes.io/cluster/")
    )
    alias_families = cel_list(ALIAS_FAMILIES)
    return {
        "SubnetSelectorTerm": Overlay(
            properties={"tags": _selector_tags(), "id": {"pattern": "subnet-[0-9a-z]+"}},
            rules=[
                cel_rule("has(self.tags) || has(self.id)", "expected at least one, got none, ['tags', 'id']"),
                cel_rule(
                    "!has(self.id) || !has(self.tags)",
                    "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
                ),
            ],
        ),
        "SecurityGroupSelectorTerm": Overlay(
            properties={"tags": _selector_tags(), "id": {"pattern": "sg-[0-9a-z]+"}},
            rules=[
                cel_rule("has(self.tags) || has(self.id) || has(self.name)", "expected at least one, got none, ['tags', 'id', 'name']"),
                cel_rule(
                    "!has(self.id) || !(has(self.tags) || has(self.name))",
                    "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
                ),
                cel_rule(
                    "!has(self.name) || !has(self.tags)",
                    "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
                ),
            ],
        ),
        "CapacityReservationSelectorTerm": Overlay(
            properties={"tags": _selector_tags(), "id": {"pattern": "^cr-[0-9a-z]+$"}, "ownerID": {"pattern": "^[0-9]{12}$"}},
            rules=[
                cel_rule("has(self.tags) || has(self.id) || has(self.instanceMatchCriteria)",
                         "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
                cel_rule(
                    "!has(self.id) || !(has(self.tags) || has(self.ownerID) || has(self.instanceMatchCriteria))",
                    "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",
                ),
            ],
        ),
        "CapacityReservation": Overlay(
            properties={"id": {"pattern": "^cr-[0-9a-z]+$"}, "ownerID": {"pattern": "^[0-9]{12}$"}},
        ),
        "AMISelectorTerm": Overlay(
            properties={
                "alias": {
                    "maxLength": 30,
                    "x-kubernetes-validations": [
                        cel_rule(
                            "self.matches('^[a-zA-Z0-9]+@.+$')",
                            "'alias' is improperly formatted, must match the format 'family@version'",
                        ),
                        cel_rule(
                            f"!self.contains('@') || self.substring(0, self.indexOf('@')) in {alias_families}",
                            f"family is not supported, must be one of the following: {families}",
                        ),
                        cel_rule(
                            "!self.startsWith('windows') || self.matches('^[a-z0-9]+@latest$')",
                            "windows families may only specify version 'latest'",
                        ),
                    ],
                },
                "tags": _selector_tags(),
                "id": {"pattern": "ami-[0-9a-z]+"},
            },
            rules=[
                cel_rule(
                    "has(self.alias) || has(self.tags) || has(self.id) || has(self.name) || has(self.owner) || has(self.ssmParameter)",
                    "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                ),
                cel_rule(
                    "!has(self.id) || !(has(self.alias) || has(self.tags) || has(self.name) || has(self.owner))",
                    "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                ),
                cel_rule(
                    "!has(self.alias) || !(has(self.id) || has(self.tags) || has(self.name) || has(self.owner))",
                    "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                ),
            ],
        ),
        "KubeletConfiguration": Overlay(
            properties={
                "systemReserved": reserved_map(),
                "kubeReserved": reserved_map(),
                "evictionHard": signal_map(eviction_value),
                "evictionSoft": signal_map(eviction_value),
                "evictionSoftGracePeriod": signal_map({"pattern": GO_DURATION_PATTERN}),
            },
            rules=[
                cel_rule(
                    "!(has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent)) "
                    "|| self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent",
                    "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
                ),
                cel_rule(
                    "!has(self.evictionSoft) || self.evictionSoft.all(k, has(self.evictionSoftGracePeriod) "
                    "&& k in self.evictionSoftGracePeriod)",
                    "every evictionSoft key needs a matching evictionSoftGracePeriod",
                ),
                cel_rule(
                    "!has(self.evictionSoftGracePeriod) || self.evictionSoftGracePeriod.all(k, has(self.evictionSoft) "
                    "&& k in self.evictionSoft)",
                    "every evictionSoftGracePeriod key needs a matching evictionSoft",
                ),
            ],
        ),
        "BlockDevice": Overlay(
            replace={
                "volumeSize": {
                    "type": "string",
                    # "59604Gi" is the longest size at most 64T; the bound keeps the CEL rule cheap.
                    "maxLength": 16,
                    "pattern": "^[1-9][0-9]*(Gi|G|Ti|T)$",
                    "x-kubernetes-validations": [
                        cel_rule(
                            "!isQuantity(self) || !quantity(self).isGreaterThan(quantity('64T'))",
                            "volumeSize must be at most 64T",
                        )
                    ],
                }
            },
            rules=[cel_rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined")],
        ),
        "PlacementGroupSelector": Overlay(rules=[
            cel_rule("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
            cel_rule("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
        ]),
        "ConnectionTracking": Overlay(rules=[
            cel_rule("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                     "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"),
        ]),
        "EC2NodeClassSpec": Overlay(
            properties={
                "networkInterfaces": {
                    "x-kubernetes-validations": [
                        cel_rule("self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && "
                                 "x.interfaceType == 'interface')",
                                 "networkInterfaces must include a primary interface with interfaceType='interface'"),
                        cel_rule("self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex)"
                                 ".size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == "
                                 "y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                                 "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, "
                                 "and can have at most one efa device per network card"),
                    ]
                },
                "amiSelectorTerms": {
                    "x-kubernetes-validations": [
                        cel_rule(
                            "!self.exists(t, has(t.alias)) || self.size() == 1",
                            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
                        )
                    ]
                },
                "tags": {"x-kubernetes-validations": tag_rules},
                "blockDeviceMappings": {
                    "x-kubernetes-validations": [
                        cel_rule(
                            "self.filter(m, has(m.rootVolume) && m.rootVolume).size() <= 1",
                            "must have only one blockDeviceMappings with rootVolume",
                        )
                    ]
                },
            },
            rules=[
                cel_rule("has(self.role) != has(self.instanceProfile)", "must specify exactly one of ['role', 'instanceProfile']"),
                cel_rule(
                    "(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))"
                    " || (has(oldSelf.role) == has(oldSelf.instanceProfile))",
                    "changing from 'role' to 'instanceProfile' (or back) is not supported; delete and recreate the node class to change it",
                ),
                cel_rule(
                    "has(self.amiFamily) || self.amiSelectorTerms.exists(t, has(t.alias))",
                    "must specify amiFamily if amiSelectorTerms does not contain an alias",
                ),
                cel_rule(
                    "!has(self.amiFamily) || self.amiFamily == 'Custom' || self.amiSelectorTerms.all(t, !has(t.alias) "
                    "|| t.alias.startsWith(self.amiFamily.lowerAscii() + '@'))",
                    "if set, amiFamily must be 'Custom' or the family of the alias (al2023@... -> AL2023)",
                ),
            ],
        ),
    }
