r"""Iterated exponential mechanism (seed 001 Algorithm 2, Theorem E.2): pure eps-DP for
strongly convex losses, by exponential mechanisms on shrinking nested sets.

Round i = 1..k draws ``theta_i ∝ exp(-beta_i L(theta; D))`` on ``C_{i-1}`` and sets
``C_i = C_{i-1} ∩ B(theta_i, r_i)``; the output is theta_k. Privacy (digest A6, §4.9):

* one round is ``eps_i``-DP with ``beta_i = eps_i n / (G D_{i-1})``: for neighbours the log
  density ratio is at most ``beta_i osc_C (L_D - L_D') <= beta_i G D_{i-1} / n`` where G bounds
  the Lipschitz constant of a difference of two per-example losses on C_0 and ``D_{i-1}`` bounds
  the diameter of C_{i-1} (G = 2L gives the seed's ``eps_i n / (2 L ||C_{i-1}||)``). C_{i-1} is
  a post-processing of earlier outputs, so the rounds compose adaptively;
* ``eps_i = eps / 2^{k - i + 1}``, so basic composition gives ``sum eps_i = eps (1 - 2^-k) < eps``:
  the rounds are logged as :class:`~dp_infer.privacy.events.PureDpEvent` s and the
  :class:`~dp_infer.privacy.accountant.Accountant` composes them;
* the guarantee needs EXACT draws; :func:`~.gibbs_rejection.exact_gibbs_draw` provides them for
  an m-strongly convex L (rejection from a Gaussian envelope).

Number of rounds (digest A6): ``k = 1 + ceil(log2 log2(eps n / (p + ln n)))`` (1 when the inner
ratio is <= 2). Radii:

* ``radius_rule="explicit"`` (default, no hidden constant): an exact draw from the
  ``beta m``-strongly log-concave law on a convex set satisfies ``E|theta - x*|^2 <= p/(beta m)``
  (x* the minimiser over the set; integration by parts, the boundary term has the right sign on
  a convex set) and ``|theta - x*|`` concentrates as ``exp(-beta m t^2 / 2)`` (Bakry-Emery), so
  ``r_i = sqrt(p/(beta_i m)) + sqrt(2 ln(1/gamma)/(beta_i m))`` keeps the minimiser of C_0 in
  C_i with probability >= 1 - gamma per round (gamma = 1/n^3 by default, the seed's k/n^3);
* ``radius_rule="seed"``: ``r_i = sqrt(c L (p + 3 ln n) D_{i-1} / (m eps_i n))`` with the seed's
  constant c a user parameter (hidden in the paper).

Utility (Thm E.2): excess empirical risk ``O(L^2 (p^2 + p log n) / (eps^2 n^2 m))`` against
the single mechanism's ``p G D_0 / (eps n)`` (the p/beta bound, seed 001 Thm 2.4).
"""

from __future__ import annotations

import math
import jax
import numpy as np

from .._validation import check_epsilon, check_positive, check_positive_int
from ..domains import L2Ball
from ..losses import PerExampleLoss
from ..privacy.events import PureDpEvent
from ..randomness import secret_key
from ._release import Release
from .gibbs_rejection import BallIntersection, exact_gibbs_draw

__all__ = ["num_rounds", "round_epsilons", "explicit_radius", "seed_radius", "run_rounds",
           "iterated_exponential_mechanism", "exponential_mechanism"]

RADIUS_RULES = ("explicit", "seed")


def num_rounds(eps: float, n: int, dim: int) -> int:
    """``k = 1 + ceil(log2 log2(eps n / (p + ln n)))``, and 1 when eps n / (p + ln n) <= 2."""
    eps = check_epsilon(eps)
    n = check_positive_int("n", n)
    p = check_positive_int("dim", dim)
    ratio = eps * n / (p + math.log(n))
    if ratio <= 2.0:
        return 1
    return 1 + max(0, math.ceil(math.log2(math.log2(ratio))))


def round_epsilons(eps: float, rounds: int) -> tuple[float, ...]:
    """``eps_i = eps / 2^{k - i + 1}`` for i = 1..k (their sum is eps (1 - 2^-k) < eps)."""
    eps = check_epsilon(eps)
    k = check_positive_int("rounds", rounds)
    return tuple(eps / 2.0 ** (k - i + 1) for i in range(1, k + 1))


