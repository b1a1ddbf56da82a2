"""The ``karpy`` command line (typer).

Commands:

* ``karpy simulate [FILES|DIRS...]`` - run karpy's controllers on an in-memory cluster against the
  ``simulated`` cloud (or any installed provider: ``--cloud-provider NAME --provider-option
  KEY=VALUE``) and report what they launched, why, and what it costs (USD/hour).
* ``karpy validate FILES...`` - load manifests and report every problem.
* ``karpy providers`` - list installed cloud-provider plugins.

Exit codes: 0 on success (even with pods left pending); 2 on invalid input or options (bad
manifests, unknown cloud provider, missing kubeconfig or ``--timeline`` directory), checked before
anything runs; 1 on a runtime failure (the API server cannot be reached, a file cannot be
written). Either way one ``error: ...`` line (or a list of problems) on stderr, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import re
from importlib import resources
from typing import Annotated, Any

import typer

from karpy_core.errors import ConfigurationError, KarpyError, KubeAPIError, KubeUnreachableError, ManifestError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="karpy: a Kubernetes node autoscaler compatible with Karpenter's APIs.")

DEFAULT_SCENARIO = "default-scenario.yaml"
DEFAULT_REGION = "us-east-1"
"""The ``simulated`` provider's region when ``--region`` is not given."""


