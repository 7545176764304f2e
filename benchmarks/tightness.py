"""The second moment's sensitivity, tight (issue 40 part 3): what the sqrt(2) taken out of ``X'X / n``'s
bound buys a posterior plan on Adult's shape (n = 30,162, d = 108, the private metric's default share 0.1,
delta = 1e-5), planned with the old constant (2, the triangle inequality) and the exact one (sqrt(2),
attained: :data:`dp_infer.routes.preconditioning.GRAM_SENSITIVITY_FACTOR`).

Public arithmetic only: the forecast (:func:`dp_infer.routes.forecast.forecast_posterior`) plans exactly
as the run does before its release. Command: ``python -m benchmarks.tightness``.

And the replace-one minibatch accounting (issue 40 part 3, :mod:`dp_infer.privacy.minibatch`): eps at delta
= 1e-5 of K T Poisson-subsampled Gaussian steps by the module's curve (the antipodal pair's Renyi divergence),
by the bound it replaced (group privacy through a zero record: dp-accounting's REPLACE_SPECIAL curve and the
weak triangle inequality, min with the unamplified 2C curve; :func:`old_replace_one_curve`, kept here as the
baseline) and by dp-accounting's REPLACE_ONE PLD of the same pair (discretisation 1e-4), and the beta each
accounting allows at eps = 1.
"""

from __future__ import annotations

import math


def rows(eps_list=(1.0, 4.0)) -> list[dict]:
    import dp_infer.routes.newton_release as newton
    import dp_infer.routes.preconditioning as pre
    from dp_infer import losses
    from dp_infer.privacy.conversions import gdp_mu
    from dp_infer.routes.forecast import forecast_posterior

    loss, n, d = losses.logistic(row_norm=1.0), 30162, 108
    exact = pre.GRAM_SENSITIVITY_FACTOR
    out = []
    try:
        for name, factor in (("2 (triangle inequality)", 2.0), ("sqrt(2) (exact)", exact)):
            pre.GRAM_SENSITIVITY_FACTOR = newton.GRAM_SENSITIVITY_FACTOR = factor
            for eps in eps_list:
                mu = gdp_mu(eps, 1e-5)
                f = forecast_posterior(loss, n, d, eps=eps, delta=1e-5, prior_precision=0.17)
                sm = pre.pending_second_moment(n, d, max_sq_norm=1.0, mu=math.sqrt(0.1) * mu)
                out.append({"constant": name, "eps": eps, "noise_sd": sm.noise_sd, "spectral": sm.noise_norm_bound,
                            "beta_over_n": f.beta_over_n, "steps": f.num_steps,
                            "snr": newton.curvature_snr(n, 100, mu)})
    finally:
        pre.GRAM_SENSITIVITY_FACTOR = newton.GRAM_SENSITIVITY_FACTOR = exact
    return out


#: noise multiplier, sampling rate, steps: the minibatch table's settings
MINIBATCH_SETTINGS = ((0.8, 0.01, 1000), (1.5, 0.001, 1000), (1.5, 0.01, 100), (1.5, 0.01, 1000), (3.0, 0.001, 1000),
                      (3.0, 0.01, 1000), (7.3, 0.01, 8000))
_OLD_PS = (1.25, 1.5, 2.0, 3.0, 4.0)


def old_replace_one_curve(alphas, beta, h, t, q, c, n):
    """The replace-one curve of dp_infer.privacy.minibatch until 2026-11-29: min over p of Mironov's weak
    triangle inequality on dp-accounting's REPLACE_SPECIAL curve, min with the 2C Gaussian curve."""
    import numpy as np

    from dp_infer.privacy import minibatch as mb

    al = np.asarray(alphas, dtype=np.float64)
    ps = np.asarray(_OLD_PS)
    o1 = np.outer(ps, al)
    o2 = (o1 - 1.0) / (ps[:, None] - 1.0)
    need = np.unique(np.concatenate([o1.ravel(), o2.ravel()]))
    look = dict(zip(need.tolist(), mb.minibatch_base_rdp(need, beta, h, t, q, c, n).tolist()))
    r1, r2 = np.vectorize(look.__getitem__)(o1), np.vectorize(look.__getitem__)(o2)
    tri = np.min((al[None, :] - 1.0 / ps[:, None]) / (al[None, :] - 1.0) * r1 + r2, axis=0)
    return np.minimum(tri, 2.0 * t * al / mb.minibatch_noise_multiplier(beta, h, q, c, n) ** 2)


