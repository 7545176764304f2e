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

    with CompileClock() as clock:
        jax.jit(lambda x: jnp.tanh(x) * 3.25 + 1.5)(jnp.ones(7)).block_until_ready()
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
