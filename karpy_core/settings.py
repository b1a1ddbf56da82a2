"""The controller's settings: one pydantic-settings model, Karpenter's names.

Every Karpenter option (``pkg/operator/options/options.go`` in karpenter and in
karpenter-provider-aws) has a field here, read from its environment variable (``CLUSTER_NAME``)
or from its flag on ``karpy controller`` (``--cluster-name``); a flag wins over the environment,
the environment over the default. karpy's own options (``--cloud-provider``, ``--kwok``...) live
in the same model under ``KARPY_*`` variables.

Each Karpenter option is one of:

* implemented: it changes what karpy does (most of them);
* accepted: the default value, or a value whose effect karpy already has, is taken and has no
  further effect (e.g. ``MEMORY_LIMIT``: a Go GC setting; ``KARPENTER_SERVICE``: karpy runs no
  webhook); :data:`ACCEPTED` says why for each;
* refused: a value asking for something karpy does not do (``ENABLE_PROFILING=true``,
  a feature gate karpy does not implement set to true) is a :class:`~karpy_core.errors.ConfigurationError` naming
  the setting, never silently dropped.

:meth:`KarpySettings.controller_settings` and :meth:`KarpySettings.provider_options` turn the
model into what the operator and the cloud-provider plugin take (:class:`ControllerSettings`, with
its :class:`BatchSettings` and :class:`LeaderSettings`, defined here; the operator imports them);
nothing else reads the environment for these options.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from karpy_core.apis.durations import go_duration_seconds
from karpy_core.controllers.disruption.command import PIPELINE_DEPTH
from karpy_core.controllers.disruption.methods import DEFAULT_MIN_SAVINGS
from karpy_core.errors import ConfigurationError
from karpy_core.featuregates import AWS_GATES, FeatureGates, parse_feature_gates, parse_gate_map

__all__ = [
    "ACCEPTED",
    "BatchSettings",
    "ControllerSettings",
    "LeaderSettings",
    "FeatureGates",
    "KarpySettings",
    "load_settings",
    "parse_feature_gates",
    "SIMULATE_SETTINGS",
    "simulation_settings",
    "setting_names",
]




# ------------------------------------------------------------- what the operator is given
# (KarpySettings.controller_settings builds these from the environment and flags; tests and
# embedders build them directly. karpy_core.operator re-exports them under the same names.)
class BatchSettings(BaseModel):
    """Provisioning batch window (Karpenter ``BATCH_IDLE_DURATION``/``BATCH_MAX_DURATION``)."""

    idle_seconds: float = Field(1.0, gt=0, description="Seconds without a new pending pod that close the batch (default 1).")
    max_seconds: float = Field(10.0, gt=0, description="Longest batch, seconds from its first pod (default 10).")


class LeaderSettings(BaseModel):
    """Leader election on a coordination.k8s.io Lease (client-go defaults)."""

    enabled: bool = Field(True, description="Campaign for the Lease; off runs the controllers at once (single replica).")
    lease_name: str = Field("karpy-leader-election", description="Lease name.")
    namespace: str = Field("default", description="Lease namespace (the controller's own; SYSTEM_NAMESPACE).")
    lease_duration: float = Field(15.0, description="Seconds a lease lasts without renewal.")
    renew_deadline: float = Field(10.0, description="Seconds the leader tries to renew before giving up.")
    retry_period: float = Field(2.0, description="Seconds between attempts.")


class ControllerSettings(BaseModel):
    """Everything the controller is configured with, grouped."""

    cluster_name: str = Field("", description="Cluster name, passed to the cloud provider (tags, ownership).")
    batch: BatchSettings = Field(default_factory=BatchSettings)
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    health_port: int = Field(8081, description="Port for /healthz, /readyz and /metrics (0 = pick a free one).")
    health_host: str = Field("0.0.0.0", description="Interface for the health server.")
    metrics_port: int | None = Field(None, description="A separate port for /metrics (None: served on health_port too).")
    resync_seconds: float = Field(10.0, description="Each controller also runs this often without any change.")
    preference_policy: str = Field("Respect", description="Respect (relax preferences one at a time) or Ignore.")
    min_values_policy: str = Field("Strict", description="Strict or BestEffort (relax minValues and annotate the NodeClaim).")
    node_repair: bool = Field(True, description="Replace nodes failing the provider's repair policies (Karpenter's NodeRepair gate).")
    feature_gates: FeatureGates = Field(default_factory=FeatureGates,
                                        description="FEATURE_GATES (NodeRepair here is overridden by node_repair).")
    kube_client_qps: float = Field(200.0, gt=0, description="Sustained API requests per second (Karpenter KUBE_CLIENT_QPS).")
    kube_client_burst: int = Field(300, gt=0, description="Requests allowed at once above the QPS (KUBE_CLIENT_BURST).")
    consolidation_min_savings: float = Field(DEFAULT_MIN_SAVINGS, ge=0, lt=1, description=(
        "Fraction of the disrupted nodes' price a repack consolidation must save (KARPY_CONSOLIDATION_MIN_SAVINGS)."))
    disruption_pipeline_depth: int = Field(PIPELINE_DEPTH, ge=1, le=10, description=(
        "Decided disruption commands that may wait out the validation delay side by side (KARPY_DISRUPTION_PIPELINE_DEPTH)."))
    dry_run: bool = Field(False, description=(
        "Decide and report, write nothing (KARPY_DRY_RUN, --dry-run): no leader election, every API write and cloud "
        "create/delete withheld (karpy_core/kube/dryrun.py)."))
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
                          description="This replica's leader-election identity.")


# ----------------------------------------------------------------------------------- the model
def setting(default: Any, env: str | tuple[str, ...], flag: str, help: str, *, karpy: str = "") -> Any:
    """A settings field: ``env`` names (first: the documented one; the rest also read), the
    ``karpy controller`` flag, the help text and (``karpy``) how karpy differs from Karpenter."""
    names = (env,) if isinstance(env, str) else env
    return Field(default, validation_alias=AliasChoices(*names), description=help,
                 json_schema_extra={"env": list(names), "flag": flag, "karpy": karpy})


ACCEPTED: Mapping[str, str] = {
    "karpenter_service": "karpy runs no webhook, so there is no certificate to name",
    "memory_limit": "a Go GC soft limit in Karpenter; Python has no counterpart (set the container's limit)",
    "cpu_requests": "Karpenter sizes worker pools from it; karpy runs one asyncio loop",
    "disable_controller_warmup": "karpy fills its caches after winning the Lease (Karpenter's default, true)",
    "eks_control_plane": "karpy asks EKS DescribeCluster whenever CLUSTER_ENDPOINT is unset on AWS",
    "ignore_dra_requests": "karpy ignores DRA requests (Karpenter's default, true)",
    "log_error_output_paths": "where zap reports its own failures; Python's logging reports them on stderr",
}
"""Karpenter options karpy takes with no further effect, and why (README's settings table)."""


class KarpySettings(BaseSettings):
    """``karpy controller``'s settings (env and flags; see the module docstring).

    Raises (on construction):
        pydantic.ValidationError: a value of the wrong type; :func:`load_settings` turns it into
            a one-line :class:`ConfigurationError` naming the setting.
    """

    model_config = SettingsConfigDict(case_sensitive=True, extra="forbid", populate_by_name=True,
                                      validate_default=True)

    # -- karpy's own
    cloud_provider: str = setting("", "KARPY_CLOUD_PROVIDER", "--cloud-provider",
                                  "installed cloud-provider plugin (karpy providers lists them)")
    kwok: bool = setting(False, "KARPY_KWOK", "--kwok", "simulated provider: launch instances as kwok-managed Nodes")
    region: str = setting("", ("KARPY_REGION",), "--region",
                          "cloud region; AWS: else AWS_REGION, AWS_DEFAULT_REGION, shared config, IMDS "
                          "(the SDK's order); simulated: us-east-1",
                          karpy="Karpenter takes the region from the AWS SDK only")
    instance_types: str = setting("", "KARPY_INSTANCE_TYPES", "--instance-types", "simulated provider: KWOK-format catalog file")
    health_host: str = setting("0.0.0.0", "KARPY_HEALTH_HOST", "--health-host", "address the health and metrics servers bind")
    log_debug_loggers: str = setting("", "KARPY_LOG_DEBUG_LOGGERS", "--log-debug-loggers",
                                     "third-party loggers to show: NAME (DEBUG) or NAME=LEVEL, comma separated")
    system_namespace: str = setting("", "SYSTEM_NAMESPACE", "--namespace",
                                    "the controller's namespace (default: the service account's, else default)")
    node_repair: bool | None = setting(None, "NODE_REPAIR", "--node-repair/--no-node-repair",
                                       "shorthand for FEATURE_GATES NodeRepair (both given: they must agree)")
    disruption_pipeline_depth: int = setting(
        PIPELINE_DEPTH, "KARPY_DISRUPTION_PIPELINE_DEPTH", "--disruption-pipeline-depth",
        "decided disruption commands that may wait out the 15 s validation delay side by side (1: one at a time); "
        "the 2nd and later are consolidations planned on the cluster as the earlier ones leave it, disjoint from them, "
        "each validated at its own due time",
        karpy="karpy's own: Karpenter validates one command at a time; with one node per NodePool at a time (the default "
              "10% budget) a scale-in is then a few serial 15 s validations per pool, so karpy lets commands of other "
              "pools wait beside it (one is dropped with the command it was planned behind)")
    dry_run: bool = setting(False, "KARPY_DRY_RUN", "--dry-run",
                            "decide and report (logs, events as log lines, karpy_dry_run_ metrics), write nothing: "
                            "no API write, no Lease (leader election off), no cloud create or delete",
                            karpy="karpy's own: Karpenter has no dry run")
    consolidation_min_savings: float = setting(
        0.1, "KARPY_CONSOLIDATION_MIN_SAVINGS", "--consolidation-min-savings",
        "fraction of the disrupted nodes' price a repack consolidation (N nodes -> M cheaper ones) must save, "
        "in [0, 1); a NodePool's karpy.sh/consolidation-min-savings annotation wins",
        karpy="karpy's own: Karpenter has no N -> M consolidation and no savings threshold")

    # -- karpenter core (pkg/operator/options/options.go)
    karpenter_service: str = setting("", "KARPENTER_SERVICE", "--karpenter-service", "webhook Service name",
                                     karpy="accepted, no effect: karpy runs no webhook")
    metrics_port: int = setting(8080, "METRICS_PORT", "--metrics-port",
                                "port of /metrics (0: a free port; equal to the health port: one server)")
    health_probe_port: int = setting(8081, "HEALTH_PROBE_PORT", "--health-probe-port",
                                     "port of /healthz and /readyz (which serve /metrics too); --health-port is an alias")
    kube_client_qps: int = setting(200, "KUBE_CLIENT_QPS", "--kube-client-qps", "sustained requests per second to the API server")
    kube_client_burst: int = setting(300, "KUBE_CLIENT_BURST", "--kube-client-burst", "requests allowed above the QPS at once")
    enable_profiling: bool = setting(False, "ENABLE_PROFILING", "--enable-profiling", "pprof on the metrics port",
                                     karpy="refused when true: no pprof in Python")
    disable_controller_warmup: bool = setting(True, "DISABLE_CONTROLLER_WARMUP", "--disable-controller-warmup",
                                              "fill caches before winning the Lease", karpy="false is refused")
    disable_leader_election: bool = setting(False, "DISABLE_LEADER_ELECTION", "--disable-leader-election",
                                            "run without the leader Lease (one replica only); --no-leader-elect is an alias")
    disable_cluster_state_observability: bool = setting(
        False, "DISABLE_CLUSTER_STATE_OBSERVABILITY", "--disable-cluster-state-observability",
        "turn off cluster-state metrics and events", karpy="refused when true")
    leader_election_name: str = setting("karpy-leader-election", ("LEADER_ELECTION_NAME", "KARPY_LEASE_NAME"),
                                        "--leader-election-name", "name of the leader Lease; --lease-name is an alias",
                                        karpy="default karpy-leader-election (Karpenter: karpenter-leader-election), so "
                                              "karpy and Karpenter never share a Lease")
    leader_election_namespace: str = setting("", "LEADER_ELECTION_NAMESPACE", "--leader-election-namespace",
                                             "namespace of the leader Lease (default: SYSTEM_NAMESPACE)")
    memory_limit: int = setting(-1, "MEMORY_LIMIT", "--memory-limit", "container memory limit, bytes",
                                karpy="accepted, no effect (Go GC setting)")
    cpu_requests: int = setting(1000, "CPU_REQUESTS", "--cpu-requests", "container CPU requests, millicores",
                                karpy="accepted, no effect")
    log_level: str = setting("info", "LOG_LEVEL", "--log-level", "debug, info, warning or error",
                             karpy="warning is accepted too")
    log_output_paths: str = setting("stdout", "LOG_OUTPUT_PATHS", "--log-output-paths",
                                    "where log lines go: comma separated stdout, stderr or file paths")
    log_error_output_paths: str = setting("stderr", "LOG_ERROR_OUTPUT_PATHS", "--log-error-output-paths",
                                          "where the logger reports its own failures", karpy="only stderr")
    batch_max_duration: float = setting(10.0, "BATCH_MAX_DURATION", "--batch-max-duration",
                                        "longest provisioning batch (Go duration)")
    batch_idle_duration: float = setting(1.0, "BATCH_IDLE_DURATION", "--batch-idle-duration",
                                         "quiet time that closes a batch (Go duration)")
    preference_policy: str = setting("Respect", "PREFERENCE_POLICY", "--preference-policy", "Respect or Ignore")
    min_values_policy: str = setting("Strict", "MIN_VALUES_POLICY", "--min-values-policy", "Strict or BestEffort")
    ignore_dra_requests: bool = setting(True, "IGNORE_DRA_REQUESTS", "--ignore-dra-requests",
                                        "ignore pods' DRA claims when scheduling", karpy="false is refused")
    feature_gates: str = setting("", "FEATURE_GATES", "--feature-gates",
                                 "Name=true or false, comma separated: NodeRepair, ReservedCapacity, SpotToSpotConsolidation, "
                                 "NodeOverlay, StaticCapacity, CapacityBuffer",
                                 karpy="NodeRepair defaults to true; unknown names are an error")
    scheduler_config: str = setting("", "SCHEDULER_CONFIG", "--scheduler-config",
                                    "kube-scheduler defaults to mirror", karpy="refused when set")

    # -- karpenter-provider-aws (pkg/operator/options/options.go)
    cluster_name: str = setting("", "CLUSTER_NAME", "--cluster-name", "the cluster's name (resource discovery, tags)")
    cluster_endpoint: str = setting("", "CLUSTER_ENDPOINT", "--cluster-endpoint",
                                    "API server URL for new nodes (AWS: else EKS DescribeCluster)")
    cluster_ca_bundle: str = setting("", "CLUSTER_CA_BUNDLE", "--cluster-ca-bundle",
                                     "base64 CA bundle for new nodes (AWS: else EKS DescribeCluster, else the kubeconfig's)")
    isolated_vpc: bool = setting(False, "ISOLATED_VPC", "--isolated-vpc", "no AWS Pricing API (static prices)")
    eks_control_plane: bool = setting(False, "EKS_CONTROL_PLANE", "--eks-control-plane", "the cluster runs on EKS",
                                      karpy="accepted, no effect")
    vm_memory_overhead_percent: float = setting(0.075, "VM_MEMORY_OVERHEAD_PERCENT", "--vm-memory-overhead-percent",
                                                "fraction of memory the hypervisor keeps")
    interruption_queue: str = setting("", "INTERRUPTION_QUEUE", "--interruption-queue",
                                      "SQS queue of EC2 interruption events (empty: interruption handling off)")
    reserved_enis: int = setting(0, "RESERVED_ENIS", "--reserved-enis", "ENIs left out of max-pods")
    disable_dry_run: bool = setting(False, "DISABLE_DRY_RUN", "--disable-dry-run", "skip EC2NodeClass dry-run validation")
    enable_zonal_shift: bool = setting(False, "ENABLE_ZONAL_SHIFT", "--enable-zonal-shift", "honour ARC zonal shifts",
                                       karpy="refused when true")
    ami_refresh_interval: float = setting(60.0, "AMI_REFRESH_INTERVAL", "--ami-refresh-interval", "AMI re-resolution period",
                                          karpy="karpy re-resolves AMIs and subnets together every 1m; other values are refused")
    subnet_refresh_interval: float = setting(60.0, "SUBNET_REFRESH_INTERVAL", "--subnet-refresh-interval",
                                             "subnet re-resolution period", karpy="as AMI_REFRESH_INTERVAL")
    aws_feature_gates: str = setting("", "AWS_FEATURE_GATES", "--aws-feature-gates", "NodeClassCEL=false",
                                     karpy="NodeClassCEL=true is refused")

    REFUSED: ClassVar[Mapping[str, tuple[Any, str]]] = {
        "enable_profiling": (False, "karpy serves no profiler"),
        "disable_controller_warmup": (True, "karpy fills its caches after winning the leader Lease"),
        "disable_cluster_state_observability": (False, "karpy always publishes its cluster-state metrics"),
        "ignore_dra_requests": (True, "karpy does not model DRA resource claims"),
        "scheduler_config": ("", "karpy does not mirror kube-scheduler default constraints"),
        "enable_zonal_shift": (False, "karpy does not read ARC zonal shifts"),
        "ami_refresh_interval": (60.0, "karpy re-resolves AMIs and subnets together every 1m"),
        "subnet_refresh_interval": (60.0, "karpy re-resolves AMIs and subnets together every 1m"),
        "log_error_output_paths": ("stderr", "Python's logging reports its own failures on stderr"),
    }
    """Options karpy takes only at the value shown (Karpenter's default) and why."""

    @field_validator("batch_max_duration", "batch_idle_duration", "ami_refresh_interval", "subnet_refresh_interval",
                     mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            return go_duration_seconds(value.strip())  # 1ns stays positive, as Go's flag.DurationVar reads it
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.lower() not in ("debug", "info", "warning", "warn", "error"):
            raise ValueError(f"{value!r} is not one of debug, info, warning, error")
        return value.lower()

    @field_validator("preference_policy")
    @classmethod
    def _preference(cls, value: str) -> str:
        if value not in ("Respect", "Ignore"):
            raise ValueError(f"{value!r} is not Respect or Ignore")
        return value

    @field_validator("min_values_policy")
    @classmethod
    def _min_values(cls, value: str) -> str:
        if value not in ("Strict", "BestEffort"):
            raise ValueError(f"{value!r} is not Strict or BestEffort")
        return value

    @field_validator("metrics_port", "health_probe_port")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 0 <= value <= 65535:
            raise ValueError(f"{value} is not a port (0-65535)")
        return value

    @field_validator("kube_client_qps", "kube_client_burst")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"{value} must be positive")
        return value

    @field_validator("vm_memory_overhead_percent", "consolidation_min_savings")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0 <= value < 1:
            raise ValueError(f"{value} is not a fraction in [0, 1)")
        return value

    @field_validator("disruption_pipeline_depth")
    @classmethod
    def _depth(cls, value: int) -> int:
        if not 1 <= value <= 10:
            raise ValueError(f"{value} is not between 1 and 10")
        return value

    @field_validator("reserved_enis")
    @classmethod
    def _non_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"{value} must not be negative")
        return value

    @field_validator("batch_max_duration", "batch_idle_duration")
    @classmethod
    def _positive_seconds(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be longer than 0s")
        return value

    @model_validator(mode="after")
    def _refuse_unsupported(self) -> KarpySettings:
        for name, (allowed, why) in self.REFUSED.items():
            value = getattr(self, name)
            if value != allowed:
                raise ConfigurationError(f"{describe(name, value)}: not supported: {why}")
        for item in (x.strip() for x in self.log_output_paths.split(",")):
            if not item:
                raise ConfigurationError(f"{describe('log_output_paths')}: empty path in {self.log_output_paths!r}")
        self.gates()  # parses FEATURE_GATES; raises on unknown or unsupported gates
        aws = parse_gate_map(self.aws_feature_gates, "AWS_FEATURE_GATES (--aws-feature-gates)", AWS_GATES)
        for name, value in aws.items():
            if value:
                raise ConfigurationError(f"AWS_FEATURE_GATES (--aws-feature-gates): {name}=true is not supported: karpy validates "
                                         "EC2NodeClasses with its own models, not CEL")
        if self.kwok and self.cloud_provider and self.cloud_provider != "simulated":
            raise ConfigurationError("--kwok works with --cloud-provider simulated only")
        return self

    # -- derived values
    def gates(self) -> FeatureGates:
        """The feature gates: ``FEATURE_GATES`` over karpy's defaults, with ``NODE_REPAIR`` /
        ``--[no-]node-repair`` setting ``NodeRepair`` when the gates text does not name it.

        Raises:
            ConfigurationError: see :func:`parse_feature_gates`; ``NODE_REPAIR`` contradicting an
                explicit ``NodeRepair`` gate.
        """
        gates, named = parse_feature_gates(self.feature_gates)
        if self.node_repair is not None:
            if "NodeRepair" in named and gates.NodeRepair != self.node_repair:
                raise ConfigurationError(f"{describe('node_repair', self.node_repair)} contradicts "
                                         f"FEATURE_GATES (--feature-gates) NodeRepair={_show(gates.NodeRepair)}; give one of them")
            gates = FeatureGates(**{**{f.name: getattr(gates, f.name) for f in fields(FeatureGates)},
                                    "NodeRepair": self.node_repair})
        return gates

    def namespace(self) -> str:
        """The leader Lease's namespace: ``LEADER_ELECTION_NAMESPACE``, else ``SYSTEM_NAMESPACE``,
        else the service account's namespace file, else ``default``."""
        if self.leader_election_namespace:
            return self.leader_election_namespace
        if self.system_namespace:
            return self.system_namespace
        path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        if os.path.exists(path):
            with open(path) as fh:
                return fh.read().strip() or "default"
        return "default"

    def controller_settings(self) -> ControllerSettings:
        """What the operator (:class:`~karpy_core.operator.Operator`) is given: these settings as a
        :class:`ControllerSettings`."""
        return ControllerSettings(
            cluster_name=self.cluster_name,
            batch=BatchSettings(idle_seconds=self.batch_idle_duration, max_seconds=self.batch_max_duration),
            leader=LeaderSettings(enabled=not self.disable_leader_election, namespace=self.namespace(),
                                  lease_name=self.leader_election_name),
            health_port=self.health_probe_port,
            health_host=self.health_host,
            metrics_port=self.metrics_port,
            preference_policy=self.preference_policy,
            min_values_policy=self.min_values_policy,
            node_repair=self.gates().NodeRepair,
            feature_gates=self.gates(),
            kube_client_qps=float(self.kube_client_qps),
            kube_client_burst=self.kube_client_burst,
            consolidation_min_savings=self.consolidation_min_savings,
            disruption_pipeline_depth=self.disruption_pipeline_depth,
            dry_run=self.dry_run,
        )

    def provider_options(self) -> dict[str, Any]:
        """The options for ``create_plugin`` of :attr:`cloud_provider` (the settings it reads;
        the kube client and kwok backend are added by the CLI at run time).

        Raises:
            ConfigurationError: a setting that only another provider reads was given (e.g.
                ``INTERRUPTION_QUEUE`` with ``--cloud-provider simulated``).
        """
        aws_only = {"cluster_endpoint": "", "interruption_queue": "", "reserved_enis": 0, "isolated_vpc": False,
                    "disable_dry_run": False, "vm_memory_overhead_percent": 0.075, "cluster_ca_bundle": ""}
        opts: dict[str, Any] = {}
        if self.cloud_provider == "aws":
            opts = {
                "cluster_name": self.cluster_name,
                "vm_memory_overhead_percent": self.vm_memory_overhead_percent,
                "reserved_enis": self.reserved_enis,
                "use_pricing_api": not self.isolated_vpc,
                "dry_run": not self.disable_dry_run,
            }
            if self.region:
                opts["region"] = self.region
            if self.cluster_endpoint:
                opts["cluster_endpoint"] = self.cluster_endpoint
            if self.cluster_ca_bundle:
                opts["ca_bundle"] = self.cluster_ca_bundle
            if self.interruption_queue:
                opts["interruption_queue"] = self.interruption_queue
            return opts
        if self.cloud_provider == "simulated":  # it models EC2 with the AWS catalog's rules
            for name in ("vm_memory_overhead_percent", "reserved_enis"):
                if getattr(self, name) != aws_only.pop(name):
                    opts[name] = getattr(self, name)
        for name, default in aws_only.items():
            if getattr(self, name) != default:
                raise ConfigurationError(f"{describe(name)} is read by the aws provider only, not by "
                                         f"--cloud-provider {self.cloud_provider}")
        if self.region:
            opts["region"] = self.region
        if self.cloud_provider == "simulated":
            if self.instance_types:
                opts["instance_types_file"] = self.instance_types
            return opts
        if self.instance_types:
            raise ConfigurationError(f"--instance-types is read by the simulated provider only, not by --cloud-provider "
                                     f"{self.cloud_provider}")
        if self.cluster_name:
            opts["cluster_name"] = self.cluster_name
        return opts

    def accepted_without_effect(self) -> list[str]:
        """Lines for the startup log: options given a non-default value that karpy takes with no
        effect (:data:`ACCEPTED`)."""
        out = []
        for name, why in ACCEPTED.items():
            info = type(self).model_fields[name]
            if getattr(self, name) != info.default:
                out.append(f"{describe(name, getattr(self, name))}: accepted with no effect: {why}")
        return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _extra(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


_UNSET = object()


def describe(name: str, value: Any = _UNSET) -> str:
    """``"CLUSTER_NAME (--cluster-name)"`` for field ``cluster_name``; with ``value``,
    ``"ENABLE_PROFILING=true (--enable-profiling)"``."""
    info = KarpySettings.model_fields[name]
    extra = _extra(info)
    env = extra.get("env") or [name.upper()]
    shown = "" if value is _UNSET else f"={_show(value)}"
    return f"{env[0]}{shown} ({extra.get('flag', '--' + name.replace('_', '-'))})"


def setting_names() -> list[tuple[str, str, str, Any, str, str]]:
    """``(field, env, flag, default, help, karpy difference)`` per setting, in declaration order
    (the README's settings table and its test)."""
    out = []
    for name, info in KarpySettings.model_fields.items():
        extra = _extra(info)
        out.append((name, str(extra["env"][0]), str(extra["flag"]), info.default, info.description or "", str(extra["karpy"])))
    return out


SIMULATE_SETTINGS: tuple[str, ...] = ("preference_policy", "min_values_policy", "batch_idle_duration", "batch_max_duration",
                                       "vm_memory_overhead_percent", "reserved_enis", "feature_gates")
"""The controller settings that change a decision, which ``karpy simulate`` takes as flags of the
same names (``--min-values-policy``...), parsed and checked by the same model."""


def simulation_settings(flags: Mapping[str, Any], *, cloud_provider: str = "simulated") -> KarpySettings:
    """The settings ``karpy simulate`` runs with: its flags (field name -> value, None: not given;
    only :data:`SIMULATE_SETTINGS`) over the defaults, read by :class:`KarpySettings` as the
    controller reads its own, so names, values and errors are the controller's. The environment
    is not read: a simulation depends on its command line alone.

    Raises:
        ConfigurationError: a value the controller would refuse, named by setting and flag.
    """
    unknown = sorted(set(flags) - set(SIMULATE_SETTINGS))
    if unknown:
        raise ConfigurationError(f"karpy simulate does not take setting(s) {', '.join(unknown)}")
    return load_settings({**flags, "cloud_provider": cloud_provider}, env={})


def load_settings(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> KarpySettings:
    """The settings from ``flags`` (field name -> value; None values are "not given") over the
    environment (``env``, default ``os.environ``) over the defaults.

    Raises:
        ConfigurationError: one line naming the setting (env and flag) and what is wrong.
    """
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    unknown = sorted(set(given) - set(KarpySettings.model_fields))
    if unknown:
        raise ConfigurationError(f"unknown setting(s): {', '.join(unknown)}")
    source = os.environ if env is None else env
    # only the names the model knows are read (case-sensitively), so e.g. a stray PATH never matters
    known_env = {n: source[n] for _, info in KarpySettings.model_fields.items()
                 for n in _extra(info)["env"] if n in source}
    try:
        return _from(given, known_env)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err.get("loc") or ("?",)
        field = str(loc[0])
        name = field if field not in KarpySettings.model_fields else describe(field)
        if field not in KarpySettings.model_fields:  # an alias: find its field
            for fname, info in KarpySettings.model_fields.items():
                if field in _extra(info)["env"]:
                    name = describe(fname)
        raw = given.get(field, known_env.get(field, err.get("input")))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("error"), ConfigurationError):
            raise ctx["error"] from None
        shown = _shown(raw)
        plain = _PLAIN_REASONS.get(str(err.get("type")))
        if plain:
            raise ConfigurationError(f"{name}: {shown} {plain}") from None
        # the value once, quoted as the CLI's other errors quote it: text in quotes, a number bare
        raise ConfigurationError(f"{name}: {msg}" if shown in msg else f"{name}: {msg}, not {shown}") from None


_PLAIN_REASONS = {"float_parsing": "is not a number", "float_type": "is not a number",
                  "int_parsing": "is not a whole number", "int_type": "is not a whole number",
                  "int_from_float": "is not a whole number", "bool_parsing": "is not true or false",
                  "bool_type": "is not true or false"}
"""pydantic's error type -> the words a setting's error uses for it (``'abc' is not a number``
where pydantic says "Input should be a valid number, unable to parse string as a number")."""

_PLAIN_BY_PYDANTIC_TEXT = (("Input should be a valid number", "is not a number"),
                           ("Input should be a valid integer", "is not a whole number"),
                           ("Input should be a valid boolean", "is not true or false"))


def option_error(flag: str, value: str, message: str) -> str | None:
    """The one-line error for a command-line ``value`` of option ``flag`` that did not parse, in the
    settings' own form (``VM_MEMORY_OVERHEAD_PERCENT (--vm-memory-overhead-percent): 'abc' is not a
    number``), from the parser's ``message`` (pydantic's wording, which typer passes on). None when
    ``message`` is not a number, integer or boolean parse error (the caller keeps its own)."""
    plain = next((words for text, words in _PLAIN_BY_PYDANTIC_TEXT if text in message), None)
    if plain is None:
        return None
    name = next((describe(field) for field, info in KarpySettings.model_fields.items()
                 if _extra(info).get("flag", "--" + field.replace("_", "-")) == flag), flag)
    return f"{name}: {_shown(value)} {plain}"


def _shown(value: Any) -> str:
    """``value`` as a one-line error shows it: a number (or text that reads as one: ``"11"``
    from the environment) bare, other text quoted (``'x'``)."""
    text = str(value)
    try:
        float(text)
    except ValueError:
        return repr(value) if isinstance(value, str) else text
    return text.strip()


def _from(given: Mapping[str, Any], env: Mapping[str, str]) -> KarpySettings:
    """Build the model from flags (init values) over ``env`` (a pydantic-settings source bound
    to the mapping, so tests need no process environment)."""
    from pydantic_settings import EnvSettingsSource, PydanticBaseSettingsSource

    class _Settings(KarpySettings):
        @classmethod
        def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                       env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                       file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
            source = EnvSettingsSource(settings_cls, case_sensitive=True)
            source.env_vars = dict(env)
            return init_settings, source

    return _Settings(**given)