def minibatch_rows(settings=MINIBATCH_SETTINGS, delta: float = 1e-5) -> list[dict]:
    from dp_infer.privacy import minibatch as mb
    from dp_infer.privacy.conversions import rdp_epsilon

    n, h = 100_000, 1e-3
    out = []
    for sigma, q, t in settings:
        beta = q * n * math.sqrt(2.0 / h) / sigma
        al = mb.DEFAULT_ALPHAS
        now = mb.minibatch_epsilon(beta, h, t, q, 1.0, n, delta, pld_check=False)
        curve = rdp_epsilon(now["event"].orders, now["event"].values, delta)[0]  # the event's RDP curve alone
        old = rdp_epsilon(al, old_replace_one_curve(al, beta, h, t, q, 1.0, n), delta)[0]
        pld = mb.minibatch_pld_epsilon(beta, h, t, q, 1.0, n, delta, discretization=1e-4)
        b_new = mb.minibatch_beta_max(1.0, delta, h, t, q, 1.0, n)
        out.append({"sigma": sigma, "q": q, "steps": t, "eps_old": old, "eps_curve": curve,
                    "eps_new": now["epsilon"], "route": now["route"], "eps_pld": pld,
                    "beta_gain": b_new / _old_beta_max(1.0, delta, h, t, q, n)})
    return out


def _old_beta_max(eps, delta, h, t, q, n, rtol=1e-4):
    from dp_infer.privacy import minibatch as mb
    from dp_infer.privacy.conversions import rdp_epsilon

    def e(b):
        return rdp_epsilon(mb.DEFAULT_ALPHAS, old_replace_one_curve(mb.DEFAULT_ALPHAS, b, h, t, q, 1.0, n), delta)[0]

    lo, hi = 1.0, 4.0
    while e(hi) <= eps:
        lo, hi = hi, 4.0 * hi
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if e(mid) <= eps else (lo, mid)
    return lo


def main():
    print("| noise multiplier | q | steps | eps, old bound | eps, antipodal RDP curve | eps, now (route) "
          "| eps, dp-accounting REPLACE_ONE PLD | old / PLD | curve / PLD | now / PLD | beta at eps = 1, now / old |"
          "\n|---|---|---|---|---|---|---|---|---|---|---|")
    for r in minibatch_rows():
        print(f"| {r['sigma']:g} | {r['q']:g} | {r['steps']} | {r['eps_old']:.4g} | {r['eps_curve']:.4g} | "
              f"{r['eps_new']:.4g} ({r['route']}) | {r['eps_pld']:.4g} | {r['eps_old'] / r['eps_pld']:.3f} | "
              f"{r['eps_curve'] / r['eps_pld']:.3f} | {r['eps_new'] / r['eps_pld']:.4f} | {r['beta_gain']:.3f} |")
    print()
    print("| sensitivity constant | eps | X'X/n noise sd per entry | its spectral bound | beta / n | steps (forecast) "
          "| interval release's curvature signal to noise (d = 100) |\n|---|---|---|---|---|---|---|")
    for r in rows():
        print(f"| {r['constant']} | {r['eps']:g} | {r['noise_sd']:.3g} | {r['spectral']:.3g} | {r['beta_over_n']:.5f} | "
              f"{r['steps']} | {r['snr']:.2f} |")


if __name__ == "__main__":
    main()