def explicit_radius(beta: float, strong_convexity: float, dim: int, failure_probability: float) -> float:
    """``sqrt(p/(beta m)) + sqrt(2 ln(1/gamma)/(beta m))`` (module docstring)."""
    bm = check_positive("beta", beta) * check_positive("strong_convexity", strong_convexity)
    if not 0.0 < failure_probability < 1.0:
        raise ValueError(f"failure_probability must lie in (0, 1), got {failure_probability!r}")
    return math.sqrt(dim / bm) + math.sqrt(2.0 * math.log(1.0 / failure_probability) / bm)


def seed_radius(c: float, lipschitz: float, dim: int, n: int, diameter: float, strong_convexity: float,
                eps_round: float) -> float:
    """Seed 001 Algorithm 2: ``sqrt(c L (p + 3 ln n) D / (m eps_i n))``."""
    c = check_positive("c", c)
    return math.sqrt(c * lipschitz * (dim + 3.0 * math.log(n)) * diameter / (strong_convexity * eps_round * n))


_MEAN_FNS: dict = {}


def _mean_loss_fn(loss: PerExampleLoss):
    """One ``(theta, (X, y)) -> L`` function object per loss, so the sampler compiles once."""
    hit = _MEAN_FNS.get(id(loss))
    if hit is None or hit[0] is not loss:
        hit = (loss, lambda theta, data: loss.mean(theta, data[0], data[1]))
        _MEAN_FNS[id(loss)] = hit
    return hit[1]


def _check_inputs(loss, X, y, domain, strong_convexity):
    if not isinstance(loss, PerExampleLoss):
        raise ValueError(f"loss must be a dp_infer PerExampleLoss, got {type(loss).__name__}")
    if not isinstance(domain, L2Ball):
        raise ValueError("domain must be an L2Ball C_0 (the exponential mechanism needs a bounded set)")
    X, y = loss.check_data(X, y)
    p = loss.num_params(X.shape[1])
    if domain.dim != p:
        raise ValueError(f"domain.dim = {domain.dim} does not match the {p} parameters")
    m = loss.constants.strong_convexity if strong_convexity is None else strong_convexity
    m = check_positive("strong_convexity", m)
    G = loss.constants.grad_diff
    if not math.isfinite(G) or G <= 0:
        raise ValueError("the loss needs a finite gradient-difference bound G on C_0: declare data bounds")
    return X, y, p, m, G


def run_rounds(loss: PerExampleLoss, X, y, *, eps_rounds, domain: L2Ball, strong_convexity: float | None = None,
               radius_rule: str = "explicit", c: float | None = None, failure_probability: float | None = None,
               key=None, anchor=None):
    """The rounds of Algorithm 2 with a given key: ``(theta_k, rows, events, proposals)``.

    ``rows`` hold each round's eps, beta, diameter bound and radius (data independent: the radii
    depend on beta, m, p and gamma only) and the round's draw ``center`` (a private output whose
    release the composition covers; :func:`iterated_exponential_mechanism` releases theta_k only).
    ``proposals`` is the sampler's NON-PRIVATE work count.
    """
    X, y, p, m, G = _check_inputs(loss, X, y, domain, strong_convexity)
    n = X.shape[0]
    if radius_rule not in RADIUS_RULES:
        raise ValueError(f"radius_rule must be one of {RADIUS_RULES}, got {radius_rule!r}")
    if radius_rule == "seed" and c is None:
        raise ValueError("radius_rule='seed' needs the constant c (the paper leaves it unspecified)")
    gamma = 1.0 / n**3 if failure_probability is None else failure_probability
    eps_rounds = tuple(check_positive("eps_rounds[i]", e) for e in eps_rounds)
    mean_loss = _mean_loss_fn(loss)
    if anchor is None:
        from ..infer.nonprivate import minimize_loss

        anchor = minimize_loss(loss, X, y, l2=0.0)[0]  # work only: the law does not depend on it
    C = BallIntersection(np.asarray(domain.center), [domain.radius])
    D = domain.diameter
    rows, events, props = [], [], []
    theta = None
    for i, e_i in enumerate(eps_rounds, start=1):
        beta = e_i * n / (G * D)
        key, sub = jax.random.split(key)
        theta, used = exact_gibbs_draw(sub, mean_loss, (X, y), C, beta=beta, strong_convexity=m, anchor=anchor)
        props.append(used)
        events.append(PureDpEvent(epsilon=e_i, label=f"exponential_mechanism_round_{i}",
                                  assumptions=("exact draw from exp(-beta L) on C_{i-1}",
                                               f"every per-example loss difference is G = {G:g}-Lipschitz on C_0",
                                               f"the mean loss is m = {m:g}-strongly convex (declared; checked "
                                               "on every proposal)"),
                                  metadata={"beta": beta, "diameter_bound": D}))
        row = {"round": i, "eps": e_i, "beta": beta, "diameter_bound": D}
        if i < len(eps_rounds):
            r = (explicit_radius(beta, m, p, gamma) if radius_rule == "explicit"
                 else seed_radius(c, loss.constants.lipschitz, p, n, D, m, e_i))
            C = C.intersect(theta, r)
            D = min(D, 2.0 * r)
            row["radius"] = r
            row["center"] = [float(v) for v in theta]
        rows.append(row)
    return theta, rows, events, props


