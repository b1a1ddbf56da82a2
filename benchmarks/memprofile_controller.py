"""``karpy controller`` under tracemalloc, for a memory profile (never a timed run).

``benchmarks/controller_apiserver.py --memory-profile`` starts the controller through this file
instead of ``python -m karpy_core.cli``: the arguments are the controller's. tracemalloc traces
every allocation (``KARPY_TRACEMALLOC_FRAMES`` frames each, default 8; 0: no tracemalloc, the
report's cache, metrics, modules and heap-by-type parts only), a sampling thread keeps the
snapshot taken at the highest traced size seen so far (at most one every 20 s), and ``SIGUSR1`` writes a plain-text
report to ``$KARPY_MEMPROFILE_OUT``:

* RSS and its peak (VmHWM), the traced size now and at its peak, and the resident MiB of
  file-backed mappings (shared libraries) against anonymous memory (the heap), from
  ``/proc/self/smaps``;
* the informer cache by kind: objects, MiB of the cached raw dicts, MiB of the parsed views
  beyond them (deep ``sys.getsizeof``, shared objects counted once);
* Prometheus series (samples per metric family);
* imported modules (count; traced MiB of allocations made while importing);
* traced MiB by the innermost karpy function on the allocation's stack, and by source line,
  now and at the traced peak;
* the GC-tracked heap by type (count, shallow MiB).

It also writes one cached object of each kind, as the cache holds it, to ``<out>.objects.json``.

tracemalloc slows the controller several times over and adds its own memory (about 1.5x the
traced size): the profile says where memory goes, the timed runs say how much there is.
"""

from __future__ import annotations

import collections
import gc
import json
import os
import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

MiB = 1024 * 1024


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _smaps() -> tuple[float, float]:
    """Resident MiB of (file-backed, anonymous) mappings."""
    files = anon = 0
    path = ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 1)[0]
        if not head.endswith(":"):  # a mapping's header line: range perms offset dev inode [path]
            parts = line.split()
            path = parts[5] if len(parts) > 5 else ""
            continue
        if head == "Rss:":
            kb = int(line.split()[1])
            if path.startswith("/"):
                files += kb
            else:
                anon += kb
    return files / 1024, anon / 1024


def deep_size(objs: Iterable[Any], seen: set[int]) -> int:
    """Bytes of ``objs`` and everything they reach through dicts, lists, tuples, sets and
    ``__slots__``/``__dict__``, each object counted once across calls sharing ``seen``."""
    total = 0
    stack = list(objs)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (type, ModuleType)) or (callable(o) and not hasattr(o, "__dict__")):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif not isinstance(o, (str, bytes, int, float, bool)) and o is not None:
            for cls in type(o).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    if hasattr(o, slot):
                        stack.append(getattr(o, slot))
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
    return total


def _karpy_frame(tb: tracemalloc.Traceback) -> str:
    for frame in tb:  # most recent first
        if "/karpy_core/" in frame.filename or "/karpy_aws/" in frame.filename:
            return f"{frame.filename.split('/karpy_core/')[-1]}:{frame.lineno}"
    return "(outside karpy: " + (tb[0].filename.rsplit("site-packages/", 1)[-1] if len(tb) else "?") + ")"


def _by_karpy(snap: tracemalloc.Snapshot, top: int) -> list[str]:
    sizes: collections.Counter[str] = collections.Counter()
    for stat in snap.statistics("traceback"):
        sizes[_karpy_frame(stat.traceback)] += stat.size
    return [f"  {size / MiB:8.2f}  {where}" for where, size in sizes.most_common(top)]


def _imports(snap: tracemalloc.Snapshot) -> float:
    total = 0
    for stat in snap.statistics("traceback"):
        if any(f.filename.startswith("<frozen importlib") for f in stat.traceback):
            total += stat.size
    return total / MiB


class Sampler:
    """Keeps the snapshot of the highest traced size (checked every ``every`` seconds)."""

    def __init__(self, every: float = 2.0, gap: float = 20.0) -> None:
        self.best = 0
        self.snapshot: tracemalloc.Snapshot | None = None
        self.at = 0.0
        self.every = every
        self.gap = gap
        threading.Thread(target=self._run, daemon=True, name="memprofile").start()

    def _run(self) -> None:
        # A snapshot holds the GIL for seconds at this size: one at most every ``gap`` seconds,
        # and only for a peak at least 10% (and 8 MiB) above the last one.
        start = last = time.monotonic()
        while True:
            time.sleep(self.every)
            current, _ = tracemalloc.get_traced_memory()
            if current > max(self.best * 1.1, self.best + 8 * MiB) and time.monotonic() - last > self.gap:
                snap = tracemalloc.take_snapshot()
                last = time.monotonic()
                self.best, self.snapshot, self.at = current, snap, last - start


