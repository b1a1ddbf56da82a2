"""The ``karpy`` command line (typer).

Commands:

* ``karpy simulate [FILES|DIRS...]`` - run karpy's controllers on an in-memory cluster against the
  ``simulated`` cloud (or any installed provider: ``--cloud-provider NAME --provider-option
  KEY=VALUE``) and report what they launched, why, and what it costs (USD/hour).
  With ``--from-cluster`` it starts from a live cluster, read with list calls only
  (:mod:`karpy_core.sim.fromcluster`, docs/dry-run.md).
* ``karpy validate FILES...`` - load manifests and report every problem.
* ``karpy budgets FILES...`` - preview each NodePool's disruption budgets over the next 24 hours.
* ``karpy providers`` - list installed cloud-provider plugins.

Exit codes: 0 on success (even with pods left pending); 2 on invalid input or options (bad
manifests, unknown cloud provider, missing kubeconfig or ``--timeline`` directory), checked before
anything runs; 1 on a runtime failure (the API server cannot be reached, a file cannot be
written). Either way one ``error: ...`` line (or a list of problems) on stderr, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from typer.core import TyperArgument, TyperGroup

from karpy_core.errors import CloudProviderError, ConfigurationError, KarpyError, KubeAPIError, KubeUnreachableError, ManifestError
from karpy_core.featuregates import gates_from
from karpy_core.utils.text import visible

EXIT_SIGPIPE = 141
"""Exit code when the reader of stdout went away early (``karpy validate ... | head -1``): 128 +
SIGPIPE (13), the status a shell reports for a Unix tool killed by SIGPIPE (``yes | head -1``), as
:data:`EXIT_INTERRUPTED` is 128 + SIGINT. karpy cannot let SIGPIPE kill it (``SIG_DFL``): a
socket whose peer went away (the API server, a cloud) would then kill the controller too."""


class _StdoutClosed(Exception):  # an event, not an error: the reader of stdout is gone
    """Raised in place of ``BrokenPipeError`` (by :class:`_KarpyGroup`) when writing to stdout
    failed because its reader closed it; :func:`main` exits :data:`EXIT_SIGPIPE` without a word."""


def _stdout_reader_gone() -> bool:
    """True when stdout is a pipe (or socket) whose reading end is closed: ``poll`` reports
    ``POLLERR``/``POLLHUP`` on it. An ``EPIPE`` from anything else (a socket to the API server)
    stays what it is."""
    import select
    import sys

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no real stdout (a test runner's buffer), no poll
        return False


def _is_closed_stdout(exc: BaseException) -> bool:
    import errno

    return isinstance(exc, OSError) and exc.errno == errno.EPIPE and _stdout_reader_gone()


METAVARS: dict[str, str] = {
    # files, directories, names
    "paths": "PATH", "--kubeconfig": "FILE", "--instance-types": "FILE", "--timeline": "FILE",
    "--context": "CONTEXT", "--cloud-provider": "PROVIDER", "--region": "REGION", "--cluster-name": "NAME",
    "--cluster-endpoint": "URL", "--cluster-ca-bundle": "BASE64", "--interruption-queue": "QUEUE",
    "--karpenter-service": "NAME", "--namespace": "NAMESPACE", "--leader-election-name": "NAME",
    "--leader-election-namespace": "NAMESPACE", "--explain": "[NAMESPACE/]NAME", "--explain-node": "NODE",
    "--health-host": "ADDRESS", "--scheduler-config": "FILE",
    # key=value lists
    "--set": "VAR=VALUE", "--provider-option": "NAME=VALUE", "--nodes": "N|NODEPOOL=N",
    "--feature-gates": "NAME=BOOL,...", "--aws-feature-gates": "NAME=BOOL,...",
    "--log-debug-loggers": "NAME[=LEVEL],...", "--log-output-paths": "PATH,...", "--log-error-output-paths": "PATH,...",
    # choices
    "--output": "FORMAT", "--preference-policy": "POLICY", "--min-values-policy": "POLICY",
    "--log-level": "LEVEL",
    # durations, times, numbers
    "--until": "DURATION", "--batch-idle-duration": "DURATION", "--batch-max-duration": "DURATION",
    "--ami-refresh-interval": "DURATION", "--subnet-refresh-interval": "DURATION", "--at": "TIME",
    "--max-pods": "N", "--reserved-enis": "N", "--kube-client-qps": "N", "--kube-client-burst": "N",
    "--metrics-port": "PORT", "--health-probe-port": "PORT", "--memory-limit": "N", "--cpu-requests": "N",
    "--vm-memory-overhead-percent": "FRACTION", "--consolidation-min-savings": "FRACTION",
    "--hook-timeout": "SECONDS", "--disruption-pipeline-depth": "N",
}
"""The metavar ``karpy COMMAND -h`` shows for each option taking a value (by its first long name; an
argument by its parameter name), set on every command by :func:`readable_metavars`: typer's own
are Python types (``<str>``, ``<list[str]>``), which say nothing of what to give."""


class _NamedArgument(TyperArgument):
    """A typer argument whose help shows its metavar alone (typer appends ``<list[str]>`` after it)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        """No type after the metavar; typer's otherwise."""
        return None if self.metavar is not None else super().display_type_rich(ctx)


def readable_metavars(command: Any) -> None:
    """Give each parameter of ``command`` (and, for a group, of its subcommands) that takes a value
    its :data:`METAVARS` entry, where it has no metavar of its own (idempotent). ``command``: a
    typer (vendored click) ``Command`` or ``Group``."""
    for sub in getattr(command, "commands", {}).values():
        readable_metavars(sub)
    for param in command.params:
        if param.metavar is not None or getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        key = next((o for o in param.opts if o.startswith("--")), param.name or "")
        if key in METAVARS:
            param.metavar = METAVARS[key]
            if isinstance(param, TyperArgument):
                param.__class__ = _NamedArgument


class _KarpyGroup(TyperGroup):
    """The ``karpy`` command group: a write to a stdout whose reader has gone (``| head``), in any
    command or its help, raises :class:`_StdoutClosed` instead of ``BrokenPipeError``, which
    typer would turn into exit 1; :func:`main` handles it in one place. Each command's options
    show :data:`METAVARS` in their help."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """click's, with a closed stdout (the group's ``--help``) raised as :class:`_StdoutClosed`."""
        readable_metavars(self)
        try:
            return super().make_context(*args, **kwargs)
        except OSError as exc:
            if _is_closed_stdout(exc):
                raise _StdoutClosed from exc
            raise

    def invoke(self, ctx: Any) -> Any:
        """click's, with a closed stdout (any command's output) raised as :class:`_StdoutClosed`."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if _is_closed_stdout(exc):
                raise _StdoutClosed from exc
            raise


app = typer.Typer(add_completion=False, no_args_is_help=True, help="karpy: a Kubernetes node autoscaler compatible with Karpenter's APIs.",
                  rich_markup_mode=None, context_settings={"max_content_width": 120, "help_option_names": ["-h", "--help"]},
                  cls=_KarpyGroup)
"""Help is click's plain layout (``rich_markup_mode=None``): paragraphs re-wrapped to the terminal
(at most 120 columns) and every option name and help in full; rich's table cut option names and
their environment variables with an ellipsis at 80 columns (a pipe, CI logs). ``-h`` is ``--help``
for the group and every command."""