def iterated_exponential_mechanism(loss: PerExampleLoss, X, y, *, eps: float, domain: L2Ball,
                                   strong_convexity: float | None = None, rounds: int | None = None,
                                   eps_rounds=None, radius_rule: str = "explicit", c: float | None = None,
                                   failure_probability: float | None = None, seed: int | None = None,
                                   anchor=None) -> Release:
    """Seed 001 Algorithm 2 on ``L(theta; D) = mean loss``, pure ``eps``-DP (exact draws).

    Returns a :class:`~dp_infer.mechanisms.Release` of theta_k with one pure event per round.

    :param domain: C_0, an L2 ball containing the minimiser (its diameter enters beta_1).
    :param strong_convexity: m of the mean loss (default: the loss's declared one, from its L2
        term); a declared m is an assumption, checked on every proposal of the sampler.
    :param rounds: k (default :func:`num_rounds`); ``eps_rounds`` overrides the per-round split
        (must sum to <= eps).
    :param radius_rule: ``"explicit"`` (default) or ``"seed"`` (needs the constant ``c``).
    :param anchor: envelope tangent point for the sampler (default: a minimiser over R^p computed
        from the data -- it changes the work, never the law).
    """
    eps = check_epsilon(eps)
    X, y, p, m, G = _check_inputs(loss, X, y, domain, strong_convexity)
    if eps_rounds is None:
        eps_rounds = round_epsilons(eps, num_rounds(eps, X.shape[0], p) if rounds is None else rounds)
    if sum(eps_rounds) > eps * (1 + 1e-12):
        raise ValueError(f"eps_rounds must sum to at most eps = {eps:g}, got {sum(eps_rounds):g}")
    if radius_rule not in RADIUS_RULES:
        raise ValueError(f"radius_rule must be one of {RADIUS_RULES}, got {radius_rule!r}")
    key, source = secret_key(seed)
    theta, rows, events, _ = run_rounds(loss, X, y, eps_rounds=eps_rounds, domain=domain, strong_convexity=m,
                                        radius_rule=radius_rule, c=c, failure_probability=failure_probability,
                                        key=key, anchor=anchor)
    params = {"mechanism": "iterated_exponential_mechanism" if len(rows) > 1 else "exponential_mechanism",
              "rounds": [{k: v for k, v in r.items() if k != "center"} for r in rows],
              "radius_rule": radius_rule, "n": X.shape[0], "dim": p, "G": G, "strong_convexity": m,
              "domain": domain.describe(),
              "running_time": "the number of rejection proposals depends on the data and is not covered"}
    return Release(value=theta, events=tuple((e, 1) for e in events), params=params,
                   randomness=source.describe())


def exponential_mechanism(loss: PerExampleLoss, X, y, *, eps: float, domain: L2Ball,
                          strong_convexity: float | None = None, seed: int | None = None,
                          anchor=None) -> Release:
    """The single exponential mechanism on C_0 at the full eps: ``beta = eps n / (G diam C_0)``."""
    return iterated_exponential_mechanism(loss, X, y, eps=eps, domain=domain, strong_convexity=strong_convexity,
                                          eps_rounds=(check_epsilon(eps),), seed=seed, anchor=anchor)
