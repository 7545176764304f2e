"""JAX configuration of dp_infer: the persistent compilation cache, so compilation is paid once.

A sampler's jitted chain takes seconds to compile (every run of ``dp-infer demo`` compiled the
same programs again). :func:`enable_persistent_cache` points JAX's persistent compilation cache
at a directory of the user's cache, so a second process with the same programs (same shapes,
dtypes, JAX version and device) loads them instead of compiling them:

* directory: ``path`` if given, else ``$DP_INFER_JAX_CACHE``, else
  ``$XDG_CACHE_HOME/dp_infer/jax`` (``~/.cache/dp_infer/jax`` when ``XDG_CACHE_HOME`` is unset);
* ``DP_INFER_JAX_CACHE=off`` (or ``0``, ``false``, ``no``, ``none``) turns it off;
* programs that took at least :data:`MIN_COMPILE_SECS` (0.1 s) to compile are stored (JAX's default, 1 s,
  skips some of the chains' programs on a fast machine).

A program is found again only if it is the same program: one that closes over a value that
changes from run to run (a private step size or metric, data embedded as constants) is compiled
anew. The demo's chains close over the rows and the plan's metric, so its second run hits the
cache only with the same noise (``--reproducible-seed``), and even then compilation is a small
part of its time on a CPU (about 7 s of about a minute; docs/results.md).

Compiled programs also live in memory. JAX keeps some of them after everything that used them is gone
(on the CPU each is a handful of memory maps: the sampler programs of one NumPyro-model fit hold about
1,000), so a process that runs many fits, a simulation study say, reaches the kernel's limit on memory
maps (``vm.max_map_count``, 65,530 by default) after about 60 of them and fails with ``LLVM compilation
error: Cannot allocate memory``. :func:`release_compiled_programs` clears JAX's in-memory caches once
the process holds more than :data:`MAP_SHARE_LIMIT` of that limit; the driver
(:func:`dp_infer.infer.driver.execute`) calls it before every run. Programs are compiled again (or
loaded from the persistent cache) when next needed; no result changes.

The command line (:func:`dp_infer.cli.run`) calls it at start; a library user calls it once,
before the first fit. The cache holds compiled programs only (no data: a program receives the
rows as arguments), but JAX trusts what it loads from it: the directory is created private to the
user (mode 0700) and must not be writable by anyone else.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["ENV_VAR", "MIN_COMPILE_SECS", "OFF_VALUES", "CACHE_HIT_EVENT", "COMPILE_EVENTS", "CompileClock", "cache_dir",
           "enable_persistent_cache", "MAP_SHARE_LIMIT", "memory_map_count", "memory_map_limit",
           "release_compiled_programs"]

#: environment variable naming the cache directory (or ``off``)
ENV_VAR = "DP_INFER_JAX_CACHE"
#: values of :data:`ENV_VAR` that turn the cache off
OFF_VALUES = ("off", "0", "false", "no", "none")
#: programs that compiled in less time than this are not stored (JAX's default is 1 s; the demo's
#: chain programs take 0.3-0.9 s on 2 shared cores, the rest of its ~90 compilations less)
MIN_COMPILE_SECS = 0.1
#: share of the kernel's memory-map limit above which :func:`release_compiled_programs` clears JAX's
#: in-memory caches (half: the largest single run measured here, 8 simulated fits in one test, added
#: about 9,000 maps, a seventh of the limit)
MAP_SHARE_LIMIT = 0.5


def cache_dir(path: str | os.PathLike | None = None) -> str | None:
    """The directory :func:`enable_persistent_cache` would use, or ``None`` when turned off."""
    if path is None:
        env = os.environ.get(ENV_VAR, "").strip()
        if env.lower() in OFF_VALUES:
            return None
        if env:
            path = env
        else:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            path = os.path.join(base, "dp_infer", "jax")
    elif str(path).strip().lower() in OFF_VALUES:
        return None
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def enable_persistent_cache(path: str | os.PathLike | None = None, *,
                            min_compile_time_secs: float = MIN_COMPILE_SECS) -> str | None:
    """Turn on JAX's persistent compilation cache in ``path`` (default: see the module docstring).

    Returns the directory used, or ``None`` when the cache is turned off (``path`` or
    ``$DP_INFER_JAX_CACHE`` is ``off``) or the directory cannot be created (a warning says why;
    nothing else changes: programs are then compiled in every process, as without the cache).
    Call it before the first compilation you want cached; calling it again with another
    directory switches to that one."""
    import jax

    d = cache_dir(path)
    if d is None:
        return None
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError as e:
        warnings.warn(f"dp_infer: the JAX compilation cache is off ({d}: {e.strerror or e}); "
                      f"set {ENV_VAR} to a writable directory, or to 'off' to silence this", stacklevel=2)
        return None
    previous = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", d)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if previous and os.path.abspath(previous) != d:  # JAX opened the old directory already: reopen
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
    return d


#: JAX's monitoring events (durations in seconds) that make up one compilation: tracing to a
#: jaxpr, lowering to MLIR, and XLA's backend compile (or, on a persistent-cache hit, the load)
COMPILE_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
                  "/jax/core/compile/backend_compile_duration": "xla"}
#: JAX's event for a program loaded from the persistent compilation cache
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


class CompileClock:
    """Seconds this process spends compiling while the clock runs, from JAX's own monitoring events
    (:data:`COMPILE_EVENTS`), so a run can report compilation apart from sampling::

        with CompileClock() as clock:
            run = dp_infer.fit(...)
        clock.seconds          # trace + lower + XLA, wall seconds (all threads)
        clock.parts["xla"]     # XLA's backend compile, or the load of a cached program
        clock.programs         # programs compiled or loaded by XLA
        clock.cache_hits       # of which loaded from the persistent compilation cache

    Assumes compilations run on the calling process (JAX's default); a compilation that another
    clock's thread does at the same time is counted by both."""

    def __init__(self):
        self.parts = {name: 0.0 for name in COMPILE_EVENTS.values()}
        self.programs = 0
        self.cache_hits = 0
        self._listening = False

    def _duration(self, event: str, duration: float, **_kw) -> None:
        part = COMPILE_EVENTS.get(event)
        if part is not None and self._listening:
            self.parts[part] += float(duration)
            self.programs += part == "xla"

    def _event(self, event: str, **_kw) -> None:
        if self._listening:
            self.cache_hits += event == CACHE_HIT_EVENT

    @property
    def seconds(self) -> float:
        return float(sum(self.parts.values()))

    @property
    def compiled(self) -> int:
        """Programs XLA compiled (not found in the persistent cache)."""
        return self.programs - self.cache_hits

    def __enter__(self) -> "CompileClock":
        import jax

        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)
        self._listening = True
        return self

    def __exit__(self, *exc) -> None:
        import jax

        if self._listening:
            self._listening = False  # the listeners count nothing from here on, whatever the JAX version
            for name, fn in (("unregister_event_duration_listener", self._duration),
                             ("unregister_event_listener", self._event)):
                unregister = getattr(jax.monitoring, name, None)  # absent from older JAX: left registered, idle
                if unregister is not None:
                    unregister(fn)


def memory_map_count() -> int | None:
    """The number of memory maps this process holds (lines of ``/proc/self/maps``); None where the
    system does not say (not Linux)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def memory_map_limit() -> int | None:
    """The kernel's limit on a process's memory maps (``/proc/sys/vm/max_map_count``); None where the
    system does not say."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def release_compiled_programs(share: float = MAP_SHARE_LIMIT) -> bool:
    """Clear JAX's in-memory compilation caches (``jax.clear_caches()``) and collect garbage when this
    process holds more than ``share`` (in (0, 1]) of the kernel's memory-map limit; returns whether it
    did. Nothing happens where the count or the limit is unknown. Only compiled programs and traces are
    dropped: a later call compiles (or loads from the persistent cache) what it needs."""
    if not (isinstance(share, (int, float)) and 0.0 < share <= 1.0):
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    count, limit = memory_map_count(), memory_map_limit()
    if count is None or limit is None or count <= share * limit:
        return False
    import gc

    import jax

    jax.clear_caches()
    gc.collect()
    return True