def _parse_sets(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        if "=" not in v:
            raise ConfigurationError(f"--set expects VAR=value, got {v!r}")
        k, val = v.split("=", 1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k.strip()):
            raise ConfigurationError(f"--set {v!r}: {k.strip()!r} is not a placeholder name (letters, digits, '_'; as in ${{NAME}})")
        out[k.strip()] = val
    return out


def parse_provider_options(values: list[str]) -> dict[str, str]:
    """``--provider-option NAME=VALUE`` flags (``karpy simulate`` and ``karpy controller``) as a
    dict of strings; the provider's options model (:class:`~karpy_core.cloudprovider.options.ProviderOptions`)
    validates the names and turns the values into the types it declares.

    Raises:
        ConfigurationError: a flag without ``=``, a name that is not an option name (letters,
            digits, ``_``), or one name given twice.
    """
    out: dict[str, str] = {}
    for v in values:
        if "=" not in v:
            raise ConfigurationError(f"--provider-option expects NAME=value, got {v.split('=')[0]!r}")
        k, val = v.split("=", 1)
        k = k.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ConfigurationError(f"--provider-option {k!r}: not an option name (letters, digits, '_')")
        if k in out:
            raise ConfigurationError(f"--provider-option {k} is given twice")
        out[k] = val
    return out


def _merge_provider_options(flags: dict[str, Any], given: dict[str, str]) -> dict[str, Any]:
    """``flags`` (options set by dedicated flags such as ``--region``) plus ``given``
    (``--provider-option``).

    Raises:
        ConfigurationError: an option set both ways.
    """
    both = sorted(set(flags) & set(given))
    if both:
        raise ConfigurationError(f"--provider-option {both[0]} repeats an option already set by a dedicated flag (such as --region)")
    return {**flags, **given}


def _fail(exc: Exception, code: int | None = None) -> None:
    """Print ``exc`` on stderr (a ManifestError as its list of problems) and exit: ``code``, else
    1 for :class:`KubeUnreachableError` and ``OSError`` (runtime failures), else 2."""
    if isinstance(exc, ManifestError):
        typer.echo(f"error: invalid input ({len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''}):", err=True)
        for p in exc.problems:
            typer.echo(f"  - {p}", err=True)
    else:
        typer.echo(f"error: {exc}", err=True)
    if code is None:
        code = 1 if isinstance(exc, KubeUnreachableError | OSError) else 2
    raise typer.Exit(code=code)


TIMELINE_FORMATS = ("png", "svg", "pdf")
"""Image formats ``--timeline`` writes, chosen by the file's extension (matplotlib's Agg, SVG and
PDF backends); a path without an extension gets PNG, written at exactly that path."""


def _check_output_file(option: str, value: str) -> None:
    """Refuse, before a run, an output path whose directory does not exist or that is a directory.

    Raises:
        ConfigurationError: naming the option and the path.
    """
    from pathlib import Path

    path = Path(value)
    if path.is_dir():
        raise ConfigurationError(f"{option} {value}: is a directory; give a file name such as {path / 'timeline.png'}")
    parent = path.parent
    if not parent.is_dir():
        raise ConfigurationError(f"{option} {value}: directory {parent} does not exist")
    suffix = path.suffix.lower().lstrip(".")
    if suffix and suffix not in TIMELINE_FORMATS:
        raise ConfigurationError(f"{option} {value}: cannot write a .{suffix} image; use one of "
                                 f"{', '.join('.' + f for f in TIMELINE_FORMATS)} (no extension: PNG)")


def _check_provider_name(name: str) -> None:
    """Refuse an unknown ``--cloud-provider`` before connecting to anything.

    Raises:
        ConfigurationError: listing the installed providers.
    """
    from karpy_core.cloudprovider.provider import available_providers

    installed = available_providers()
    if name not in installed:
        raise ConfigurationError(f"--cloud-provider {name!r} is not installed; installed: {', '.join(installed) or 'none'}")


async def run_simulation(
    paths: list[str],
    *,
    variables: dict[str, str] | None = None,
    region: str | None = None,
    instance_types: str | None = None,
    preference_policy: str = "Respect",
    until: str | None = None,
    max_pods: int | None = None,
    cloud_provider: str = "simulated",
    provider_options: dict[str, Any] | None = None,
) -> Any:
    """Load manifests (or the embedded default), simulate, and return the
    :class:`~karpy_core.sim.report.SimulationReport`. A single ``kind: Scenario`` file runs over
    simulated time with disruption, until ``until`` (a Go duration; default the scenario's
    ``until`` or 24h) - see ``docs/scenarios.md``. ``max_pods`` caps the pods the workloads may
    ask for in all (default :data:`~karpy_core.sim.workloads.DEFAULT_MAX_PODS`).

    ``cloud_provider`` names the installed provider plugin to launch with (``simulated`` by
    default); ``provider_options`` are its options (``--provider-option``), given to its
    ``create_plugin`` with ``region`` and ``instance_types_file`` when those are set and ``kube``,
    the in-memory cluster (see :func:`_load_sim_provider`).

    Raises:
        ManifestError: invalid manifests, or workloads asking for more than ``max_pods`` pods.
        ConfigurationError: bad options (unknown provider or option, unknown region, unreadable catalog).
    """
    from karpy_core.apis.base import to_kube_dict
    from karpy_core.apis.loader import load_documents, load_text
    from karpy_core.sim.report import build_report
    from karpy_core.sim.scenario import is_scenario_file
    from karpy_core.sim.simulator import Simulator
    from karpy_core.sim.workloads import DEFAULT_MAX_PODS

    cap = DEFAULT_MAX_PODS if max_pods is None else max_pods
    if len(paths) == 1 and is_scenario_file(paths[0]):
        return await _run_scenario_file(paths[0], variables=variables, region=region, instance_types=instance_types,
                                        preference_policy=preference_policy, until=until, max_pods=cap,
                                        cloud_provider=cloud_provider, provider_options=provider_options)
    if paths:
        loaded = load_documents(paths, variables or {})
    else:
        text = resources.files("karpy_core.data").joinpath(DEFAULT_SCENARIO).read_text()
        loaded = load_text(text, f"<embedded {DEFAULT_SCENARIO}>", variables or {})
    _check_pod_cap(loaded, cap)
    provider, clock, cluster, shown_region = _load_sim_provider(cloud_provider, region, instance_types, provider_options)
    sim = Simulator(provider, clock=clock, cluster=cluster, preference_policy=preference_policy, max_pods=cap)
    from karpy_core.sim.simulator import is_simulated

    served = [o for o in loaded.other if is_simulated(o.api_version, o.kind)]  # e.g. PVCs, PVs, StorageClasses
    ignored = sim.apply([to_kube_dict(o) for o in [*loaded.objects(), *served]])
    loaded.other = [o for o in loaded.other if not is_simulated(o.api_version, o.kind)]
    await sim.run()
    pricing = getattr(provider.plugin, "pricing_note", None)
    report = await build_report(
        sim,
        provider_info={"name": provider.name, "region": shown_region, "pricing": pricing},
    )
    report.ignored = sorted(ignored + [o.ref() for o in loaded.other])
    report.warnings = list(loaded.warnings) + report.warnings
    return report


def _load_sim_provider(cloud_provider: str, region: str | None, instance_types: str | None,
                       provider_options: dict[str, Any] | None) -> tuple[Any, Any, Any, str | None]:
    """Load ``cloud_provider`` for a simulation: ``(CloudProvider, VirtualClock, InMemoryCluster,
    region shown in the report)``.

    Its options are ``region`` (``--region``; for ``simulated`` always, default ``us-east-1``),
    ``instance_types_file`` (``--instance-types``), ``provider_options`` and ``kube``: the
    in-memory cluster the simulation runs on, as ``karpy controller`` gives every provider its
    cluster, so a provider reads its NodeClasses there. Plugin NodeClass kinds are served by the
    cluster (:func:`~karpy_core.kube.port.serve_plugin_node_classes`).

    Raises:
        ConfigurationError: the provider is not installed, an option is set twice, or the provider
            rejects its options (unknown name, wrong type: the provider's options model says which).
    """
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.kube.port import serve_plugin_node_classes
    from karpy_core.utils.clock import VirtualClock

    _check_provider_name(cloud_provider)
    flags: dict[str, Any] = {}
    if region:
        flags["region"] = region
    if instance_types:
        flags["instance_types_file"] = instance_types
    options = _merge_provider_options(flags, provider_options or {})
    if cloud_provider == "simulated":
        options.setdefault("region", DEFAULT_REGION)
    serve_plugin_node_classes()
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    provider = load_provider(cloud_provider, {**options, "kube": cluster})
    shown = options.get("region") if not instance_types else None
    return provider, clock, cluster, shown if isinstance(shown, str) else None


def _check_pod_cap(loaded: Any, cap: int) -> None:
    """Refuse manifests whose workloads ask for more than ``cap`` pods in all, before simulating.

    Raises:
        ManifestError: naming the file, object and field asking for the most pods.
    """
    asks: list[tuple[int, str, Any]] = [(1, "metadata.name", p) for p in loaded.pods]
    for obj in [*loaded.deployments, *loaded.replicasets, *loaded.statefulsets]:
        asks.append((obj.spec.replicas, "spec.replicas", obj))
    for job in loaded.jobs:
        parallelism = job.spec.parallelism
        asks.append((min(parallelism, job.spec.completions) if job.spec.completions is not None else parallelism,
                     "spec.parallelism", job))
    total = sum(n for n, _, _ in asks)
    if total <= cap:
        return
    count, path, obj = max(asks, key=lambda a: a[0])
    raise ManifestError([f"{obj.source} {obj.ref()}: {path}: {count:,} pods; the simulation would hold {total:,} pods, "
                         f"more than its cap of {cap:,} (karpy simulate --max-pods)"])


async def _run_scenario_file(path: str, *, variables: dict[str, str] | None, region: str | None, instance_types: str | None,
                             preference_policy: str, until: str | None, max_pods: int, cloud_provider: str = "simulated",
                             provider_options: dict[str, Any] | None = None) -> Any:
    from karpy_core.apis.durations import parse_duration
    from karpy_core.sim.report import build_report
    from karpy_core.sim.scenario import load_scenario, run_scenario, until_problem
    from karpy_core.sim.simulator import Simulator

    scenario = load_scenario(path, variables)
    try:
        end = parse_duration(until).total_seconds() if until else (scenario.until or 24 * 3600.0)
    except ValueError as exc:
        raise ConfigurationError(f"--until: {exc}") from exc
    why = until_problem(end, until)
    if why:
        raise ConfigurationError(f"--until: {why}")
    provider, clock, cluster, shown_region = _load_sim_provider(cloud_provider, region, instance_types, provider_options)
    sim = Simulator(provider, clock=clock, cluster=cluster, preference_policy=preference_policy, disruption=True, max_pods=max_pods)
    await run_scenario(sim, scenario, end)
    pricing = getattr(provider.plugin, "pricing_note", None)
    return await build_report(
        sim, provider_info={"name": provider.name, "region": shown_region, "pricing": pricing,
                            "scenario": scenario.name, "until_seconds": end},
    )


def render_explain_node(report: Any, node: str) -> str:
    """Text for ``--explain-node``: the disruption decision log of one node."""
    lines = report.decisions.get(node)
    if not lines:
        known = ", ".join(sorted(report.decisions)[:10])
        return f"no disruption decisions recorded for node {node}" + (f" (nodes with decisions: {known})" if known else "")
    return "\n".join([f"disruption decisions for {node}:", *(f"  {line}" for line in lines)])


def render_explain(report: Any, target: str) -> str:
    """Text for ``--explain``: where the pod went, or why it is pending with per-NodePool detail."""
    key = target if "/" in target else f"default/{target}"
    matches = [p for p in report.pods if f"{p.namespace}/{p.name}" == key or f"{p.namespace}/{p.name}".startswith(key + "-")]
    if not matches:
        return f"no pod {key} in the simulation (pods are named as their controllers name them, e.g. web-<hash>-<id>)"
    lines = []
    for p in matches[:5]:
        full = f"{p.namespace}/{p.name}"
        if p.node:
            node = next(n for n in report.nodes if n.name == p.node)
            lines.append(f"{full}: bound to {p.node} ({node.instance_type}, {node.zone}, {node.capacity_type}, NodePool {node.nodepool})")
        else:
            lines.append(f"{full}: pending")
            lines.extend(f"  {line}" for line in report.explanations.get(full, [p.reason or ""]))
    return "\n".join(lines)


@app.command()
def simulate(
    paths: Annotated[list[str] | None, typer.Argument(help="YAML files or directories; none = the embedded default scenario")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="substitute ${VAR} placeholders: --set VAR=value")] = None,
    region: Annotated[str | None, typer.Option(
        help="region whose zones and offerings the default catalog uses (simulated provider: default us-east-1)")] = None,
    instance_types: Annotated[str | None, typer.Option("--instance-types", help="instance-type catalog in Karpenter's KWOK format")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
    preference_policy: Annotated[str, typer.Option(help="Respect (try preferences, relax one at a time) or Ignore")] = "Respect",
    explain: Annotated[str | None, typer.Option(help="explain one pod's placement: NAMESPACE/NAME (or NAME in default)")] = None,
    until: Annotated[str | None, typer.Option(help="scenario files: simulated time to run (Go duration, e.g. 24h)")] = None,
    explain_node: Annotated[str | None, typer.Option("--explain-node", help="print the disruption decision log of a node")] = None,
    timeline: Annotated[str | None, typer.Option(help="scenario files: write the nodes/cost timeline PNG here")] = None,
    max_pods: Annotated[int, typer.Option("--max-pods", help="most pods the workloads may ask for in all (input beyond it is an error)")]
    = 100_000,
    cloud_provider: Annotated[str, typer.Option(
        "--cloud-provider", help="installed provider plugin to launch with (karpy providers); its hooks run for real: "
                                 "a real cloud's provider launches real instances")] = "simulated",
    provider_option: Annotated[list[str] | None, typer.Option(
        "--provider-option", help="a provider option NAME=VALUE, typed by the provider's options model (repeatable)")] = None,
) -> None:
    """Simulate karpy on manifests: which nodes it launches, for which pods, at what cost."""
    try:
        provider_options = parse_provider_options(list(provider_option or []))
        _check_provider_name(cloud_provider)
        if output not in ("text", "json"):
            raise ConfigurationError(f"--output must be text or json, not {output!r}")
        if max_pods < 1:
            raise ConfigurationError(f"--max-pods must be at least 1, not {max_pods}")
        if preference_policy not in ("Respect", "Ignore"):
            raise ConfigurationError(f"--preference-policy must be Respect or Ignore, not {preference_policy!r}")
        from karpy_core.sim.scenario import is_scenario_file

        scenario = len(paths or []) == 1 and is_scenario_file((paths or [""])[0])
        if len(paths or []) > 1 and any(is_scenario_file(p) for p in paths or []):
            raise ConfigurationError("a Scenario file is simulated on its own (its steps apply the other manifests); "
                                     "give it as the only path")
        if timeline:
            _check_output_file("--timeline", timeline)
        used = [flag for flag, value in (("--until", until), ("--explain-node", explain_node), ("--timeline", timeline)) if value]
        if used and not scenario:
            raise ConfigurationError(f"{', '.join(used)} {'needs' if len(used) == 1 else 'need'} a single Scenario file "
                                     "(kind: Scenario, see docs/scenarios.md); "
                                     "plain manifests are simulated until nothing changes, without disruption")
        report = asyncio.run(
            run_simulation(list(paths or []), variables=_parse_sets(list(set_ or [])), region=region, instance_types=instance_types,
                           preference_policy=preference_policy, until=until, max_pods=max_pods,
                           cloud_provider=cloud_provider, provider_options=provider_options)
        )
    except KarpyError as exc:
        _fail(exc)
        return
    if explain:
        text = render_explain(report, explain)
        if text.startswith("no pod "):
            _fail(ConfigurationError(text))
        typer.echo(json.dumps({"explain": explain, "lines": text.splitlines()}, indent=2) if output == "json" else text)
        return
    if explain_node:
        seen = {n.name for n in report.nodes} | {e.get("node") for e in report.events} | set(report.decisions)
        if explain_node not in seen:
            _fail(ConfigurationError(f"no node {explain_node} in the simulation (nodes with decisions: "
                                     f"{', '.join(sorted(report.decisions)[:10]) or 'none'})"))
        text = render_explain_node(report, explain_node)
        doc = {"explain_node": explain_node, "lines": text.splitlines(), "decisions": report.decision_records.get(explain_node, [])}
        typer.echo(json.dumps(doc, indent=2) if output == "json" else text)
        return
    if output == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        from karpy_core.sim.report import TimelineUnavailableError, render_text, write_timeline_png

        typer.echo(render_text(report))
        if report.cost_over_time:
            try:
                png = write_timeline_png(report, timeline or f"karpy-timeline-{report.provider.get('scenario', 'scenario')}.png")
            except TimelineUnavailableError as exc:
                typer.echo(f"timeline: not drawn: {exc}", err=True)
                return
            except OSError as exc:
                _fail(OSError(f"cannot write the timeline: {exc}"))
                return
            typer.echo(f"timeline: {png}")


@app.command()
def validate(
    paths: Annotated[list[str], typer.Argument(help="YAML files or directories")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="substitute ${VAR} placeholders")] = None,
) -> None:
    """Load manifests (or one Scenario file, its steps and the manifests they apply) and report
    every problem (exit 2) or what was found (exit 0)."""
    from karpy_core.apis.loader import load_documents
    from karpy_core.sim.scenario import is_scenario_file, load_scenario

    try:
        if len(paths) == 1 and is_scenario_file(paths[0]):
            scenario = load_scenario(paths[0], _parse_sets(list(set_ or [])))
            actions = ", ".join(f"{s.action}@{s.at:g}s" for s in scenario.steps)
            until = f", until {scenario.until:g}s" if scenario.until else ""
            typer.echo(f"valid: Scenario {scenario.name}: {len(scenario.steps)} step(s) ({actions}){until}")
            return
        loaded = load_documents(paths, _parse_sets(list(set_ or [])))
    except KarpyError as exc:
        _fail(exc)
        return
    from karpy_core.sim.workloads import DEFAULT_MAX_PODS, pod_cap_problem

    problem = pod_cap_problem([o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in loaded.objects()],
                              DEFAULT_MAX_PODS)
    if problem:
        _fail(ManifestError([problem]))
        return
    counts: dict[str, int] = {}
    for obj in loaded.objects():
        counts[obj.KIND] = counts.get(obj.KIND, 0) + 1
    found = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no objects"
    warned = f" ({len(loaded.warnings)} warning{'s' if len(loaded.warnings) != 1 else ''} below)" if loaded.warnings else ""
    typer.echo(f"valid{warned}: {found}")
    from karpy_core.sim.simulator import is_simulated

    for obj in loaded.other:  # what simulate stores as read (PVCs, StorageClasses...) or ignores
        what = "stored as read by simulate" if is_simulated(obj.api_version, obj.kind) else "ignored (kind not modelled)"
        typer.echo(f"{what}: {obj.api_version} {obj.ref()} ({obj.source})")
    for w in loaded.warnings:
        typer.echo(f"warning: {w}")