def _cache_report() -> list[str]:
    from karpy_core.kube.cache import CachedKubeClient

    lines = []
    for cache in [o for o in gc.get_objects() if isinstance(o, CachedKubeClient)]:
        lines.append("informer cache (kind: objects, raw dicts MiB, views beyond the raw dicts MiB):")
        total_raw = total_views = 0
        for kind, store in cache._store.items():
            seen: set[int] = set()
            raw = deep_size(store.values(), seen)
            views = deep_size(cache._views.get(kind, {}).values(), seen)
            total_raw += raw
            total_views += views
            if store:
                lines.append(f"  {kind:24s} {len(store):6d}  {raw / MiB:7.2f}  {views / MiB:7.2f}")
        lines.append(f"  {'total':24s} {'':6s}  {total_raw / MiB:7.2f}  {total_views / MiB:7.2f}")
    return lines


def _metrics_report() -> list[str]:
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        return []
    families = list(REGISTRY.collect())
    samples = sum(len(f.samples) for f in families)
    top = sorted(families, key=lambda f: -len(f.samples))[:8]
    return [f"prometheus: {len(families)} families, {samples} samples; largest: "
            + ", ".join(f"{f.name} {len(f.samples)}" for f in top)]


def report(sampler: Sampler | None) -> str:
    files, anon = _smaps()
    lines = [
        f"RSS {_status('VmRSS'):.1f} MiB, peak RSS (VmHWM) {_status('VmHWM'):.1f} MiB "
        f"(tracemalloc's own bookkeeping included: {tracemalloc.get_tracemalloc_memory() / MiB:.1f} MiB)",
        f"resident: file-backed mappings (libraries) {files:.1f} MiB, anonymous (heap) {anon:.1f} MiB",
        f"modules imported: {len(sys.modules)}",
    ]
    lines += _cache_report()
    lines += _metrics_report()
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        lines.append(f"traced now {current / MiB:.1f} MiB, traced peak {peak / MiB:.1f} MiB; traced MiB allocated "
                     f"while importing (still held): {_imports(snap):.1f}")
        lines.append("traced MiB now by the innermost karpy frame of the allocation:")
        lines += _by_karpy(snap, 30)
    if sampler is not None and sampler.snapshot is not None:
        lines.append(f"peak snapshot: {sampler.best / MiB:.1f} MiB traced, {sampler.at:.0f} s after start")
        lines.append("traced MiB at the traced peak by the innermost karpy frame of the allocation:")
        lines += _by_karpy(sampler.snapshot, 30)
        lines.append("traced MiB at the traced peak by line:")
        lines += [f"  {s.size / MiB:8.2f}  {s.traceback[0].filename.rsplit('site-packages/', 1)[-1]}:{s.traceback[0].lineno}"
                  for s in sampler.snapshot.statistics("lineno")[:25]]
    lines.append("GC-tracked objects by type (count, shallow MiB):")
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for o in gc.get_objects():
        name = type(o).__qualname__
        counts[name] += 1
        sizes[name] += sys.getsizeof(o)
    lines += [f"  {sizes[n] / MiB:8.2f}  {counts[n]:8d}  {n}" for n, _ in sizes.most_common(20)]
    return "\n".join(lines) + "\n"


def main() -> None:
    frames = int(os.environ.get("KARPY_TRACEMALLOC_FRAMES", "8"))
    sampler = None
    if frames > 0:
        tracemalloc.start(frames)
        sampler = Sampler()
    out = Path(os.environ["KARPY_MEMPROFILE_OUT"])

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        from karpy_core.kube.cache import CachedKubeClient

        for cache in [o for o in gc.get_objects() if isinstance(o, CachedKubeClient)]:
            samples = {kind: next(iter(store.values())) for kind, store in cache._store.items() if store}
            out.with_suffix(".objects.json").write_text(json.dumps(samples, indent=1))
        tmp = out.with_suffix(".tmp")
        tmp.write_text(report(sampler))
        tmp.replace(out)

    signal.signal(signal.SIGUSR1, on_usr1)
    from karpy_core.cli import main as karpy_main

    sys.argv = ["karpy", *sys.argv[1:]]
    karpy_main()


if __name__ == "__main__":
    main()
