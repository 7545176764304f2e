"""The margin a plan adds to a chain's gradient sensitivity for float32 arithmetic (issue 40, part 2).

A chain computes its gradient in float32, so two neighbouring datasets' computed gradients differ by the
exact difference (at most the planned sensitivity, a real-arithmetic bound) plus each one's rounding: an
absolute error of about 2^-24 |grad U| a coordinate. The planned sensitivity of a mean over n rows is
``O(1 / n)`` while |grad U| does not shrink with n, so in units of the sensitivity the excess grows
linearly in n. The routes whose accounting composes per-step gradient differences charge the sensitivity
times ``1 + float32_gradient_margin(n)`` (:func:`with_float32_margin`, and state it with
:func:`float32_margin_assumption`): the posterior mode's path, the estimate mode's trajectory (with the
Rashomon path and the pure route's upstream, which are trajectories) and last-iterate routes, Poisson-subsampled
SGLD and DP-SGD (on the clip norm C: a batch sums at most n clipped gradients) and DP-GD. The stationary and
proximal routes do not need it (their privacy is the exact target's; the sampler's distance to it is charged as
a TV error).

Measured by ``python -m benchmarks.float32_gradient`` (docs/results.md, "Float32 rounding in the chain's
gradient"): the demo's Adult posterior (n = 30,162, its clipped metric, states from its draws and 5x further
out) exceeds the float64 difference by at most 2.5e-4 of the sensitivity (an outside audit's stress test with
large prior gradients: 2.3e-4); synthetic logistic rows (``--synthetic N [--dim D] [--scale S]``, n = 1e4 ..
3e6, d = 10 and 50, states of sd 1 and 5) by 0.04 to 0.19 times ``n 2^-24`` (1.1e-3 of the sensitivity at
n = 1e5, 8.3e-3 at n = 1e6). docs/threat-model.md says what the margin does not cover.
"""

from __future__ import annotations

__all__ = ["FLOAT32_GRADIENT_MARGIN", "FLOAT32_MARGIN_PER_ROW", "float32_gradient_margin", "with_float32_margin",
           "float32_margin_assumption"]

#: the margin's floor, a share of the real-arithmetic bound: covers Adult's measured excess 4x
FLOAT32_GRADIENT_MARGIN = 1e-3

#: the margin's growth with n, per row: covers the largest measured ``excess / (n 2^-24)``, 0.19, 2.7x; the
#: floor binds up to n = 33,554
FLOAT32_MARGIN_PER_ROW = 2.0 ** -25


def float32_gradient_margin(n: int) -> float:
    """The share of the real-arithmetic gradient sensitivity a plan adds for float32 rounding at ``n`` rows:
    ``max(FLOAT32_GRADIENT_MARGIN, n FLOAT32_MARGIN_PER_ROW)`` (a public function of n)."""
    return max(FLOAT32_GRADIENT_MARGIN, float(n) * FLOAT32_MARGIN_PER_ROW)


def with_float32_margin(sensitivity: float, n: int) -> float:
    """The sensitivity a plan charges for a float32 chain over ``n`` rows: the real-arithmetic bound
    ``sensitivity`` (any units) times ``1 + float32_gradient_margin(n)``."""
    return sensitivity * (1.0 + float32_gradient_margin(n))


def float32_margin_assumption(n: int, bound: str) -> str:
    """The assumption line a plan states for the margin on its real-arithmetic ``bound`` (e.g. ``"G / n"``)."""
    return (f"sensitivity {bound} times 1 + {float32_gradient_margin(n):.3g} for the chain's float32 rounding "
            "(dp_infer.privacy.float32_margin)")