async def run_controller(
    *,
    cloud_provider: str,
    kubeconfig: str | None,
    settings: Any,
    provider_options: dict[str, Any],
    kwok: bool,
) -> None:
    """Connect to the cluster (one ``GET /version`` first), load the provider and run the
    operator until stopped.

    Raises:
        ConfigurationError: no usable kubeconfig, bad provider options.
        KubeUnreachableError: the API server does not answer.
    """
    import signal

    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.kube.client import AsyncKubeClient
    from karpy_core.kube.port import serve_plugin_node_classes
    from karpy_core.operator import Operator

    serve_plugin_node_classes()  # a plugin's NodeClass kind is read, watched and cached like EC2NodeClass
    kube = await AsyncKubeClient.from_config(kubeconfig)
    try:
        await kube.probe()
        if kwok:
            if cloud_provider != "simulated":
                raise ConfigurationError("--kwok works with --cloud-provider simulated only")
            from karpy_core.sim.kwok_nodes import KwokNodeBackend

            provider_options = {**provider_options, "node_backend": KwokNodeBackend(kube)}
        provider_options = {**provider_options, "kube": kube}  # NodeClasses (status, drift), Secrets, events
        provider = load_provider(cloud_provider, provider_options)
        operator = Operator(kube=kube, provider=provider, settings=settings)
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            if task is not None:
                loop.add_signal_handler(sig, task.cancel)
        try:
            await operator.run()
        except asyncio.CancelledError:
            pass
    finally:
        await kube.close()