def _print_version(value: bool) -> None:
    """``karpy --version``: print ``karpy <version>`` (the installed distribution's) and exit 0."""
    if value:
        import importlib.metadata

        try:
            version = importlib.metadata.version("karpy")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed as a distribution)"
        typer.echo(f"karpy {version}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="print karpy's version and exit", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    """karpy: a Kubernetes node autoscaler compatible with Karpenter's APIs."""

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


def _say(line: str, *, err: bool = True) -> None:
    """Write one line karpy composed around text it read (a file's problems, warnings, a plugin's
    message) on stderr (``err``) or stdout, with its control characters escaped
    (:func:`~karpy_core.utils.text.visible`): a name or value from the input cannot move the
    cursor, clear the screen or split the line."""
    typer.echo(visible(line), err=err)


def _fail(exc: Exception, code: int | None = None) -> None:
    """Print ``exc`` on stderr (a ManifestError as its list of problems) and exit: ``code``, else
    1 for :class:`KubeUnreachableError`, :class:`KubeAPIError` (an API server answering with an
    error), :class:`CloudProviderError` (the cloud or its plugin failed, e.g. a hook raised) and
    ``OSError`` (runtime failures), else 2. A ManifestError's warnings follow its problems, one
    ``warning:`` line each."""
    if isinstance(exc, ManifestError):
        typer.echo(f"error: invalid input ({len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''}):", err=True)
        for p in exc.problems:
            _say(f"  - {p}")
        for w in exc.warnings:  # e.g. the "not read" line that explains a missing field
            _say(f"warning: {w}")
    else:
        _say(f"error: {exc}")
    if code is None:
        code = 1 if isinstance(exc, KubeUnreachableError | KubeAPIError | CloudProviderError | OSError) else 2
    raise typer.Exit(code=code)


TIMELINE_FORMATS = ("png", "svg", "pdf")
"""Image formats ``--timeline`` writes, chosen by the file's extension (matplotlib's Agg, SVG and
PDF backends); a path without an extension gets PNG, written at exactly that path."""


def admission_problems(loaded: Any) -> list[str]:
    """What kube-apiserver's admission would refuse in the pods of ``loaded`` (a
    :class:`~karpy_core.apis.loader.LoadedManifests`), one line each: Priority, RuntimeClass and
    pod-level resources, the checks ``karpy validate`` and ``simulate`` run after the schema's (and
    with its problems, on what loaded: ``admission`` of :func:`~karpy_core.apis.loader.load_documents`)."""
    from karpy_core.apis.loader import priority_class_problems
    from karpy_core.kube.admission import pod_level_resources_problems, runtime_class_problems

    return priority_class_problems(loaded) + runtime_class_problems(loaded) + pod_level_resources_problems(loaded)


def note_skipped(lines: list[str]) -> None:
    """Print on stderr, as ``karpy: LINE``, each directory's files the loader did not read
    (``LoadedManifests.skipped``: not ``*.json``/``*.yaml``/``*.yml``)."""
    for line in lines:
        _say(f"karpy: {line}")


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
        # a file where a directory should be is said as such (trial 17: "directory ... does not exist")
        what = "is a file, not a directory" if parent.exists() else "does not exist"
        raise ConfigurationError(f"{option} {value}: directory {parent} {what}")
    suffix = path.suffix.lower().lstrip(".")
    if suffix and suffix not in TIMELINE_FORMATS:
        raise ConfigurationError(f"{option} {value}: cannot write a .{suffix} image; use one of "
                                 f"{', '.join('.' + f for f in TIMELINE_FORMATS)} (no extension: PNG)")


def _check_provider_name(name: str) -> None:
    """Refuse an unknown ``--cloud-provider`` before connecting to anything.

    Raises:
        ConfigurationError: listing the installed providers and, for one of karpy's own plugins
            (``aws``, ``kakaocloud``), how to install it.
    """
    from karpy_core.cloudprovider.provider import available_providers, install_hint

    installed = available_providers()
    if name not in installed:
        raise ConfigurationError(f"--cloud-provider {name!r} is not installed; installed: {', '.join(installed) or 'none'}"
                                 f"{install_hint(name)}")


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
    feature_gates: str | None = None,
    min_values_policy: str = "Strict",
    batch_idle_seconds: float = 1.0,
    batch_max_seconds: float = 10.0,
    progress: Any = None,
) -> Any:
    """Load manifests (or the embedded default), simulate, and return the
    :class:`~karpy_core.sim.report.SimulationReport`. A single ``kind: Scenario`` file runs over
    simulated time with disruption, until ``until`` (a Go duration; default the scenario's
    ``until`` or 24h) - see ``docs/scenarios.md``. ``max_pods`` caps the pods the workloads may
    ask for in all (default :data:`~karpy_core.sim.workloads.DEFAULT_MAX_PODS`).

    ``cloud_provider`` names the installed provider plugin to launch with (``simulated`` by
    default); ``provider_options`` are its options (``--provider-option``), given to its
    ``create_plugin`` with ``region`` and ``instance_types_file`` when those are set and ``kube``,
    the in-memory cluster (see :func:`_load_sim_provider`). ``feature_gates`` is a
    ``FEATURE_GATES`` value (``--feature-gates``), over a scenario's ``featureGates``;
    ``min_values_policy``, ``batch_idle_seconds`` and ``batch_max_seconds`` are the controller's
    ``MIN_VALUES_POLICY``, ``BATCH_IDLE_DURATION`` and ``BATCH_MAX_DURATION``. ``progress`` (a
    :class:`~karpy_core.sim.progress.Progress`, default none) is told each phase. The provider is
    closed at the end, whatever the outcome (:func:`_close_provider`: a failing ``karpy_close`` is
    one warning line).

    Raises:
        ManifestError: invalid manifests, or workloads asking for more than ``max_pods`` pods.
        ConfigurationError: bad options (unknown provider or option, unknown region, unreadable catalog).
    """
    from karpy_core.apis.base import to_kube_dict
    from karpy_core.apis.loader import load_documents, load_text
    from karpy_core.sim.progress import NO_PROGRESS
    from karpy_core.sim.report import build_report
    from karpy_core.sim.scenario import is_scenario_file
    from karpy_core.sim.simulator import Simulator
    from karpy_core.sim.workloads import DEFAULT_MAX_PODS

    progress = progress or NO_PROGRESS
    cap = DEFAULT_MAX_PODS if max_pods is None else max_pods
    if len(paths) == 1 and is_scenario_file(paths[0]):
        return await _run_scenario_file(paths[0], variables=variables, region=region, instance_types=instance_types,
                                        preference_policy=preference_policy, until=until, max_pods=cap,
                                        cloud_provider=cloud_provider, provider_options=provider_options,
                                        feature_gates=feature_gates, batching=(min_values_policy, batch_idle_seconds, batch_max_seconds),
                                        progress=progress)
    progress.phase("loading manifests")
    if paths:
        loaded = load_documents(paths, variables or {}, cloud_provider=cloud_provider, admission=admission_problems)
        note_skipped(loaded.skipped)
    else:
        text = resources.files("karpy_core.data").joinpath(DEFAULT_SCENARIO).read_text()
        loaded = load_text(text, f"<embedded {DEFAULT_SCENARIO}>", variables or {}, cloud_provider=cloud_provider,
                           admission=admission_problems)
    # pods the API server would never create: say so, as validate does
    refused = admission_problems(loaded)
    if refused:
        raise ManifestError(refused, warnings=loaded.warnings)
    _check_pod_cap(loaded, cap, "simulate")
    from karpy_core.sim.simulator import is_simulated

    served = [o for o in loaded.other if is_simulated(o.api_version, o.kind)]  # e.g. PVCs, PVs, StorageClasses, Secrets
    provider, clock, cluster, shown_region = _load_sim_provider(cloud_provider, region, instance_types, provider_options)
    try:
        # the manifests' Secrets and NodePools are in the cluster when the provider is prepared (a
        # plugin reads its credentials there), as validate stores them (_check_provider_starts)
        applied = _store_before_prepare(cluster, [to_kube_dict(o) for o in [*loaded.objects(), *served]])
        sim = Simulator(provider, clock=clock, cluster=cluster, preference_policy=preference_policy, max_pods=cap,
                        feature_gates=gates_from(feature_gates), min_values_policy=min_values_policy,
                        batch_idle_seconds=batch_idle_seconds, batch_max_seconds=batch_max_seconds, progress=progress)
        ignored = sim.apply(applied)
        loaded.other = [o for o in loaded.other if not is_simulated(o.api_version, o.kind)]
        from karpy_core.utils.gcpause import gc_paused_frozen

        with gc_paused_frozen():  # Ctrl-C: no full collection in one uninterruptible C call
            await sim.run()
        pricing = provider.pricing_note()
        inputs = (", ".join(paths) if len(paths) <= 3 else f"{paths[0]} and {len(paths) - 1} more") if paths else \
            f"the embedded default: karpy_core/data/{DEFAULT_SCENARIO}"
        report = await build_report(
            sim,
            provider_info={"name": provider.name, "region": shown_region, "pricing": pricing, "inputs": inputs},
        )
        report.ignored = sorted(ignored + [o.ref() for o in loaded.other])
        report.warnings = list(loaded.warnings) + unserved_warnings(loaded.nodepools, provider) + report.warnings
        return report
    finally:
        await _close_provider(provider)  # after the report: a failing karpy_close is a warning, the report stands


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
    from karpy_core.cloudprovider.options import refuse_host_text
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
    refuse_host_text(cloud_provider, options)  # for any plugin, whether or not its options model lists kube
    provider = load_provider(cloud_provider, {"kube": cluster, **options})  # text for kube is refused, not replaced
    _check_node_class_models(provider)
    _check_provider_loops(provider)
    shown = options.get("region") if not instance_types else None
    return provider, clock, cluster, shown if isinstance(shown, str) else None


async def _close_provider(provider: Any) -> None:
    """Await ``provider``'s ``close()`` (the plugin's optional ``karpy_close`` hook), at the end of
    ``karpy simulate`` and at ``karpy controller``'s shutdown. A failure is one warning line naming
    the plugin and the hook (``cloud provider plugin 'p': karpy_close raised RuntimeError: ...``,
    :class:`~karpy_core.errors.PluginHookError`; a karpy error the hook raised is wrapped the same
    way) and nothing more: the command's result (a report already computed, the original error of
    a failed run) and its exit status stay what they were."""
    from karpy_core.errors import PluginHookError

    try:
        await provider.close()
    except Exception as exc:  # shutting down: report, never mask the result or the original error
        error = exc if isinstance(exc, PluginHookError) else PluginHookError(provider.label, "karpy_close", exc)
        logging.getLogger("karpy.cli").warning("the cloud provider was not closed cleanly", extra={"error": error})


_STORED_BEFORE_PREPARE = (("v1", "Secret"), ("karpenter.sh/v1", "NodePool"))
"""What :func:`_store_before_prepare` creates before the provider is prepared."""


def _store_before_prepare(cluster: Any, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create the ``v1`` Secrets and the NodePools among ``objects`` (manifests as dicts) in
    ``cluster`` (the in-memory cluster), before the provider is prepared: a plugin may read its
    credentials there, and see whether any NodePool is its own (the KakaoCloud plugin checks its
    keyring and credential only then), in ``karpy simulate`` and ``karpy validate`` alike. Returns
    the other objects, in order, for :meth:`~karpy_core.sim.simulator.Simulator.apply`."""
    rest = []
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) in _STORED_BEFORE_PREPARE:
            cluster.create_sync(str(obj["kind"]), obj)
        else:
            rest.append(obj)
    return rest


def _check_provider_starts(cloud_provider: str, options: dict[str, Any], nodepools: Any,
                           secrets: list[dict[str, Any]] | None = None) -> list[str]:
    """``karpy validate --cloud-provider``: load the plugin and call the hooks ``karpy simulate``
    calls before its run, in its order, without running anything: ``karpy_name`` and
    ``karpy_supported_node_classes`` (load), ``karpy_controllers`` (listed, none run),
    ``karpy_prepare`` (with the simulator's context: the in-memory cluster, the virtual clock,
    ``simulation=True``; the manifests' ``secrets`` and ``nodepools`` are stored in that cluster
    first, as simulate stores them, :func:`_store_before_prepare`), ``karpy_pricing_note``,
    ``karpy_repair_policies``; then ``karpy_close`` (a failure is one warning line, as in simulate).
    The warnings for ``nodepools`` whose NodeClass kind the provider does not serve (:func:`unserved_warnings`).

    Raises:
        ConfigurationError: as :func:`_load_sim_provider` (the plugin's options...).
        CloudProviderError: one of those hooks raised or answered the wrong type
            (:class:`~karpy_core.errors.PluginHookError`: one line naming the plugin and the hook, exit 1).
    """
    with console_warnings():
        provider, clock, cluster, _ = _load_sim_provider(cloud_provider, None, None, options)
        try:
            from karpy_core.apis.base import to_kube_dict

            _store_before_prepare(cluster, [*(secrets or []), *(to_kube_dict(p) for p in nodepools)])
            return _prepared_provider_warnings(provider, clock, cluster, nodepools)
        finally:
            asyncio.run(_close_provider(provider))


def _prepared_provider_warnings(provider: Any, clock: Any, cluster: Any, nodepools: Any) -> list[str]:
    """:func:`_check_provider_starts` once the provider is loaded: prepare it, ask the hooks."""
    import dataclasses

    provider.prepare(dataclasses.replace(provider.context, kube=cluster, clock=clock, simulation=True))
    provider.pricing_note()
    provider.repair_policies()  # simulate's node repair asks at its first pass
    return unserved_warnings(nodepools, provider)


def _scenario_nodepools(scenario: Any) -> list[Any]:
    """The NodePools a Scenario's ``apply`` steps create (the last applied version of each name), as
    NodePool models without a source, for :func:`_check_provider_starts`."""
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.sim.scenario import _load_objects as scenario_objects

    pools: dict[str, Any] = {}
    for step in scenario.steps:
        if step.action == "apply":
            for obj in scenario_objects(scenario, step):
                if obj.get("kind") == "NodePool":
                    pools[str((obj.get("metadata") or {}).get("name"))] = NodePool.model_validate(obj)
    return list(pools.values())


