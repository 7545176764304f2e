"""Empirical privacy audits (dp_infer.audit) for every route: claimed eps vs 95% lower bound."""

from __future__ import annotations

import time

from dp_infer import audit


def run(quick: bool, log=print):
    n = 40_000 if quick else 400_000
    cases = [
        ("quadratic", "trajectory", dict(eps=3.0, delta=1e-5)),
        ("quadratic", "trajectory", dict(eps=1.0, delta=1e-5)),
        ("quadratic", "trajectory_unsafe", dict(eps=2.0, delta=1e-3)),
        ("quadratic", "trajectory_unsafe", dict(eps=1.0, delta=1e-5)),
        ("quadratic", "last_iterate", dict(eps=3.0, delta=1e-5)),
        ("quadratic", "stationary", dict(eps=3.0, delta=1e-5)),
        ("quadratic", "pure", dict(eps=3.0)),
        ("quadratic", "purified", dict(eps=3.0, delta=1e-5)),
        ("quadratic", "rashomon_path", dict(eps=2.0, delta=1e-5, psi=0.01)),
        ("quadratic", "rashomon_path_unsafe", dict(eps=2.0, delta=1e-5, psi=0.01, statistic="mean")),
        ("logistic", "trajectory", dict(eps=2.0, delta=1e-5)),
        ("logistic", "trajectory_unsafe", dict(eps=2.0, delta=1e-5)),
    ]
    rows = []
    for fam, route, kw in cases:
        t0 = time.perf_counter()
        if fam == "quadratic":
            r = audit.quadratic_audit(route, num_samples=n, seed=0, **kw)
        else:
            r = audit.logistic_audit(num_samples=n // 10, seed=0, unsafe=route.endswith("unsafe"), **kw)
        d = r.as_dict()
        d["seconds"] = time.perf_counter() - t0
        d["requested_eps"] = kw["eps"]
        rows.append(d)
        log(f"  [audit] {fam} {route} claimed {r.claimed_eps:.3f} (delta {r.delta:g}) lower {r.eps_lower:.3f} "
            f"exact {r.eps_exact}")
    return {"rows": rows}