@app.command()
def controller(
    cloud_provider: Annotated[str, typer.Option("--cloud-provider", envvar="KARPY_CLOUD_PROVIDER", help="installed provider plugin")],
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")] = None,
    cluster_name: Annotated[str, typer.Option(envvar="CLUSTER_NAME", help="cluster name given to the provider")] = "",
    leader_elect: Annotated[bool, typer.Option(help="campaign for the leader Lease before acting")] = True,
    namespace: Annotated[str | None, typer.Option(envvar="SYSTEM_NAMESPACE", help="namespace of the leader Lease")] = None,
    lease_name: Annotated[str, typer.Option(envvar="KARPY_LEASE_NAME", help="name of the leader Lease")] = "karpy-leader-election",
    health_port: Annotated[int, typer.Option(help="port for /healthz and /readyz (and /metrics)")] = 8081,
    health_host: Annotated[str, typer.Option(help="address the health/metrics server binds (127.0.0.1 for local use)")] = "0.0.0.0",
    metrics_port: Annotated[int | None, typer.Option(help="port for /metrics when it differs from --health-port")] = None,
    batch_idle_duration: Annotated[str, typer.Option(envvar="BATCH_IDLE_DURATION", help="batch idle window (Go duration)")] = "1s",
    batch_max_duration: Annotated[str, typer.Option(envvar="BATCH_MAX_DURATION", help="batch maximum (Go duration)")] = "10s",
    region: Annotated[str | None, typer.Option(help="region (simulated provider: us-east-1 or ap-northeast-2)")] = None,
    instance_types: Annotated[str | None, typer.Option("--instance-types", help="simulated provider: KWOK-format catalog")] = None,
    kwok: Annotated[bool, typer.Option(help="simulated provider: launch instances as kwok-managed Nodes in the cluster")] = False,
    log_level: Annotated[str, typer.Option(envvar="LOG_LEVEL", help="debug, info, warning or error")] = "info",
    log_debug_loggers: Annotated[str, typer.Option(
        envvar="KARPY_LOG_DEBUG_LOGGERS",
        help="third-party loggers to show, comma-separated NAME (DEBUG) or NAME=LEVEL, e.g. botocore,httpx=INFO; "
             "all others stay at WARNING")] = "",
    preference_policy: Annotated[str, typer.Option(envvar="PREFERENCE_POLICY", help="Respect or Ignore")] = "Respect",
    min_values_policy: Annotated[str, typer.Option(envvar="MIN_VALUES_POLICY", help="Strict or BestEffort")] = "Strict",
    node_repair: Annotated[bool, typer.Option(envvar="NODE_REPAIR",
                                              help="replace nodes that fail the provider's repair policies")] = True,
    provider_option: Annotated[list[str] | None, typer.Option(
        "--provider-option", help="a provider option NAME=VALUE, typed by the provider's options model (repeatable)")] = None,
) -> None:
    """Run the controller against a cluster (one active replica via a Lease)."""
    from karpy_core.apis.durations import parse_duration
    from karpy_core.observability import configure_logging
    from karpy_core.operator import BatchSettings, ControllerSettings, LeaderSettings, default_namespace

    try:
        configure_logging(log_level.upper(), debug_loggers=log_debug_loggers)
    except ValueError as exc:
        _fail(ConfigurationError(str(exc)))
    try:
        _check_provider_name(cloud_provider)
        if kwok and cloud_provider != "simulated":
            raise ConfigurationError("--kwok works with --cloud-provider simulated only")
    except ConfigurationError as exc:
        _fail(exc)
        return
    try:
        batch = BatchSettings(
            idle_seconds=parse_duration(batch_idle_duration).total_seconds(),
            max_seconds=parse_duration(batch_max_duration).total_seconds(),
        )
    except ValueError as exc:
        _fail(ConfigurationError(f"invalid batch duration: {exc}"))
        return
    settings = ControllerSettings(
        cluster_name=cluster_name,
        batch=batch,
        leader=LeaderSettings(enabled=leader_elect, namespace=namespace or default_namespace(), lease_name=lease_name),
        health_port=health_port,
        health_host=health_host,
        metrics_port=metrics_port,
        preference_policy=preference_policy,
        min_values_policy=min_values_policy,
        node_repair=node_repair,
    )
    options: dict[str, Any] = {}
    if region:
        options["region"] = region
    if instance_types:
        options["instance_types_file"] = instance_types
    if cluster_name and cloud_provider != "simulated":
        options["cluster_name"] = cluster_name
    try:
        options = _merge_provider_options(options, parse_provider_options(list(provider_option or [])))
    except ConfigurationError as exc:
        _fail(exc)
        return
    try:
        asyncio.run(run_controller(cloud_provider=cloud_provider, kubeconfig=kubeconfig, settings=settings,
                                   provider_options=options, kwok=kwok))
    except KubeAPIError as exc:
        _fail(KarpyError(f"the Kubernetes API server answered {exc}"), code=1)
    except KarpyError as exc:
        _fail(exc)