def _scenario_secrets(scenario: Any) -> list[dict[str, Any]]:
    """The ``v1`` Secrets a Scenario's ``apply`` steps create (as dicts), for
    :func:`_check_provider_starts`: a plugin reading its credentials from a Secret finds it in the
    run once a step has applied it."""
    from karpy_core.sim.scenario import _load_objects as scenario_objects

    secrets: dict[tuple[str, str], dict[str, Any]] = {}
    for step in scenario.steps:
        if step.action == "apply":
            for obj in scenario_objects(scenario, step):
                if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
                    meta = obj.get("metadata") or {}
                    secrets[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = obj
    return list(secrets.values())


def _check_provider_loops(provider: Any) -> None:
    """Ask ``provider`` for its background loops (the optional ``karpy_controllers`` hook), as
    ``karpy controller`` does when it starts leading; ``karpy simulate`` does not run them. A hook
    that raises is one warning line on stderr and the run goes on (the controller would stop)."""
    try:
        provider.controllers()
    except CloudProviderError as exc:
        logging.getLogger("karpy.cli").warning(
            "the provider's background loops cannot be listed (karpy controller stops on this when it starts leading; "
            "karpy simulate does not run them)", extra={"error": exc})


def _check_node_class_models(provider: Any) -> None:
    """Refuse a provider whose NodeClass kinds have no model because a ``karpy.apis`` entry point
    failed to load or the plugin registers none (its NodeClasses would be ignored and every pod
    stay pending, or its ``karpy_get_instance_types`` fail on a kind the cluster never serves).
    karpy's own groups (:data:`_PROVIDERS_OF_GROUP`) without their distribution installed are not
    refused: the simulated provider serves them unvalidated.

    Raises:
        CloudProviderError: naming the kinds and the failed entry points, or saying no
            ``karpy.apis`` entry point models them (exit 1: the plugin failed).
    """
    from karpy_core.apis.registry import failed_api_entries, kind_registry

    modelled = {(api_version.rpartition("/")[0], kind) for api_version, kind in kind_registry()}
    missing = [f"{group} {kind}" for group, kind in provider.supported_node_classes() if (group, kind) not in modelled]
    if not missing:
        return
    failed = failed_api_entries()
    if not failed or provider.name == "simulated":
        # karpy's own NodeClass groups are modelled by their own distributions (karpy-aws,
        # karpy-kakaocloud): without one, the simulated provider reads that kind unvalidated (the
        # README's first command, `pip install -e '.[sim]'`, installs neither); an unrelated
        # entry point that failed to load is then only its warning line (docs/cloudprovider.md §2)
        missing = [m for m in missing if m.partition(" ")[0] not in _PROVIDERS_OF_GROUP]
        if not missing:
            return
    if failed:
        raise CloudProviderError(f"cloud provider {provider.name!r} serves {', '.join(missing)}, which no karpy.apis entry point "
                                 f"modelled: {'; '.join(failed.values())}")
    raise CloudProviderError(
        f"cloud provider {provider.name!r} serves NodeClass kind {', '.join(missing)} but registers no model for it: "
        f"its distribution needs an entry point in group karpy.apis returning the kind's pydantic model "
        f"(docs/cloudprovider.md, section 2)")


_PROVIDERS_OF_GROUP = {"karpenter.k8s.aws": ("aws", "simulated"), "karpenter.kakaocloud.com": ("kakaocloud", "simulated")}
"""The installed-by-karpy providers that serve each in-tree NodeClass group (for a hint)."""


def unserved_warnings(nodepools: Any, provider: Any) -> list[str]:
    """One warning per NodePool that ``provider`` (a loaded
    :class:`~karpy_core.cloudprovider.provider.CloudProvider`) leaves out because it does not serve
    the kind of NodeClass the pool's ``nodeClassRef`` names (Karpenter's ``IsManaged``; the pool
    launches nothing), naming the file, the pool, the kind, what the provider serves and which
    installed provider would serve it. ``nodepools``: the loader's NodePool models."""
    from karpy_core.cloudprovider.provider import available_providers
    from karpy_core.state.cluster import unserved_reason

    managed = provider.managed_node_classes()
    if managed is None:
        return []
    installed = set(available_providers())
    out = []
    for pool in nodepools:
        ref = pool.spec.template.spec.node_class_ref
        if (ref.group, ref.kind) in managed:
            continue
        others = [p for p in _PROVIDERS_OF_GROUP.get(ref.group, ()) if p in installed and p != provider.name]
        hint = f"; --cloud-provider {' or '.join(others)} serves it" if others else ""
        where = f"{pool.source} " if pool.source is not None else ""
        out.append(f"{where}{pool.ref()}: left out, launches nothing: "
                   f"{unserved_reason((ref.group, ref.kind), managed, provider.name)}{hint}")
    return out


def _check_pod_cap(loaded: Any, cap: int, command: str) -> None:
    """Refuse manifests (``loaded``, the LoadedManifests) whose workloads ask for more than ``cap``
    pods in all, before simulating: the one check ``karpy simulate`` and ``karpy validate`` run on
    plain manifests (:func:`~karpy_core.sim.workloads.pod_cap_problem`, which the simulator's
    workload controller applies too), so the two commands refuse the same input in the same words.
    ``command`` is the karpy command whose ``--max-pods`` raises the cap.

    Raises:
        ManifestError: naming the file, object and field asking for the most pods (with ``loaded``'s warnings).
    """
    from karpy_core.sim.workloads import pod_cap_problem

    objects = loaded.objects()
    problem = pod_cap_problem([o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in objects], cap,
                              sources=[str(o.source) for o in objects], command=command)
    if problem:
        raise ManifestError([problem], warnings=loaded.warnings)


async def _run_scenario_file(path: str, *, variables: dict[str, str] | None, region: str | None, instance_types: str | None,
                             preference_policy: str, until: str | None, max_pods: int, cloud_provider: str = "simulated",
                             provider_options: dict[str, Any] | None = None, feature_gates: str | None = None,
                             batching: tuple[str, float, float] = ("Strict", 1.0, 10.0), progress: Any = None) -> Any:
    from karpy_core.apis.durations import parse_duration
    from karpy_core.sim.report import build_report
    from karpy_core.sim.scenario import format_seconds, load_scenario, run_scenario, unreached_steps, until_problem
    from karpy_core.sim.simulator import Simulator

    scenario = load_scenario(path, variables, max_pods=max_pods)
    try:
        end = parse_duration(until).total_seconds() if until else (scenario.until or 24 * 3600.0)
    except ValueError as exc:
        raise ConfigurationError(f"--until: {exc}") from exc
    why = until_problem(end, until)
    if why:
        raise ConfigurationError(f"--until: {why}")
    provider, clock, cluster, shown_region = _load_sim_provider(cloud_provider, region, instance_types, provider_options)
    try:
        sim = Simulator(provider, clock=clock, cluster=cluster, preference_policy=preference_policy, disruption=True, max_pods=max_pods,
                        feature_gates=gates_from(feature_gates, scenario.feature_gates), min_values_policy=batching[0],
                        batch_idle_seconds=batching[1], batch_max_seconds=batching[2], **({"progress": progress} if progress else {}))
        await run_scenario(sim, scenario, end)
        pricing = provider.pricing_note()
        report = await build_report(
            sim, provider_info={"name": provider.name, "region": shown_region, "pricing": pricing,
                                "scenario": scenario.name, "until_seconds": end},
        )
        # what loading the steps' manifests warned about, the NodePools the provider leaves out (as a
        # plain run names them; trial 23: only the pending pods' reasons did), and the steps the run
        # ended before, first; the same words as validate's (docs/scenarios.md quotes them)
        unserved = [f"{scenario.source}: {w}" for w in unserved_warnings(_scenario_nodepools(scenario), provider)]
        report.warnings[:0] = scenario.warnings + unserved + unreached_steps(
            scenario, end, f"--until {until}; a later --until runs it" if until else (
                f"until: {format_seconds(end)}; a later --until runs it" if scenario.until
                else "the default 24h; --until or until: runs it"))
        return report
    finally:
        await _close_provider(provider)


@contextlib.contextmanager
def console_warnings() -> Iterator[Any]:
    """Inside the block, warnings any logger writes go to stderr as one line each, with the error
    they carry, and a warning repeated at every pass (a plugin hook failing for the same NodeClaim
    again and again) is printed once, then counted: on leaving, one ``... repeated N more
    time(s)`` line per such warning (:class:`~karpy_core.logs.ConsoleWarnings`). Yields the handler."""
    from karpy_core.logs import ConsoleWarnings

    handler = ConsoleWarnings()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        handler.finish()


class StderrProgress:
    """``karpy simulate``'s :class:`~karpy_core.sim.progress.Progress` on stderr, for runs longer
    than a couple of seconds; used as a context manager around the run.

    On a terminal: one line, drawn by rich, that appears after :attr:`delay` seconds and is erased
    when the run ends (normally, on an error or on Ctrl-C), so a quick run prints nothing extra:
    a spinner, the phase, then for a phase with a total a bar and ``completed/total`` (a phase
    without one shows a pulsing bar and no count), and the time since the run began. Each phase
    gets a fresh total (a phase without one never shows the previous phase's), and a phase that
    reaches its total is drawn filled at once. The line is :data:`LINE_WIDTH` (77) columns wide,
    or :data:`SPARE_COLUMNS` narrower than a narrower terminal, so the ``^C`` a terminal echoes
    after it on Ctrl-C does not wrap onto a line the erasing misses. Elsewhere (a pipe, a CI log): no bar; one ``karpy: PHASE`` line per
    phase not written before, starting once the run has lasted :attr:`log_after` seconds (the
    phase then under way first), counts left out.

    Args:
        stream: where to draw or write (default ``sys.stderr``); a terminal when its ``isatty()`` says so.
        console: a rich ``Console`` to draw on instead (tests: ``Console(file=StringIO(),
            force_terminal=True, width=80)``); its ``file`` is then the stream, a terminal when
            ``console.is_terminal``.
    """

    delay = 2.0
    """Seconds before the bar appears on a terminal."""
    log_after = 30.0
    """Seconds before phase lines are written when stderr is not a terminal."""

    def __init__(self, stream: Any = None, console: Any = None) -> None:
        import sys
        import threading
        import time

        self._console = console
        if console is not None:
            self._stream = console.file
            self._tty = bool(console.is_terminal)
        else:
            self._stream = stream if stream is not None else sys.stderr
            self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._name = ""
        self._total: int | None = None
        self._completed = 0
        self._logged: set[str] = set()
        self._bar: Any = None
        self._task: Any = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> StderrProgress:
        import threading

        if self._tty:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop drawing and erase the line (rich's transient display: one line up, cleared);
        nothing is drawn afterwards. Called on leaving the ``with`` block, whatever ends it."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
            self._tty = False  # nothing more is drawn

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn
        from rich.table import Column

        with self._lock:
            if not self._tty:
                return
            console = self._console or Console(file=self._stream)
            self._bar = _progress_class()(
                SpinnerColumn(),
                # plain text, not rich markup: "[sim 31s] ..." read as a style tag vanished from the line (trial 18)
                TextColumn("{task.description}", markup=False,
                           table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
                BarColumn(bar_width=_BAR_WIDTH), _count_column(), _elapsed_column(self._start),
                console=console, transient=True, refresh_per_second=8, expand=True)
            self._task = self._bar.add_task(self._name or "starting", total=self._total, completed=self._completed)
            self._bar.start()

    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        """A new phase, or new counts for the current one (same ``name`` and ``total``); see
        :class:`~karpy_core.sim.progress.Progress`. A new phase replaces the line's task, so its
        total (None: none) and its count start from what it says, not from the last phase's."""
        import time

        with self._lock:
            same = (name, total) == (self._name, self._total)
            self._name, self._total, self._completed = name, total, completed
            if self._bar is not None:
                if same:
                    self._bar.update(self._task, completed=completed)
                else:
                    self._bar.remove_task(self._task)
                    self._task = self._bar.add_task(name, total=total, completed=completed)
                self._draw_if_done()
            elif not self._tty and name not in self._logged and time.monotonic() - self._start >= self.log_after:
                self._logged.add(name)
                self._stream.write(f"karpy: {name}\n")
                self._stream.flush()

    def update(self, completed: int) -> None:
        """``completed`` of the phase's total are done (a phase reaching its total is drawn at once, filled)."""
        with self._lock:
            self._completed = completed
            if self._bar is not None:
                self._bar.update(self._task, completed=completed)
                self._draw_if_done()

    def _draw_if_done(self) -> None:
        """Draw now when the phase has reached its total: the filled bar is shown even when the
        next phase follows before the next automatic refresh (called with the lock held)."""
        if self._total is not None and self._completed >= self._total:
            self._bar.refresh()


SPARE_COLUMNS = 3
"""Columns the progress line leaves free at the right of the terminal: a full-width line puts the
cursor in the last column, where the ``^C`` echoed on Ctrl-C wraps onto a new line, and the
erasing (one line up) then left the progress line on screen above ``karpy: interrupted``."""

LINE_WIDTH = 80 - SPARE_COLUMNS
"""The progress line's width at most, on a wider terminal too (the bar stays beside the phase
name); a narrower terminal gets its width less :data:`SPARE_COLUMNS`, the phase name cut with an
ellipsis first."""

_BAR_WIDTH = 14
"""Width of the progress bar: with the spinner, a 35-character phase, a count up to
``100,000/100,000`` and the time, the line fits an 80-column terminal (:data:`SPARE_COLUMNS` free)."""


def _progress_class() -> Any:
    """rich's ``Progress`` drawing its line :data:`LINE_WIDTH` wide, or :data:`SPARE_COLUMNS` narrower
    than a narrower console."""
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.progress import Progress

    class Narrow:
        def __init__(self, renderable: RenderableType) -> None:
            self.renderable = renderable

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            width = max(1, min(LINE_WIDTH, options.max_width - SPARE_COLUMNS))
            yield from console.render(self.renderable, options.update_width(width))

    class NarrowProgress(Progress):
        def get_renderable(self) -> RenderableType:
            return Narrow(super().get_renderable())

    return NarrowProgress


def _count_column() -> Any:
    """A rich progress column: ``completed/total`` when the task has a total (thousands separated, as
    the phase names count pods: ``9,000/20,000``), nothing otherwise."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class CountColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text("" if task.total is None else f"{int(task.completed):,}/{int(task.total):,}", style="progress.download")

    return CountColumn()


def _elapsed_column(start: float) -> Any:
    """A rich progress column: the time since ``start`` (``time.monotonic()``), ``H:MM:SS``: the
    whole run's, not the current phase's (each phase is a new task)."""
    import time

    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class ElapsedColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            s = int(time.monotonic() - start)
            return Text(f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}", style="progress.elapsed")

    return ElapsedColumn()


def render_explain_node(report: Any, node: str) -> str:
    """Text for ``--explain-node``: the disruption decision log of one node."""
    lines = report.decisions.get(node)
    if not lines:
        known = ", ".join(sorted(report.decisions)[:10])
        return f"no disruption decisions recorded for node {node}" + (f" (nodes with decisions: {known})" if known else "")
    return "\n".join([f"disruption decisions for {node}:", *(f"  {line}" for line in lines)])


_EXPLAIN_SHOWN = 5
"""``--explain`` shows at least this many pods of a workload (more when it spans more nodes, up to 20)."""


_EXPLAIN_CANDIDATES = 5
"""An ambiguous ``--explain`` prefix names at most this many of the pods it matches."""


def _explain_matches(report: Any, key: str, where: str = "in the simulation") -> tuple[list[Any], str]:
    """The pods ``--explain NAMESPACE/NAME`` means, and a header line saying how they matched (``""`` for
    a pod matched by its own name; ``NAMESPACE/NAME: workload NAME, N pods`` for a workload's, one pod
    too).

    In order: the pod named exactly NAME; the pods of the workload named exactly NAME (their top
    owner: a Deployment, StatefulSet, Job, ...); else the pods whose names start with NAME, when that
    prefix is unambiguous: it matches one pod, or only pods of one workload. ``where`` ends the
    error messages (``in the simulation``, ``in the cluster``).

    Raises:
        ConfigurationError: ``--explain NAMESPACE/NAME: workload NAME (Deployment) has spec.replicas 0:
            no pods ... to explain`` for a workload that asks for no pods (or a prefix of only such
            workloads' names); ``no pod NAMESPACE/NAME ...`` when nothing matches; ``--explain
            NAMESPACE/NAME is ambiguous: ...`` (one line naming up to 5 of the pods and their
            workloads, and how many) when the prefix matches pods of several workloads.
    """
    ns, _, name = key.partition("/")
    in_ns = [p for p in report.pods if p.namespace == ns]
    exact = [p for p in in_ns if p.name == name]
    if exact:
        return exact, ""
    owned = [p for p in in_ns if getattr(p, "workload", "") == name]
    if owned:  # a header for any workload, one pod too (the README's `--explain default/frontend`)
        return owned, f"{key}: workload {name}, {len(owned):,} pod{'s' if len(owned) != 1 else ''}"
    prefixed = [p for p in in_ns if name and p.name.startswith(name)]
    empty = [w for w in getattr(report, "empty_workloads", []) if w["namespace"] == ns]
    for w in empty:  # a workload that exists but asks for no pods: nothing to explain, and not a wrong name
        if w["name"] == name:
            raise ConfigurationError(f"--explain {key}: workload {name} ({w['kind']}) has {w['field']}: no pods "
                                     f"{where} to explain")
    if not prefixed and (starting := [w for w in empty if name and w["name"].startswith(name)]):
        listed = ", ".join(f"{w['name']} ({w['kind']}, {w['field']})" for w in starting[:_EXPLAIN_CANDIDATES])
        more = f", +{len(starting) - _EXPLAIN_CANDIDATES} more" if len(starting) > _EXPLAIN_CANDIDATES else ""
        raise ConfigurationError(f"--explain {key}: no pod {where} starts with {name}; workloads starting with {name} "
                                 f"ask for no pods: {listed}{more}")
    if not prefixed:
        # a name longer than any Kubernetes object's is shown cut (trial 19 echoed 5,000 characters)
        named = key if len(key) <= 320 else f"{key[:80]}... ({len(key):,} characters)"
        raise ConfigurationError(f"no pod {named} {where} (give a pod name, a workload name or an unambiguous prefix "
                                 "of pod names, e.g. web, web-<hash>-<id> or web-<hash>)")
    workloads = sorted({getattr(p, "workload", "") or p.name for p in prefixed})
    if len(prefixed) == 1:
        return prefixed, f"{key}: no pod or workload of that name; showing the one pod named {name}..."
    if len(workloads) > 1:
        shown = sorted(prefixed, key=lambda p: p.name)[:_EXPLAIN_CANDIDATES]
        listed = ", ".join(f"{p.name} ({getattr(p, 'workload', '') or 'no workload'})" for p in shown)
        more = f", +{len(prefixed) - len(shown):,} more" if len(prefixed) > len(shown) else ""
        raise ConfigurationError(f"--explain {key} is ambiguous: {len(prefixed):,} pods of {len(workloads):,} workloads "
                                 f"{where} start with {name}: {listed}{more}; give more of the name")
    total = sum(1 for p in in_ns if (getattr(p, "workload", "") or p.name) == workloads[0])
    of = f"all {total:,}" if total == len(prefixed) else f"{len(prefixed):,} of its {total:,}"
    return prefixed, f"{key}: no pod or workload of that name; showing workload {workloads[0]} ({of} pods named {name}...)"


_EXPLAIN_NODES_LISTED = 8
"""Most nodes (pending as one) ``--explain`` names in its line counting the pods it did not show."""


def _pick_per_node(pods: list[Any]) -> list[Any]:
    """Which of ``pods`` ``--explain`` shows: round-robin over their nodes (pending pods as one group),
    so every node appears when there are at most 20; at least :data:`_EXPLAIN_SHOWN` pods."""
    groups: dict[str | None, list[Any]] = {}
    for p in pods:
        groups.setdefault(p.node, []).append(p)
    limit = max(_EXPLAIN_SHOWN, min(len(groups), 20))
    shown: list[Any] = []
    queues = [list(g) for g in groups.values()]
    while len(shown) < limit and any(queues):
        for queue in queues:
            if queue and len(shown) < limit:
                shown.append(queue.pop(0))
    order = {id(p): i for i, p in enumerate(pods)}
    return sorted(shown, key=lambda p: order[id(p)])


def render_explain(report: Any, target: str, where: str = "in the simulation") -> str:
    """Text for ``--explain``: where the pod (or a workload's pods) went, or why pending with per-NodePool detail.

    ``target`` is ``NAMESPACE/NAME`` or ``NAME`` (namespace ``default``); see :func:`_explain_matches`
    for what NAME matches. A workload's pods are picked so each of its nodes appears; a last line counts
    the pods not shown, per node.

    Raises:
        ConfigurationError: nothing matches, or a prefix matches pods of several workloads (see
            :func:`_explain_matches`).
    """
    key = target if "/" in target else f"default/{target}"
    matches, header = _explain_matches(report, key, where)
    shown = _pick_per_node(matches)
    lines = [header] if header else []
    for p in shown:
        full = f"{p.namespace}/{p.name}"
        if p.node:
            node = next(n for n in report.nodes if n.name == p.node)
            # a Node given without karpy's labels has none of these: not "(, , , NodePool None)" (trial 21)
            known = [v for v in (node.instance_type, node.zone, node.capacity_type) if v]
            known.append(f"NodePool {node.nodepool}" if node.nodepool else "no NodePool")
            lines.append(f"{full}: bound to {p.node} ({', '.join(known)})")
            lines.extend(f"  {line}" for line in getattr(report, "overlays", {}).get(p.node, []))
        else:
            lines.append(f"{full}: pending")
            lines.extend(f"  {line}" for line in report.explanations.get(full, [p.reason or ""]))
    hidden = [p for p in matches if all(p is not s for s in shown)]
    if hidden:
        per_node: dict[str, int] = {}
        for p in hidden:
            per_node[p.node or "pending"] = per_node.get(p.node or "pending", 0) + 1
        counted = [f"{n:,} on {node}" if node != "pending" else f"{n:,} pending" for node, n in per_node.items()]
        # at most _EXPLAIN_NODES_LISTED places: a 20,000-pod workload on 108 nodes made a 3,256-character line (trial 17)
        rest = len(counted) - _EXPLAIN_NODES_LISTED
        where = ", ".join(counted[:_EXPLAIN_NODES_LISTED]) + (f", +{rest:,} more node{'s' if rest != 1 else ''}" if rest > 0 else "")
        lines.append(f"+{len(hidden):,} more not shown ({where})")
    return "\n".join(lines)


def _check_names_given(*options: tuple[str, str | None]) -> None:
    """Refuse an option given an empty name (``--explain ''``, ``--explain-node ''``, or only a
    namespace: ``--explain 'web/'``): an empty string is not "not given", and silently printing the
    whole report instead would answer another question. ``options``: ``(flag, value)`` pairs, a
    value None when the option was not given.

    Raises:
        ConfigurationError: one line naming the option and what it takes.
    """
    for flag, value in options:
        if value is None:
            continue
        if not value.strip():
            what = "a node's name" if flag == "--explain-node" else "a pod's or a workload's name (NAMESPACE/NAME outside default)"
            raise ConfigurationError(f"{flag}: empty name; give {what}")
        if flag == "--explain" and not value.partition("/")[2].strip() and "/" in value:
            raise ConfigurationError(f"--explain {value}: empty name after the namespace; give NAMESPACE/NAME")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _gc_relaxed(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """``command`` run under :func:`~karpy_core.utils.gcpause.gc_relaxed`: CPython's cyclic
    collector runs less often while it simulates and prints (a 100,000-pod run spent over a third
    of its CPU time in full collections that found nothing to free). Same signature and docstring
    (typer reads both through ``functools.wraps``)."""

    @functools.wraps(command)
    def relaxed(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from karpy_core.utils.gcpause import gc_relaxed

        with gc_relaxed():
            return command(*args, **kwargs)

    return relaxed


@app.command(short_help="Simulate karpy on manifests: the nodes it launches, for which pods, at what cost.")
@_gc_relaxed
def simulate(
    paths: Annotated[list[str] | None, typer.Argument(
        help="YAML or JSON files or directories; none = the embedded default scenario")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="substitute ${VAR} placeholders: --set VAR=value")] = None,
    region: Annotated[str | None, typer.Option(
        help="region whose zones and offerings the default catalog uses (simulated provider: default us-east-1)")] = None,
    instance_types: Annotated[str | None, typer.Option("--instance-types", help="instance-type catalog in Karpenter's KWOK format")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
    preference_policy: Annotated[str, typer.Option(
        help="PREFERENCE_POLICY: Respect (try preferences, relax one at a time) or Ignore")] = "Respect",
    explain: Annotated[str | None, typer.Option(
        help="explain a pod's or a workload's placement: NAMESPACE/NAME (or NAME in default): a pod or workload name, "
             "or an unambiguous prefix of pod names")] = None,
    until: Annotated[str | None, typer.Option(help="scenario files: simulated time to run (Go duration, e.g. 24h)")] = None,
    explain_node: Annotated[str | None, typer.Option("--explain-node", help="print the disruption decision log of a node")] = None,
    timeline: Annotated[str | None, typer.Option(
        help="scenario files: write the timeline chart (cost per NodePool, cpu/memory, pending pods, disruptions) "
             "here: .png, .svg or .pdf (no extension: PNG)")] = None,
    max_pods: Annotated[int, typer.Option("--max-pods", help="most pods the workloads may ask for in all (input beyond it is an error)")]
    = 100_000,
    cloud_provider: Annotated[str, typer.Option(
        "--cloud-provider", help="installed provider plugin to launch with (karpy providers); its hooks run for real: "
                                 "a real cloud's provider launches real instances")] = "simulated",
    provider_option: Annotated[list[str] | None, typer.Option(
        "--provider-option", help="a provider option NAME=VALUE, typed by the provider's options model (repeatable)")] = None,
    feature_gates: Annotated[str | None, typer.Option(
        "--feature-gates", help="FEATURE_GATES for the simulated controller: Name=true|false,... (over a scenario's featureGates)")] = None,
    min_values_policy: Annotated[str | None, typer.Option(
        "--min-values-policy",
        help="MIN_VALUES_POLICY: Strict or BestEffort (relax minValues, annotate the NodeClaim) [default: Strict]")] = None,
    batch_idle_duration: Annotated[str | None, typer.Option(
        "--batch-idle-duration",
        help="BATCH_IDLE_DURATION: idle time that closes a provisioning batch (Go duration) [default: 1s]")] = None,
    batch_max_duration: Annotated[str | None, typer.Option(
        "--batch-max-duration", help="BATCH_MAX_DURATION: longest provisioning batch (Go duration) [default: 10s]")] = None,
    vm_memory_overhead_percent: Annotated[float | None, typer.Option(
        "--vm-memory-overhead-percent", help="VM_MEMORY_OVERHEAD_PERCENT: memory the hypervisor keeps [default: 0.075]")] = None,
    reserved_enis: Annotated[int | None, typer.Option(
        "--reserved-enis", help="RESERVED_ENIS: ENIs left out of max-pods [default: 0]")] = None,
    from_cluster: Annotated[bool, typer.Option(
        "--from-cluster", help="start from the live cluster (read with list only, nothing written): per node what "
                               "consolidation would do and why not, costs, budgets; FILES are applied on top "
                               "(docs/dry-run.md)")] = False,
    kubeconfig: Annotated[str | None, typer.Option(
        help="--from-cluster: kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")] = None,
    context: Annotated[str | None, typer.Option(help="--from-cluster: kubeconfig context (default: its current-context)")] = None,
    hook_timeout: Annotated[float, typer.Option(
        "--hook-timeout", help="seconds a cloud provider plugin's hook call may go without progress before karpy "
                               "gives up on it (exit 1; named on stderr after 5 s); 0 = wait forever")] = 120.0,
) -> None:
    """Simulate karpy on manifests: which nodes it launches, for which pods, at what cost.

    The options that change a decision take the controller's names and values, checked as
    karpy controller checks its settings."""
    # (typer shows this docstring as the --help text: no source paths in it. The options are checked
    # by the controller's settings model, karpy_core.settings.SIMULATE_SETTINGS.)
    from karpy_core.cloudprovider.watch import HookWatch, watch_hooks
    from karpy_core.settings import simulation_settings

    try:
        _check_names_given(("--explain", explain), ("--explain-node", explain_node))
        if region is not None and not region.strip():  # not "not given": the default region would answer another question
            raise ConfigurationError(f"--region: empty name; give a region (the simulated provider's default is {DEFAULT_REGION})")
    except ConfigurationError as exc:
        _fail(exc)
    if from_cluster:
        _simulate_from_cluster(list(paths or []), kubeconfig=kubeconfig, context=context, output=output, until=until,
                               explain=explain, explain_node=explain_node, region=region, instance_types=instance_types,
                               feature_gates=feature_gates, variables=list(set_ or []),
                               unsupported=[flag for flag, value in (("--timeline", timeline), ("--provider-option", provider_option),
                                                                     ("--cloud-provider", cloud_provider != "simulated"))
                                            if value])
        return
    if kubeconfig or context:
        _fail(ConfigurationError("--kubeconfig and --context go with --from-cluster"))
    try:
        provider_options = parse_provider_options(list(provider_option or []))
        _check_provider_name(cloud_provider)
        if output not in ("text", "json"):
            raise ConfigurationError(f"--output must be text or json, not {output!r}")
        if max_pods < 1:
            raise ConfigurationError(f"--max-pods must be at least 1, not {max_pods}")
        settings = simulation_settings(
            {"preference_policy": preference_policy, "min_values_policy": min_values_policy,
             "batch_idle_duration": batch_idle_duration, "batch_max_duration": batch_max_duration,
             "vm_memory_overhead_percent": vm_memory_overhead_percent, "reserved_enis": reserved_enis,
             "feature_gates": feature_gates},
            cloud_provider=cloud_provider if cloud_provider in ("simulated", "aws") else "simulated")
        if cloud_provider == "simulated":
            catalog = {k: v for k, v in settings.provider_options().items() if k in ("vm_memory_overhead_percent", "reserved_enis")}
            provider_options = _merge_provider_options(catalog, provider_options)
        gates_from(feature_gates)  # refuse a bad --feature-gates before loading anything
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
        if not hook_timeout >= 0:  # also NaN, which compares False with everything (trial 19: accepted)
            raise ConfigurationError(f"--hook-timeout must be 0 (wait forever) or more seconds, not {hook_timeout:g}")
        with console_warnings(), StderrProgress() as progress, watch_hooks(HookWatch(timeout=hook_timeout)):
            report = asyncio.run(
                run_simulation(list(paths or []), variables=_parse_sets(list(set_ or [])), region=region, instance_types=instance_types,
                               preference_policy=settings.preference_policy, until=until, max_pods=max_pods,
                               cloud_provider=cloud_provider, provider_options=provider_options, feature_gates=feature_gates,
                               min_values_policy=settings.min_values_policy, batch_idle_seconds=settings.batch_idle_duration,
                               batch_max_seconds=settings.batch_max_duration, progress=progress)
            )
    except KarpyError as exc:
        _fail(exc)
        return
    if explain:
        try:
            text = render_explain(report, explain)
        except ConfigurationError as exc:
            _fail(exc)
            return
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
        if timeline:  # asked for explicitly: written as well, its path on stderr (stdout is the explanation)
            _write_timeline(report, timeline, to_stderr=True)
        return
    from karpy_core.sim.report import render_text

    if output == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        typer.echo(render_text(report))
    # The text report always draws the timeline; with -o json only an explicit --timeline does
    # (stdout stays pure JSON: the path and any problem go to stderr).
    if report.cost_over_time and (output != "json" or timeline):
        _write_timeline(report, timeline or f"karpy-timeline-{report.provider.get('scenario', 'scenario')}.png",
                        to_stderr=output == "json")


def _simulate_from_cluster(paths: list[str], *, kubeconfig: str | None, context: str | None, output: str, until: str | None,
                           explain: str | None, explain_node: str | None, region: str | None, instance_types: str | None,
                           feature_gates: str | None, variables: list[str], unsupported: list[str]) -> None:
    """``karpy simulate --from-cluster``: read the live cluster (list only), run the dry run
    (:func:`karpy_core.sim.fromcluster.dry_run`) and print its report, ``--explain`` or
    ``--explain-node``. Exit 2 for bad options, 1 when the API server cannot be reached."""
    from karpy_core.apis.durations import parse_duration
    from karpy_core.sim.fromcluster import DEFAULT_HORIZON, dry_run, render_live_text
    from karpy_core.sim.scenario import is_scenario_file

    try:
        if "--timeline" in unsupported:
            raise ConfigurationError("--timeline: not with --from-cluster (it reports one consolidation round, no timeline)")
        if unsupported:
            raise ConfigurationError(f"{', '.join(unsupported)}: not with --from-cluster (the live cluster is priced by the "
                                     "simulated provider's offline catalog, no cloud is called: --region or --instance-types)")
        if output not in ("text", "json"):
            raise ConfigurationError(f"--output must be text or json, not {output!r}")
        if any(is_scenario_file(p) for p in paths):
            raise ConfigurationError("a Scenario file cannot be applied on top of a live cluster; give plain manifests")
        try:
            horizon = parse_duration(until).total_seconds() if until else DEFAULT_HORIZON
        except ValueError as exc:
            raise ConfigurationError(f"--until: {exc}") from exc
        gates = gates_from(feature_gates)
        sets = _parse_sets(variables)

        async def run() -> Any:
            from karpy_core.kube.client import AsyncKubeClient

            async with await AsyncKubeClient.from_config(kubeconfig, context) as kube:
                await kube.probe()
                return await dry_run(kube, paths, horizon=horizon, region=region, instance_types=instance_types,
                                     feature_gates=gates, variables=sets)

        report = asyncio.run(run())
    except KarpyError as exc:
        _fail(exc)
        return
    if explain:
        try:
            text = render_explain(report.placed, explain, "in the cluster")
        except ConfigurationError as exc:
            _fail(exc)
            return
        typer.echo(json.dumps({"explain": explain, "lines": text.splitlines()}, indent=2) if output == "json" else text)
        return
    if explain_node:
        verdict = report.verdict(explain_node)
        if verdict is None and explain_node not in report.decisions:
            _fail(ConfigurationError(f"no node {explain_node} managed by a NodePool in the cluster "
                                     f"(nodes: {', '.join(v.node for v in report.verdicts[:10]) or 'none'})"))
        lines = [f"disruption decisions for {explain_node}:", *(f"  {line}" for line in report.decisions.get(explain_node, []))]
        if verdict is not None:
            lines.append(f"verdict: {verdict.action}" + (f" ({verdict.blocker.value}: {verdict.reason})" if verdict.blocker else ""))
            if verdict.fix:
                lines.append(f"to free it: {verdict.fix}")
        doc = {"explain_node": explain_node, "lines": lines, "verdict": verdict.to_dict() if verdict is not None else None}
        typer.echo(json.dumps(doc, indent=2) if output == "json" else "\n".join(lines))
        return
    typer.echo(json.dumps(report.to_dict(), indent=2) if output == "json" else render_live_text(report))


def _write_timeline(report: Any, path: str, *, to_stderr: bool) -> None:
    """Write ``report``'s timeline image at ``path`` and print ``timeline: PATH`` (on stderr when
    ``to_stderr``); without matplotlib say why on stderr. An unwritable path exits 1."""
    from karpy_core.sim.report import TimelineUnavailableError, write_timeline_png

    try:
        png = write_timeline_png(report, path)
    except TimelineUnavailableError as exc:
        _say(f"timeline: not drawn: {exc}")
        return
    except OSError as exc:
        _fail(OSError(f"cannot write the timeline: {exc}"))
        return
    typer.echo(f"timeline: {png}", err=to_stderr)


@app.command(short_help="Check manifests (or a Scenario file) as the API server would; name every problem.")
def validate(
    paths: Annotated[list[str], typer.Argument(help="YAML or JSON files or directories")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="substitute ${VAR} placeholders")] = None,
    max_pods: Annotated[int, typer.Option("--max-pods", help="most pods the workloads may ask for in all (input beyond it is an error)")]
    = 100_000,
    cloud_provider: Annotated[str | None, typer.Option(
        "--cloud-provider", help="installed provider plugin (karpy providers) the manifests are for: each NodePool "
                                 "whose NodeClass kind it does not serve is named (default: no such check)")] = None,
    provider_option: Annotated[list[str] | None, typer.Option(
        "--provider-option", help="a provider option NAME=VALUE, typed by the provider's options model (repeatable)")] = None,
    hook_timeout: Annotated[float, typer.Option(
        "--hook-timeout", help="seconds a cloud provider plugin's hook call may go without progress before karpy "
                               "gives up on it (exit 1; named on stderr after 5 s); 0 = wait forever")] = 120.0,
) -> None:
    """Load manifests (or one Scenario file, its steps and the manifests they apply) and report
    every problem (exit 2) or what was found (exit 0), with a warning for each NodePool the cloud
    provider would leave out (its NodeClass kind is not one the provider serves)."""
    from karpy_core.apis.loader import load_documents
    from karpy_core.cloudprovider.watch import HookWatch, watch_hooks
    from karpy_core.sim.scenario import format_seconds, is_scenario_file, load_scenario, unreached_steps

    try:
        if max_pods < 1:
            raise ConfigurationError(f"--max-pods must be at least 1, not {max_pods}")
        options = parse_provider_options(list(provider_option or []))
        if cloud_provider is None and options:
            raise ConfigurationError("--provider-option needs --cloud-provider (the provider the options are for)")
        if cloud_provider is not None:
            _check_provider_name(cloud_provider)
        if not hook_timeout >= 0:  # also NaN, which compares False with everything (trial 19: accepted)
            raise ConfigurationError(f"--hook-timeout must be 0 (wait forever) or more seconds, not {hook_timeout:g}")
        if len(paths) == 1 and is_scenario_file(paths[0]):
            scenario = load_scenario(paths[0], _parse_sets(list(set_ or [])), max_pods=max_pods, command="validate")
            until = f", until {format_seconds(scenario.until)}" if scenario.until else ""
            if cloud_provider is not None:  # as for plain manifests: load the plugin, name the NodePools it leaves out
                with watch_hooks(HookWatch(timeout=hook_timeout)):
                    scenario.warnings.extend(f"{scenario.source}: {w}" for w in _check_provider_starts(
                        cloud_provider, options, _scenario_nodepools(scenario), _scenario_secrets(scenario)))
            warnings = scenario.warnings + unreached_steps(
                scenario, scenario.until if scenario.until is not None else 24 * 3600.0,
                f"until: {format_seconds(scenario.until)}; a later --until runs it" if scenario.until is not None
                else "the default 24h; --until or until: runs it")
            n = len(warnings)
            warned = f" ({n} warning{'s' if n != 1 else ''} below)" if n else ""
            typer.echo(f"valid{warned}: Scenario {scenario.name}: {scenario.summary()}{until}")
            for w in warnings:
                _say(f"warning: {w}", err=False)
            return
        loaded = load_documents(paths, _parse_sets(list(set_ or [])), cloud_provider=cloud_provider,
                                admission=admission_problems)
        note_skipped(loaded.skipped)
        refused = admission_problems(loaded)
        if refused:
            raise ManifestError(refused, warnings=loaded.warnings)
        _check_pod_cap(loaded, max_pods, "validate")
        loaded.warnings.extend(_pending_pod_warnings(loaded))
        if cloud_provider is not None:
            with watch_hooks(HookWatch(timeout=hook_timeout)):
                from karpy_core.apis.base import to_kube_dict

                secrets = [to_kube_dict(o) for o in loaded.other if o.kind == "Secret" and o.api_version == "v1"]
                loaded.warnings.extend(_check_provider_starts(cloud_provider, options, loaded.nodepools, secrets))
    except KarpyError as exc:
        _fail(exc)
        return
    from karpy_core.apis.loader import modelled_elsewhere, unserved_kind_message
    from karpy_core.apis.registry import kind_registry
    from karpy_core.sim.simulator import is_simulated

    registry = kind_registry()

    # a NodeClass read without a model: its status comes from its kind (which plugin would model it),
    # not from whether the NodePool that survived a redefinition names it; one line each, counted
    # in the summary as NodePools are
    class_kinds = {(r.group, r.kind) for r in (p.spec.template.spec.node_class_ref for p in loaded.nodepools)}
    listed: list[tuple[str, Any]] = []
    counts: dict[str, int] = {}
    for obj in loaded.objects():
        counts[obj.KIND] = counts.get(obj.KIND, 0) + 1
    for obj in loaded.other:  # what simulate stores as read (PVCs, StorageClasses...) or ignores
        group = str(obj.api_version).rpartition("/")[0]
        reason = loaded.unvalidated.get((group, str(obj.kind), obj.name))
        if reason is None and (group, obj.kind) in class_kinds:  # a NodePool's NodeClass kind no installed plugin models
            reason = unserved_kind_message(group, str(obj.kind))
        if reason is not None:
            counts[str(obj.kind)] = counts.get(str(obj.kind), 0) + 1
            what = f"not validated: {reason}"
        elif is_simulated(obj.api_version, obj.kind):
            what = "stored as read by simulate"
        elif modelled_elsewhere(registry, str(obj.api_version), str(obj.kind)):
            what = "ignored (kind not modelled in this apiVersion)"
        else:
            what = "ignored (kind not modelled)"
        listed.append((what, obj))
    warnings = [w for w in loaded.warnings if w not in loaded.unvalidated_warnings]  # its listing line says it
    found = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no objects"
    # a "not validated:" listing line is a warning too (simulate lists it among its warnings): counted with them
    n = len(warnings) + sum(1 for what, _ in listed if what.startswith("not validated:"))
    warned = f" ({n} warning{'s' if n != 1 else ''} below)" if n else ""
    typer.echo(f"valid{warned}: {found}")
    for what, obj in listed:
        typer.echo(f"{what}: {obj.api_version} {obj.ref()} ({obj.source})")
    for w in warnings:
        _say(f"warning: {w}", err=False)


def _pending_pod_warnings(loaded: Any) -> list[str]:
    """One ``validate`` warning per Pod or workload (of ``loaded``, the LoadedManifests) whose pods
    no node can ever take, with the reason ``simulate`` gives them
    (:func:`karpy_core.scheduling.pod.node_affinity_matches_no_node`); the API server accepts them."""
    from karpy_core.scheduling.pod import node_affinity_matches_no_node

    out = []
    for obj in [*loaded.pods, *loaded.deployments, *loaded.replicasets, *loaded.statefulsets, *loaded.daemonsets, *loaded.jobs]:
        pod = obj.KIND == "Pod"
        spec = obj.spec if pod else obj.spec.template.spec
        reason = node_affinity_matches_no_node(spec.model_dump(mode="json", by_alias=True, exclude_none=True))
        if reason:
            where = "spec" if pod else "spec.template.spec"
            out.append(f"{obj.source} {obj.ref()}: {where}.affinity.nodeAffinity: {reason}; "
                       f"{'it stays' if pod else 'its pods stay'} pending (simulate reports it)")
    return out


@app.command(short_help="Preview each NodePool's disruption budgets over the next 24 hours (UTC).")
def budgets(
    paths: Annotated[list[str], typer.Argument(
        help="YAML files or directories with NodePools (and Nodes or NodeClaims), or one Scenario file (its applied manifests)")],
    nodes: Annotated[list[str] | None, typer.Option(
        "--nodes", help="node count of every NodePool (N) or of one (NODEPOOL=N, repeatable); default: the Nodes in the files")] = None,
    at: Annotated[str | None, typer.Option(help="start of the preview, ISO 8601 (naive = UTC); default now")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table",
    set_: Annotated[list[str] | None, typer.Option("--set", help="substitute ${VAR} placeholders")] = None,
) -> None:
    """Preview each NodePool's disruption budgets: how many nodes may be disrupted per reason now
    and at every change over the next 24 hours (UTC)."""
    import time

    from karpy_core.apis.loader import load_documents
    from karpy_core.sim.budgets import parse_at, parse_node_counts, preview, render_json, render_table
    from karpy_core.sim.scenario import _load_objects as scenario_objects
    from karpy_core.sim.scenario import is_scenario_file, load_scenario

    try:
        if output not in ("table", "json"):
            raise ConfigurationError(f"--output must be table or json, not {output!r}")
        every, per_pool = parse_node_counts(list(nodes or []))
        start = parse_at(at, time.time())
        if len(paths) == 1 and is_scenario_file(paths[0]):  # the objects its apply steps create (a later one replaces)
            scenario = load_scenario(paths[0], _parse_sets(list(set_ or [])))
            by_id: dict[tuple[str, str, str], dict[str, Any]] = {}
            for step in scenario.steps:
                if step.action == "apply":
                    for obj in scenario_objects(scenario, step):
                        meta = obj.get("metadata") or {}
                        by_id[(str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
            dump = list(by_id.values())
        else:
            loaded = load_documents(paths, _parse_sets(list(set_ or [])))
            note_skipped(loaded.skipped)
            for w in loaded.redefined:  # which of two definitions is used, as validate and simulate warn
                _say(f"warning: {w}")
            dump = [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in loaded.objects()]
        pools = [d for d in dump if d.get("kind") == "NodePool"]
        if not pools:
            raise ConfigurationError("no NodePool among the manifests")
        previews = preview(pools, dump, start, every=every, per_pool=per_pool)
    except (KarpyError, ValueError, OverflowError) as exc:  # OverflowError: a schedule's date past datetime's years
        _fail(exc)
        return
    if output == "json":
        typer.echo(json.dumps(render_json(previews, start), indent=2))
    else:
        typer.echo(render_table(previews, start))


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

    from karpy_core.cloudprovider.options import refuse_host_text
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.kube.client import AsyncKubeClient
    from karpy_core.kube.port import serve_plugin_node_classes
    from karpy_core.operator import Operator

    serve_plugin_node_classes()  # a plugin's NodeClass kind is read, watched and cached like EC2NodeClass
    interrupted = False
    raw = await AsyncKubeClient.from_config(kubeconfig, qps=settings.kube_client_qps, burst=settings.kube_client_burst)
    kube: Any = raw
    if settings.dry_run:  # every reader below (provider, kwok backend, operator) gets the client that writes nothing
        from karpy_core.kube.dryrun import DryRunKubeClient

        raw.transport.read_only = True
        kube = DryRunKubeClient(raw)
    provider = None
    try:
        await raw.probe()
        if kwok:
            if cloud_provider != "simulated":
                raise ConfigurationError("--kwok works with --cloud-provider simulated only")
            from karpy_core.sim.kwok_nodes import KwokNodeBackend

            provider_options = {"node_backend": KwokNodeBackend(kube), **provider_options}
        # NodeClasses (status, drift), Secrets, events; a --provider-option kube=... is refused, not replaced
        refuse_host_text(cloud_provider, provider_options)
        provider_options = {"kube": kube, **provider_options}
        provider = load_provider(cloud_provider, provider_options)
        operator = Operator(kube=kube, provider=provider, settings=settings,  # prepares the provider (its context)
                            cluster_ca_pem=await raw.cluster_ca_pem())
        await provider.start()  # optional start-up I/O: settings a provider discovers (AWS: the endpoint)
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        received: list[int] = []

        def stop(sig: int) -> None:
            received.append(sig)
            if task is not None:
                task.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        try:
            await operator.run()
        except asyncio.CancelledError:
            pass
        if signal.SIGINT in received:  # Ctrl-C: stopped cleanly, and the exit code says interrupted (130)
            interrupted = True
    finally:
        # The provider's cloud clients (aiobotocore, httpx) are closed before the loop ends, or
        # asyncio logs "Unclosed client session" errors on every shutdown.
        if provider is not None:
            await _close_provider(provider)
        await raw.close()
    if interrupted:
        raise KeyboardInterrupt


def _opt(*names: str, help: str) -> Any:
    """A ``karpy controller`` option: every value defaults to None ("not given"), so
    :func:`karpy_core.settings.load_settings` can layer flags over the environment."""
    return typer.Option(*names, help=help, show_default=False)


def _flag(name: str, *, help: str) -> Any:
    """A boolean ``karpy controller`` option: ``--name`` / ``--no-name`` (Karpenter's
    ``--name=true|false`` is rewritten to these by :func:`karpenter_bool_flags`)."""
    return typer.Option(f"{name}/--no-{name.removeprefix('--')}", help=help, show_default=False)


@app.command(short_help="Run the controller against a cluster (one active replica via a Lease).")
def controller(
    cloud_provider: Annotated[str | None, _opt("--cloud-provider", help="installed provider plugin [KARPY_CLOUD_PROVIDER]")] = None,
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")] = None,
    cluster_name: Annotated[str | None, _opt("--cluster-name", help="the cluster's name [CLUSTER_NAME]")] = None,
    cluster_endpoint: Annotated[str | None, _opt("--cluster-endpoint", help="API server URL for new nodes; AWS: else EKS "
                                                 "DescribeCluster [CLUSTER_ENDPOINT]")] = None,
    cluster_ca_bundle: Annotated[str | None, _opt("--cluster-ca-bundle", help="base64 CA bundle for new nodes [CLUSTER_CA_BUNDLE]")]
    = None,
    region: Annotated[str | None, _opt("--region", help="cloud region; AWS default: the SDK's (AWS_REGION, shared config, "
                                       "IMDS); simulated: us-east-1 [KARPY_REGION]")] = None,
    interruption_queue: Annotated[str | None, _opt("--interruption-queue", help="AWS: SQS queue of interruption events "
                                                   "[INTERRUPTION_QUEUE]")] = None,
    isolated_vpc: Annotated[bool | None, _flag("--isolated-vpc", help="AWS: no Pricing API [ISOLATED_VPC]")] = None,
    eks_control_plane: Annotated[bool | None, _flag("--eks-control-plane", help="accepted, no effect [EKS_CONTROL_PLANE]")] = None,
    vm_memory_overhead_percent: Annotated[float | None, _opt("--vm-memory-overhead-percent", help="AWS: fraction of memory the "
                                                             "hypervisor keeps, default 0.075 [VM_MEMORY_OVERHEAD_PERCENT]")]
    = None,
    reserved_enis: Annotated[int | None, _opt("--reserved-enis", help="AWS: ENIs left out of max-pods [RESERVED_ENIS]")] = None,
    disable_dry_run: Annotated[bool | None, _flag("--disable-dry-run", help="AWS: no dry-run validation [DISABLE_DRY_RUN]")] = None,
    enable_zonal_shift: Annotated[bool | None, _flag("--enable-zonal-shift", help="refused when true [ENABLE_ZONAL_SHIFT]")] = None,
    ami_refresh_interval: Annotated[str | None, _opt("--ami-refresh-interval", help="only 1m [AMI_REFRESH_INTERVAL]")] = None,
    subnet_refresh_interval: Annotated[str | None, _opt("--subnet-refresh-interval", help="only 1m [SUBNET_REFRESH_INTERVAL]")]
    = None,
    aws_feature_gates: Annotated[str | None, _opt("--aws-feature-gates", help="NodeClassCEL=false only [AWS_FEATURE_GATES]")] = None,
    karpenter_service: Annotated[str | None, _opt("--karpenter-service", help="accepted, no effect [KARPENTER_SERVICE]")] = None,
    metrics_port: Annotated[int | None, _opt("--metrics-port", help="port of /metrics, default 8080; 0: a free one; equal to "
                                             "the health port: one server [METRICS_PORT]")] = None,
    health_probe_port: Annotated[int | None, _opt("--health-probe-port", "--health-port",
                                                  help="port of /healthz, /readyz (and /metrics), default 8081 [HEALTH_PROBE_PORT]")]
    = None,
    health_host: Annotated[str | None, _opt("--health-host", help="address the servers bind, default 0.0.0.0 [KARPY_HEALTH_HOST]")]
    = None,
    kube_client_qps: Annotated[int | None, _opt("--kube-client-qps", help="API requests per second, default 200 [KUBE_CLIENT_QPS]")]
    = None,
    kube_client_burst: Annotated[int | None, _opt("--kube-client-burst", help="API request burst, default 300 [KUBE_CLIENT_BURST]")]
    = None,
    enable_profiling: Annotated[bool | None, _flag("--enable-profiling", help="refused when true [ENABLE_PROFILING]")] = None,
    disable_controller_warmup: Annotated[bool | None, _flag("--disable-controller-warmup", help="only true [DISABLE_CONTROLLER_WARMUP]")]
    = None,
    disable_leader_election: Annotated[bool | None, _flag("--disable-leader-election", help="run without the leader Lease "
                                                         "[DISABLE_LEADER_ELECTION]")] = None,
    leader_elect: Annotated[bool | None, _flag("--leader-elect", help="the opposite of "
                                              "--disable-leader-election (both given: they must agree)")] = None,
    disable_cluster_state_observability: Annotated[bool | None, _flag(
        "--disable-cluster-state-observability", help="refused when true [DISABLE_CLUSTER_STATE_OBSERVABILITY]")] = None,
    leader_election_name: Annotated[str | None, _opt("--leader-election-name", "--lease-name",
                                                     help="leader Lease name, default karpy-leader-election [LEADER_ELECTION_NAME]")]
    = None,
    leader_election_namespace: Annotated[str | None, _opt("--leader-election-namespace", help="leader Lease namespace, default "
                                                          "SYSTEM_NAMESPACE [LEADER_ELECTION_NAMESPACE]")] = None,
    namespace: Annotated[str | None, _opt("--namespace", help="the controller's namespace [SYSTEM_NAMESPACE]")] = None,
    memory_limit: Annotated[int | None, _opt("--memory-limit", help="accepted, no effect [MEMORY_LIMIT]")] = None,
    cpu_requests: Annotated[int | None, _opt("--cpu-requests", help="accepted, no effect [CPU_REQUESTS]")] = None,
    log_level: Annotated[str | None, _opt("--log-level", help="debug, info, warning or error [LOG_LEVEL]")] = None,
    log_output_paths: Annotated[str | None, _opt("--log-output-paths", help="stdout, stderr or files, default stdout "
                                                 "[LOG_OUTPUT_PATHS]")] = None,
    log_error_output_paths: Annotated[str | None, _opt("--log-error-output-paths", help="only stderr [LOG_ERROR_OUTPUT_PATHS]")]
    = None,
    log_debug_loggers: Annotated[str | None, _opt(
        "--log-debug-loggers",
        help="third-party loggers to show, comma-separated NAME (DEBUG) or NAME=LEVEL, e.g. botocore,httpx=INFO; "
             "all others stay at WARNING [KARPY_LOG_DEBUG_LOGGERS]")] = None,
    batch_max_duration: Annotated[str | None, _opt("--batch-max-duration", help="longest batch, default 10s [BATCH_MAX_DURATION]")]
    = None,
    batch_idle_duration: Annotated[str | None, _opt("--batch-idle-duration", help="batch idle window, default 1s "
                                                    "[BATCH_IDLE_DURATION]")] = None,
    preference_policy: Annotated[str | None, _opt("--preference-policy", help="Respect or Ignore, default Respect "
                                                  "[PREFERENCE_POLICY]")] = None,
    min_values_policy: Annotated[str | None, _opt("--min-values-policy", help="Strict or BestEffort, default Strict "
                                                  "[MIN_VALUES_POLICY]")] = None,
    ignore_dra_requests: Annotated[bool | None, _flag("--ignore-dra-requests", help="only true [IGNORE_DRA_REQUESTS]")] = None,
    feature_gates: Annotated[str | None, _opt("--feature-gates", help="Name=true|false,... [FEATURE_GATES]")] = None,
    scheduler_config: Annotated[str | None, _opt("--scheduler-config", help="refused when set [SCHEDULER_CONFIG]")] = None,
    node_repair: Annotated[bool | None, _flag("--node-repair", help="FEATURE_GATES NodeRepair, default on "
                                             "[NODE_REPAIR]")] = None,
    consolidation_min_savings: Annotated[float | None, _opt(
        "--consolidation-min-savings", help="fraction of the disrupted nodes' price a repack consolidation must save, "
                                            "default 0.1 [KARPY_CONSOLIDATION_MIN_SAVINGS]")] = None,
    disruption_pipeline_depth: Annotated[int | None, _opt(
        "--disruption-pipeline-depth", help="decided disruption commands validated side by side, 1 to 10, default 1 "
                                            "[KARPY_DISRUPTION_PIPELINE_DEPTH]")] = None,
    instance_types: Annotated[str | None, _opt("--instance-types", help="simulated provider: KWOK-format catalog "
                                               "[KARPY_INSTANCE_TYPES]")] = None,
    kwok: Annotated[bool | None, _flag("--kwok", help="simulated provider: launch instances as kwok-managed Nodes [KARPY_KWOK]")]
    = None,
    dry_run: Annotated[bool | None, _flag("--dry-run", help="decide and log what would be done, write nothing to the "
                                          "cluster or the cloud; no leader election [KARPY_DRY_RUN]")] = None,
    provider_option: Annotated[list[str] | None, typer.Option(
        "--provider-option", help="a provider option NAME=VALUE, typed by the provider's options model (repeatable)")] = None,
) -> None:
    """Run the controller against a cluster (one active replica via a Lease).

    Each setting is a flag and an environment variable (in brackets): Karpenter's name for
    Karpenter's settings, a KARPY_ name for karpy's own; a flag wins.
    """
    flags = {k: v for k, v in locals().items() if k not in ("kubeconfig", "leader_elect", "namespace", "provider_option")}
    flags["system_namespace"] = namespace
    from karpy_core.observability import configure_logging
    from karpy_core.settings import load_settings

    try:
        if leader_elect is not None:
            if disable_leader_election is not None and disable_leader_election == leader_elect:
                raise ConfigurationError("--leader-elect/--no-leader-elect contradicts --disable-leader-election; give one of them")
            flags["disable_leader_election"] = not leader_elect
        settings = load_settings(flags)
        if not settings.cloud_provider:
            raise ConfigurationError("--cloud-provider (KARPY_CLOUD_PROVIDER) is required; `karpy providers` lists them")
        try:
            configure_logging(settings.log_level.upper(), debug_loggers=settings.log_debug_loggers,
                              output_paths=settings.log_output_paths)
        except OSError as exc:  # a log file that cannot be opened (missing directory, no permission)
            raise ConfigurationError(f"LOG_OUTPUT_PATHS (--log-output-paths): cannot open {exc.filename}: {exc.strerror}") from exc
        _check_provider_name(settings.cloud_provider)
        controller_settings = settings.controller_settings()
        options = settings.provider_options()
    except (ConfigurationError, ValueError) as exc:
        _fail(ConfigurationError(str(exc)) if isinstance(exc, ValueError) else exc, code=2)
        return
    import logging

    for line in settings.accepted_without_effect():
        logging.getLogger("karpy.settings").info(line)
    try:
        options = _merge_provider_options(options, parse_provider_options(list(provider_option or [])))
    except ConfigurationError as exc:
        _fail(exc)
        return
    try:
        asyncio.run(run_controller(cloud_provider=settings.cloud_provider, kubeconfig=kubeconfig, settings=controller_settings,
                                   provider_options=options, kwok=settings.kwok))
    except KubeAPIError as exc:
        _fail(KarpyError(f"the Kubernetes API server answered {exc}"), code=1)
    except KarpyError as exc:
        _fail(exc)


@app.command("install-crds", short_help="Create or update karpy's CRDs and the installed plugins' in a cluster.")
def install_crds(
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")] = None,
) -> None:
    """Create or update karpy's CRDs (NodePool, NodeClaim, NodeOverlay, CapacityBuffer and the simulated provider's
    KWOKNodeClass) in a cluster, and the NodeClass CRDs of the installed provider plugins (EC2NodeClass with karpy-aws,
    KCNodeClass with karpy-kakaocloud, a third-party plugin's kind): karpy providers lists the installed plugins."""
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


@app.command(short_help="List the installed cloud-provider plugins.")
def providers() -> None:
    """List installed cloud-provider plugins (entry-point group karpy.cloudprovider)."""
    from karpy_core.cloudprovider.provider import available_providers

    for name in available_providers():
        typer.echo(name)


def karpenter_bool_flags(argv: list[str]) -> list[str]:
    """Karpenter's boolean flags take ``--flag=true|false`` (Go ``flag.BoolFunc``); rewrite
    those of ``karpy controller`` to click's ``--flag`` / ``--no-flag`` before parsing. Other
    arguments are left as they are (a bad value is then click's error)."""
    if "controller" not in argv:
        return argv
    command = typer.main.get_command(app)
    ctl = getattr(command, "commands", {}).get("controller")
    pairs: dict[str, tuple[str, str]] = {}
    for param in getattr(ctl, "params", []):
        if getattr(param, "is_flag", False) and getattr(param, "secondary_opts", None):
            for opt in param.opts:
                pairs[opt] = (opt, param.secondary_opts[0])
    out = []
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name in pairs and value.lower() in ("true", "false", "1", "0", "t", "f"):
            out.append(pairs[name][0] if value.lower() in ("true", "1", "t") else pairs[name][1])
        else:
            out.append(arg)
    return out


EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (SIGINT): 128 + the signal's number, as shells report it."""


def _on_sigint(signum: int, frame: Any) -> None:
    """SIGINT handler for every command: the first interrupt raises ``KeyboardInterrupt`` in the
    main thread wherever it is (inside a coroutine's synchronous work too: ``asyncio.run`` keeps a
    handler it finds installed, and its own only cancels the main task at its next real
    suspension, which a simulation, all in memory, never reaches before it ends); a second one
    while the first unwinds leaves at once."""
    import signal

    signal.signal(signal.SIGINT, _leave_now)
    raise KeyboardInterrupt


def _leave_now(signum: int, frame: Any) -> None:
    """Exit 130 at once after ``karpy: interrupted`` on stderr: after the interrupt has unwound the
    command (its ``finally`` blocks ran), or on a second Ctrl-C meanwhile. ``os._exit`` skips the
    interpreter's teardown, which frees every object one by one (most of a second after a big
    simulation) and would join a HiGHS solve still running in its thread."""
    import os
    import sys

    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        # on a terminal, not glued onto a report line cut short ("... +185 morekarpy: interrupted")
        start = "\n" if getattr(sys.stdout, "mid_line", False) else ""
        sys.stderr.write(f"{start}karpy: interrupted\n")
        sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def _leave_quietly() -> None:
    """Exit :data:`EXIT_SIGPIPE` without a word: stdout's reader is gone (``karpy ... | head``).
    stdout is pointed at ``/dev/null`` first, so the interpreter's last flush of what is still
    buffered cannot fail again ("Exception ignored ... BrokenPipeError", exit 120)."""
    import os
    import sys

    with contextlib.suppress(Exception):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    sys.exit(EXIT_SIGPIPE)


def _whole_writes() -> None:
    """Give ``sys.stdout`` a buffer that writes everything or raises, when it has none.

    Under ``PYTHONUNBUFFERED=1`` (set by many container images, karpy's own included) stdout's
    text layer writes straight to the raw file, and CPython's ``TextIOWrapper`` ignores a short
    count from it: a large write into a pipe whose reader left (``karpy simulate -o json | head
    -c 100``, fresh-user trial 5, issue 35) wrote its first 64 KiB, lost the rest and raised
    nothing, so karpy exited 0 instead of :data:`EXIT_SIGPIPE`. A ``BufferedWriter`` repeats a
    short write until all is written or the write fails (``BrokenPipeError`` here, handled by
    :func:`main`). Line buffering and write-through keep the unbuffered behaviour: every line
    (and every ``typer.echo``, which flushes) reaches the descriptor at once."""
    import io
    import sys

    out = sys.stdout
    if isinstance(out, io.TextIOWrapper) and isinstance(out.buffer, io.RawIOBase):
        out.flush()
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(out.buffer), encoding=out.encoding, errors=out.errors,
                                      newline=None, line_buffering=True, write_through=True)


class _LineEnds:
    """``sys.stdout`` when it and stderr are both a terminal (the same screen): each write passes
    through, and :attr:`mid_line` says whether the cursor may be in the middle of a line, so that
    :func:`_leave_now` starts ``karpy: interrupted`` on a line of its own (trial 12: a Ctrl-C while
    the report was printed left ``... +185 morekarpy: interrupted``). A write cut short by the
    interrupt counts as mid-line: how much of it reached the screen is not known."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.mid_line = False

    def write(self, text: str) -> int:
        """Write ``text`` (returns the count the wrapped stream returns)."""
        if text:
            self.mid_line = True  # until the write is done
        written = self._out.write(text)
        if text:
            self.mid_line = not text.endswith("\n")
        return int(written)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def _track_line_ends() -> None:
    """Wrap ``sys.stdout`` in :class:`_LineEnds` when stdout and stderr are both terminals."""
    import sys

    with contextlib.suppress(Exception):
        if sys.stdout.isatty() and sys.stderr.isatty():
            sys.stdout = _LineEnds(sys.stdout)


def _option_value(argv: list[str], opts: list[str]) -> str | None:
    """The last value ``argv`` gives an option spelled one of ``opts`` (``--name VALUE`` or
    ``--name=VALUE``), or None."""
    found: str | None = None
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in opts:
            if eq:
                found = value
            elif i + 1 < len(argv):
                found = argv[i + 1]
    return found


def main() -> None:
    """Console-script entry point. A usage error (an unknown flag, a missing value) is one
    ``error:`` line on stderr and exit 2, like every other refused setting. Ctrl-C (SIGINT) stops
    any command at once (see :func:`_on_sigint`): ``karpy: interrupted`` on stderr, exit 130, no
    traceback; ``karpy controller`` first shuts down cleanly (its loop handles SIGINT as SIGTERM).
    When the reader of stdout goes away early (``karpy validate ... | head -1``), any command
    stops quietly, as a Unix tool killed by SIGPIPE: no message, exit :data:`EXIT_SIGPIPE` (141).
    Once a command has returned and its output is flushed, SIGINT is ignored: the run is complete
    and its exit code is the command's."""
    import signal
    import sys

    from typer.exceptions import TyperException

    signal.signal(signal.SIGINT, _on_sigint)
    _whole_writes()
    _track_line_ends()
    try:
        code = app(args=karpenter_bool_flags(sys.argv[1:]), prog_name="karpy", standalone_mode=False)
        sys.stdout.flush()  # what is still buffered, while a closed stdout can be handled here
        # The command has finished and its output is out: a Ctrl-C from here on is ignored and the
        # exit code stays the command's. Else one landing in the interpreter's teardown, which puts
        # SIGINT's default action back, killed karpy silently with 130 after a complete run (trial 11).
        if code != EXIT_INTERRUPTED:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except _StdoutClosed:
        _leave_quietly()
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        _leave_quietly()
    except (typer.Abort, KeyboardInterrupt):
        code = EXIT_INTERRUPTED
    except TyperException as exc:  # click's UsageError and its kind (typer vendors click)
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        opts = getattr(getattr(exc, "param", None), "opts", None) or []
        given = _option_value(sys.argv[1:], opts)
        bad_value = given is not None and type(exc).__name__ == "BadParameter"
        from karpy_core.settings import option_error

        # a number that did not parse reads as a setting's error does (the env name, the flag, the value)
        worded = option_error(max(opts, key=len), given, message()) if bad_value and opts and given is not None else None
        # else a value that did not parse is named, as karpy's own errors name it (click's message does not)
        shown = f", not {given!r}" if bad_value else ""
        _say(f"error: {worded}" if worded else f"error: {message()}{shown}")
        sys.exit(int(getattr(exc, "exit_code", 2) or 2))
    if code == EXIT_INTERRUPTED:  # typer turns KeyboardInterrupt into this code (no command returns it)
        _leave_now(signal.SIGINT, None)
    # What the command built and dropped (a simulation's cluster, views and plans hold reference
    # cycles: garbage only the cyclic collector frees) goes with the process: frozen, the
    # interpreter's last collection at exit skips it. It took 2.4 CPU seconds at 100,000 pods
    # (7 s wall on a loaded machine), after the report was out and with no progress line.
    import gc

    gc.freeze()
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()

