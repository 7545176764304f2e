"""Kernel overhead: NumPyro-driven kernels vs hand-written lax.scan loops of the same update.

For each problem (Adult logistic potential; synthetic large-n logistic) and each kernel
(overdamped ULA, underdamped Euler-kinetic) we time ``num_steps`` steps of:

* ``numpyro``: ``MCMC(Langevin/UnderdampedLangevin(potential_fn=...), num_warmup=0,
  progress_bar=False)`` (second call of ``run``: compiled and cached), draws collected;
* ``core``: our functional core ``langevin.sample_chain`` / ``underdamped.sample_chain``;
* ``inline``: a minimal ``lax.scan`` with the update written out (gradient by ``jax.grad``,
  the same as the kernels), collecting the positions too;
* ``blackjax_mala`` (if blackjax is installed): BlackJAX MALA step in a ``lax.scan`` (a
  different, Metropolis-adjusted update: one extra potential evaluation per step).

Ratio reported: marginal per-step cost of the inline loop divided by the variant's (slope between
a short and a long run, interleaved, best of several rounds), measured in the same run; the
per-run fixed cost (compilation, NumPyro's per-run re-compilation of its collection loop) and
the ratio of total times at the long run are reported too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax, random
from numpyro.infer import MCMC

from dp_infer.kernels import Langevin, UnderdampedLangevin, langevin, underdamped

from ._common import logistic_potential, marginal_step_times, synthetic_logistic


def _inline_ula(U, h, num_steps, d):
    g = jax.grad(U)

    @jax.jit
    def run(key, x0):
        def body(carry, _):
            x, k = carry
            k, kn = random.split(k)
            x = x - h * g(x) + jnp.sqrt(2 * h) * random.normal(kn, x.shape)
            return (x, k), x

        return lax.scan(body, (x0, key), None, length=num_steps)[1]

    return run


def _inline_uld(U, h, gamma, num_steps, d):
    g = jax.grad(U)

    @jax.jit
    def run(key, x0):
        k0, key = random.split(key)
        v0 = random.normal(k0, x0.shape)

        def body(carry, _):
            x, v, k = carry
            k, kn = random.split(k)
            v = v - h * (gamma * v + g(x)) + jnp.sqrt(2 * gamma * h) * random.normal(kn, x.shape)
            x = x + h * v
            return (x, v, k), x

        return lax.scan(body, (x0, v0, key), None, length=num_steps)[1]

    return run


def _blackjax_mala(U, h, num_steps):
    import blackjax

    alg = blackjax.mala(lambda x: -U(x), h)

    @jax.jit
    def run(key, x0):
        st = alg.init(x0)

        def body(s, k):
            s, _ = alg.step(k, s)
            return s, s.position

        return lax.scan(body, st, random.split(key, num_steps))[1]

    return run


def bench_problem(name, X, y, num_steps, *, repeats=2, log=print):
    n, d = X.shape
    beta = float(n)
    U, _ = logistic_potential(X, y, beta)
    M_U = beta / 4 + 1.0
    h = 0.5 / M_U
    gamma = 2.0
    h_u = min(0.5 / M_U ** 0.5, 0.5 / gamma)
    x0 = jnp.zeros(d)
    key = random.PRNGKey(0)
    pot = lambda z: U(z["theta"])  # noqa: E731
    rows = []

    def numpyro_maker(make_kernel):
        def mk(steps):
            mcmc = MCMC(make_kernel(), num_warmup=0, num_samples=steps, progress_bar=False)
            ks = iter(random.split(key, 1000))

            def go():
                mcmc.run(next(ks), init_params={"theta": x0})
                return mcmc.get_samples()["theta"]

            return go

        return mk

    def jitted(build):
        def mk(steps):
            f = jax.jit(build(steps))
            return lambda: f(key, x0)

        return mk

    makers = {
        "langevin": {
            "numpyro": numpyro_maker(lambda: Langevin(potential_fn=pot, step_size=h)),
            "core": jitted(lambda s: (lambda k, x: langevin.sample_chain(k, U, x, h, s).z)),
            "inline": jitted(lambda s: _inline_ula(U, h, s, d)),
        },
        "underdamped": {
            "numpyro": numpyro_maker(lambda: UnderdampedLangevin(potential_fn=pot, step_size=h_u, friction=gamma)),
            "core": jitted(lambda s: (lambda k, x: underdamped.sample_chain(k, U, x, h_u, gamma, s).z)),
            "inline": jitted(lambda s: _inline_uld(U, h_u, gamma, s, d)),
        },
    }
    try:
        import blackjax  # noqa: F401

        makers["langevin"]["blackjax_mala"] = jitted(lambda s: _blackjax_mala(U, h, s))
        bj = True
    except ImportError:
        bj = False
    small = max(2, num_steps // 5)
    for kname, mks in makers.items():
        res = marginal_step_times(mks, small, num_steps, rounds=repeats)
        base = res["inline"]
        for vname, r in res.items():
            log(f"  [kernels] {name} {kname} {vname}: {1 / r['per_step_s']:.1f} steps/s (marginal), "
                f"fixed per run {r['fixed_s']:.2f} s")
            rows.append({"problem": name, "n": n, "d": d, "kernel": kname, "variant": vname,
                         "steps": num_steps, "seconds": r["total_s"], "fixed_s": r["fixed_s"],
                         "steps_per_s": 1 / r["per_step_s"],
                         "ratio_vs_inline": base["per_step_s"] / r["per_step_s"],
                         "ratio_total_vs_inline": base["total_s"] / r["total_s"]})
    return rows, bj


def run(quick: bool, log=print):
    from dp_infer.datasets import load_adult

    a = load_adult()
    X = jnp.asarray(a.X_train, jnp.float32)
    y = jnp.asarray(a.y_train, jnp.float32)
    rows, bj = bench_problem("adult", X, y, 600 if quick else 1000, repeats=1 if quick else 2, log=log)
    n_big = 200_000 if quick else 1_000_000
    Xs, ys = synthetic_logistic(n_big, 100)
    r2, _ = bench_problem(f"synthetic", Xs, ys, 60, repeats=1, log=log)
    return {"rows": rows + r2, "blackjax": bj}
