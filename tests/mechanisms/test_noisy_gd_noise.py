"""DP-GD's gradient noise, measured, against the declared sensitivity G / n.

Oracle: on rows with labels 0 the squared loss's mean gradient at the initial point theta0 = 0 is 0
exactly, so one step releases ``Proj(-eta sigma xi)``; with n large the noise step is far inside the
ball (no projection), so ``-value / eta`` is the drawn noise ``sigma xi`` itself (d = 400 coordinates,
one release). Its sd must be the sigma of the Gaussian mechanism at sensitivity G / n (the loss's
declared grad_diff, checked against its Hessian elsewhere), i.e. the exact Gaussian profile at
``mu = sqrt(T) (G / n) / sigma`` meets the target exactly (60-digit mpmath) and is tight, and the
measured sd is that sigma within 5 standard errors of the sample sd.
"""

import math

import numpy as np
import pytest

import dp_infer
from dp_infer.domains import L2Ball
from dp_infer.mechanisms import noisy_gd as GD
from dp_infer.privacy.float32_margin import float32_gradient_margin
from tests.support.mp_oracles import gdp_delta_mp


def test_one_step_noise_is_the_gaussian_mechanism_at_g_over_n():
    n, d, eps, delta = 4000, 400, 1.0, 1e-6
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)        # row norm 1 (the loss's default R)
    y = np.zeros(n)
    dom = L2Ball(d, 1.0)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    r = GD.dp_gd(loss, X, y, eps=eps, delta=delta, domain=dom, steps=1, seed=3)
    eta = r.params["step_size"]
    x = -np.asarray(r.value) / eta                       # = sigma xi (mean gradient 0 at theta0 = 0)
    assert np.linalg.norm(r.value) < 0.5 * dom.radius    # far inside: no projection
    sd = math.sqrt(float(np.mean(x ** 2)))
    se = 1.0 / math.sqrt(2 * d)                          # se of log(sd): 3.5%
    G = loss.constants.grad_diff
    # the noise drawn is the stated sigma (5 se) ...
    assert abs(math.log(sd / r.params["sigma"])) < 5 * se
    # ... and the stated sigma is that of the Gaussian mechanism at G / n, with the float32 margin
    # (dp_infer.privacy.float32_margin: the steps run in float32), meeting the target exactly
    planned = G / n * (1 + float32_gradient_margin(n))
    mu = planned / r.params["sigma"]
    assert gdp_delta_mp(eps, mu) <= delta * (1 + 1e-9)
    assert gdp_delta_mp(eps, mu * 1.001) > delta
    ev = r.events[0][0]
    assert ev.mu == pytest.approx(mu, rel=1e-12) and ev.metadata["sensitivity"] == pytest.approx(planned, rel=1e-15)
    assert "sensitivity G / n times 1 + 0.001 for the chain's float32 rounding (dp_infer.privacy.float32_margin)" \
        in ev.assumptions


def test_the_noise_grows_with_the_square_root_of_the_steps():
    """T steps compose to sqrt(T) (G / n) / sigma: sigma = sqrt(T) G / (n mu) at the same mu."""
    n, d = 500, 3
    X = np.random.default_rng(1).normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    dom = L2Ball(d, 1.0)
    loss = dp_infer.squared(label_bound=1.0, domain=dom)
    s1 = GD.dp_gd(loss, X, np.zeros(n), eps=1.0, delta=1e-6, domain=dom, steps=1, seed=0).params
    s9 = GD.dp_gd(loss, X, np.zeros(n), eps=1.0, delta=1e-6, domain=dom, steps=9, seed=0).params
    assert s9["sigma"] == pytest.approx(3 * s1["sigma"], rel=1e-12)
    assert s9["mu"] == s1["mu"]