@app.command("install-crds")
def install_crds(
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")] = None,
) -> None:
    """Create or update karpy's CRDs (NodePool, NodeClaim, EC2NodeClass, KCNodeClass) in a cluster."""
    import aiohttp

    from karpy_core.apis.crds import install
    from karpy_core.kube.client import AsyncKubeClient, kubernetes_api_client

    async def go() -> list[str]:
        async with await AsyncKubeClient.from_config(kubeconfig) as kube:
            await kube.probe()
        api = await kubernetes_api_client(kubeconfig)
        try:
            return await install(api)
        finally:
            await api.close()

    try:
        for name in asyncio.run(go()):
            typer.echo(f"established: {name}")
    except KubeAPIError as exc:
        _fail(KarpyError(f"the Kubernetes API server answered {exc}"), code=1)
    except KarpyError as exc:
        _fail(exc)
    except (OSError, TimeoutError, aiohttp.ClientError) as exc:  # the server went away after the probe
        _fail(KubeUnreachableError(f"lost the Kubernetes API server: {exc}"))


@app.command()
def providers() -> None:
    """List installed cloud-provider plugins (entry-point group ``karpy.cloudprovider``)."""
    from karpy_core.cloudprovider.provider import available_providers

    for name in available_providers():
        typer.echo(name)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

