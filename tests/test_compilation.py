"""dp_infer.compilation: where the persistent compilation cache goes, how it is turned off, and that a
second process loads what the first compiled (two subprocesses sharing a temporary cache)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dp_infer.compilation import ENV_VAR, MIN_COMPILE_SECS, cache_dir

ROOT = Path(__file__).resolve().parents[1]


def test_cache_dir_default_env_and_off(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == str(tmp_path / "xdg" / "dp_infer" / "jax")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == str(tmp_path / "home" / ".cache" / "dp_infer" / "jax")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "mine"))
    assert cache_dir() == str(tmp_path / "mine")
    assert cache_dir(tmp_path / "given") == str(tmp_path / "given")  # an explicit path wins
    for off in ("off", "OFF", "0", "false", "none"):
        monkeypatch.setenv(ENV_VAR, off)
        assert cache_dir() is None
    assert cache_dir("off") is None
    assert MIN_COMPILE_SECS <= 0.1  # the demo's chain programs compile in 0.3-0.9 s


SCRIPT = textwrap.dedent("""
    import logging, os, sys
    from dp_infer.compilation import enable_persistent_cache
    d = enable_persistent_cache(None if len(sys.argv) < 2 else sys.argv[1], min_compile_time_secs=0.0)
    print("DIR", d)
    import jax, jax.numpy as jnp
    logging.basicConfig(level=logging.WARNING)
    jax.config.update("jax_explain_cache_misses", False)
    from jax._src import monitoring
    hits = []
    monitoring.register_event_listener(lambda name, **kw: hits.append(name))

    @jax.jit
    def f(x):
        for _ in range(20):
            x = jnp.sin(x) @ x.T + jnp.cos(x)
        return x.sum()

    from dp_infer.compilation import CompileClock
    with CompileClock() as clock:
        value = float(f(jnp.ones((16, 16))))
    print("VALUE", value)
    print("HIT", int("/jax/compilation_cache/cache_hits" in hits))
    print("CLOCK", clock.programs, clock.compiled, clock.cache_hits, int(clock.seconds > 0))
