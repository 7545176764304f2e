"""The second moment's sensitivity, tight (issue 40 part 3): what the sqrt(2) taken out of ``X'X / n``'s
bound buys a posterior plan on Adult's shape (n = 30,162, d = 108, the private metric's default share 0.1,
delta = 1e-5), planned with the old constant (2, the triangle inequality) and the exact one (sqrt(2),
attained: :data:`dp_infer.routes.preconditioning.GRAM_SENSITIVITY_FACTOR`).

Public arithmetic only: the forecast (:func:`dp_infer.routes.forecast.forecast_posterior`) plans exactly
as the run does before its release. Command: ``python -m benchmarks.tightness``.
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


def main():
    print("| sensitivity constant | eps | X'X/n noise sd per entry | its spectral bound | beta / n | steps (forecast) "
          "| interval release's curvature signal to noise (d = 100) |\n|---|---|---|---|---|---|---|")
    for r in rows():
        print(f"| {r['constant']} | {r['eps']:g} | {r['noise_sd']:.3g} | {r['spectral']:.3g} | {r['beta_over_n']:.5f} | "
              f"{r['steps']} | {r['snr']:.2f} |")


if __name__ == "__main__":
    main()