""")


def _run(tmp_path, *args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env.update({"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}, **(env_extra or {}))
    p = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)


def test_second_process_hits_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path, str(cache))
    assert first["DIR"] == str(cache) and first["HIT"] == "0"
    entries = sorted(os.listdir(cache))
    assert entries, "the first process stored nothing"
    assert (os.stat(cache).st_mode & 0o077) == 0  # private to the user
    second = _run(tmp_path, str(cache))
    assert second["HIT"] == "1" and second["VALUE"] == first["VALUE"]
    assert sorted(os.listdir(cache)) == entries  # loaded, nothing new compiled
    # the compile clock tells a compiled program from a loaded one (f, and the small programs JAX runs beside it)
    programs, compiled, hits, timed = map(int, first["CLOCK"].split())
    assert programs >= 1 and compiled == programs and hits == 0 and timed == 1
    programs2, compiled2, hits2, timed2 = map(int, second["CLOCK"].split())
    assert programs2 == programs and hits2 >= 1 and compiled2 == programs2 - hits2 and timed2 == 1


def test_compile_clock_counts_only_while_it_runs():
    import jax
    import jax.numpy as jnp

    from dp_infer.compilation import CompileClock

    # the persistent cache off while the clock runs: under xdist another worker may have stored one of these small
    # programs in the shared cache (a fresh-clone run of 2026-11-30 loaded 1 of 3 from it: compiled 2, programs 3)
    cache_on = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        with CompileClock() as clock:
            jax.jit(lambda x: jnp.tanh(x) * 3.25 + 1.5)(jnp.ones(7)).block_until_ready()
    finally:
        jax.config.update("jax_enable_compilation_cache", cache_on)
    seen, parts = clock.programs, dict(clock.parts)
    assert seen >= 1 and clock.compiled == seen and clock.cache_hits == 0
    assert parts["trace"] > 0 and parts["lower"] > 0 and parts["xla"] > 0
    assert clock.seconds == pytest.approx(sum(parts.values()))
    jax.jit(lambda x: jnp.tanh(x) * 4.25 - 1.5)(jnp.ones(9)).block_until_ready()  # after the clock stopped
    assert clock.programs == seen and clock.parts == parts
    # where JAX cannot unregister a listener (older versions), a stopped clock's listeners stay idle
    import jax.monitoring as monitoring

    with CompileClock() as idle:
        pass
    fn = getattr(monitoring, "unregister_event_duration_listener")
    try:
        monkey = CompileClock()
        with monkey:
            delattr(monitoring, "unregister_event_duration_listener")
        jax.jit(lambda x: jnp.tanh(x) * 5.25)(jnp.ones(5)).block_until_ready()
        assert monkey.programs == 0 and monkey.parts["xla"] == 0.0
    finally:
        monitoring.unregister_event_duration_listener = fn
        monitoring.unregister_event_duration_listener(monkey._duration)
    assert idle.programs == 0
    with CompileClock() as again:
        jax.jit(lambda x: jnp.tanh(x) * 3.25 + 1.5)(jnp.ones(7))  # a new function object: traced and compiled again
        jax.block_until_ready(jnp.ones(1))
    assert again.programs >= 1


def test_env_off_stores_nothing(tmp_path):
    xdg = tmp_path / "xdg"
    out = _run(tmp_path, env_extra={ENV_VAR: "off", "XDG_CACHE_HOME": str(xdg)})
    assert out["DIR"] == "None" and out["HIT"] == "0" and not xdg.exists()


def test_env_directory_is_used(tmp_path):
    cache = tmp_path / "from_env"
    out = _run(tmp_path, env_extra={ENV_VAR: str(cache)})
    assert out["DIR"] == str(cache) and any(cache.iterdir())


def test_unwritable_directory_only_warns(tmp_path):
    from dp_infer.compilation import enable_persistent_cache

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(UserWarning, match="compilation cache is off"):
        assert enable_persistent_cache(blocker / "jax") is None


# ------------------------------------------------------------- compiled programs held in memory
# Oracle: the kernel's own count of this process's memory maps, and a jitted function's own cache size.
linux_only = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="memory maps are read from /proc")


def _held_programs(count: int):
    """``count`` programs of one jitted function (one per static value), all kept by its cache."""
    import functools

    import jax
    import jax.numpy as jnp

    @functools.partial(jax.jit, static_argnums=1)
    def g(x, i):
        return jnp.sin(x) * i + jnp.cos(x * i)

    for i in range(count):
        g(jnp.ones(3), i).block_until_ready()
    return g


@linux_only
def test_release_clears_held_programs_only_above_the_share(monkeypatch):
    from dp_infer import compilation

    before = compilation.memory_map_count()
    g = _held_programs(100)
    grown = compilation.memory_map_count()
    assert g._cache_size() == 100
    assert grown >= before + 100  # each CPU program holds at least one map of its own (measured: about 3)
    assert compilation.memory_map_limit() > grown
    assert compilation.release_compiled_programs() is False  # far below half the limit: kept
    assert g._cache_size() == 100
    monkeypatch.setattr(compilation, "memory_map_limit", lambda: grown)  # now the process holds all of it
    assert compilation.release_compiled_programs(0.99) is True
    assert g._cache_size() == 0
    assert compilation.memory_map_count() <= grown - 100


def test_release_needs_a_count_and_a_limit(monkeypatch):
    from dp_infer import compilation

    g = _held_programs(2)
    monkeypatch.setattr(compilation, "memory_map_limit", lambda: None)
    assert compilation.release_compiled_programs(1e-9) is False
    monkeypatch.setattr(compilation, "memory_map_limit", lambda: 1)
    monkeypatch.setattr(compilation, "memory_map_count", lambda: None)
    assert compilation.release_compiled_programs(1e-9) is False
    assert g._cache_size() == 2
    monkeypatch.setattr(compilation, "memory_map_count", lambda: 2)
    assert compilation.release_compiled_programs(1.0) is True  # 2 > 1.0 * 1
    assert g._cache_size() == 0


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5, float("nan"), "half"])
def test_release_refuses_a_share_outside_0_1(share):
    from dp_infer.compilation import release_compiled_programs

    with pytest.raises(ValueError, match=r"share must be in \(0, 1\]"):
        release_compiled_programs(share)


def test_every_run_through_the_driver_releases_first(monkeypatch):
    """The driver asks before each run; a process at the limit gets its programs released before the
    run, and one below it keeps them."""
    import numpy as np

    import dp_infer
    from dp_infer import compilation, losses

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (rng.random(200) < 0.5).astype(float)
    g = _held_programs(3)
    dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, seed=0, num_chains=1)
    assert g._cache_size() == 3
    monkeypatch.setattr(compilation, "memory_map_count", lambda: 10)
    monkeypatch.setattr(compilation, "memory_map_limit", lambda: 10)
    asked = []
    real = compilation.release_compiled_programs
    monkeypatch.setattr(compilation, "release_compiled_programs", lambda *a: asked.append(a) or real(*a))
    monkeypatch.setattr(compilation, "memory_map_count", lambda: 11)
    dp_infer.fit(losses.logistic(), X, y, eps=1.0, delta=1e-5, seed=0, num_chains=1)
    assert asked == [()] and g._cache_size() == 0
