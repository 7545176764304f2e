"""The posterior mode's interval release, the part that reads rows: each row's weighted gradient and
curvature at public points, and the Newton statistics released from them with Gaussian mechanisms
(the schedule, the sensitivities, the event and the forecasts are the plan's side,
:mod:`dp_infer.routes.newton_release`, whose module doc derives them; the weights, the public curvature and
metric, and what public feature rows predict are :mod:`dp_infer.routes.public_rows`).
"""

from __future__ import annotations

import functools
import hashlib

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_finite_array, check_positive
from ..losses.base import PerExampleLoss
from ..randomness import gaussian_noise
from ..routes.newton_release import (PUBLIC_STEP_BOX, PUBLIC_WEIGHT_POWER, TRUST_RADIUS, NewtonRelease, link_bounds,
                                     newton_event, noise_floor, public_curvature_refusal)
from ..routes.public_rows import link_envelope, public_curvature, public_curvature_terms, public_hessian, row_weights
from .second_moment import private_second_moment_of_gram

__all__ = ["weighted_rows", "release_newton_statistics", "public_surrogate_step", "box_newton"]


def weighted_rows(loss: PerExampleLoss, X, y, theta, chol, rho: float, power: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``(G, W)``: each row's weighted gradient ``w phi' C^T x`` (norm ``<= G_link rho``) and curvature
    row ``sqrt(w phi'') C^T x`` (squared norm ``<= kappa rho^2`` with ``power`` 2) at ``theta``, in
    psi-coordinates, ``w = min(1, (rho / ||C^T x||)^power)`` (the module doc; a release's ``weight_power``).
    Reads the rows: the release's inputs."""
    C = np.asarray(chol, dtype=np.float64)
    XC = np.asarray(X, dtype=np.float64) @ C
    w = row_weights(XC, rho, power)
    return _rows(loss, XC, w, np.asarray(X, dtype=np.float64) @ np.asarray(theta, dtype=np.float64),
                 np.asarray(y, dtype=np.float64))


def _rows(loss: PerExampleLoss, XC: np.ndarray, w: np.ndarray, z: np.ndarray, y: np.ndarray):
    """Per-row weighted gradients ``w phi' C^T x`` and curvature rows ``sqrt(w phi'') C^T x`` (psi)."""
    zz, yy = jnp.asarray(z, dtype=jnp.float32), jnp.asarray(y, dtype=jnp.float32)
    d1 = np.asarray(jax.vmap(jax.grad(loss.index_fn))(zz, yy), dtype=np.float64)
    d2 = np.asarray(jax.vmap(jax.grad(jax.grad(loss.index_fn)))(zz, yy), dtype=np.float64)
    return (w * d1)[:, None] * XC, np.sqrt(w * np.maximum(d2, 0.0))[:, None] * XC


def _solve_floored(H: np.ndarray, g: np.ndarray, floor: float) -> np.ndarray:
    """``H^-1 g`` with H's eigenvalues floored at ``floor`` (and 1e-6 of its largest)."""
    w, U = np.linalg.eigh(0.5 * (H + H.T))
    w = np.maximum(w, max(floor, 1e-6 * max(float(w[-1]), 1e-300)))
    return U @ ((U.T @ g) / w)


@functools.partial(jax.jit, static_argnums=2)
def _public_link_total(z, w, index_fn):
    """``sum_i w_i phi(z_i, 0)`` and its gradient in ``z`` (float64 inputs): for a label-free curvature
    ``phi(z, y) = A(z) + b(y) z + c(y)``, so these are ``A`` and ``A'`` up to terms linear in z. Compiled once
    per link (``index_fn`` static), not once per stage."""
    return jax.value_and_grad(lambda zz: jnp.sum(w * jax.vmap(index_fn)(zz, jnp.zeros_like(zz))))(z)


def public_surrogate_step(loss: PerExampleLoss, X_public: np.ndarray, point, gradient, C: np.ndarray, rho: float,
                          trust_covariance: np.ndarray, half_width: float) -> np.ndarray:
    """The next point of a public-curvature release: the minimiser of the loss's public surrogate anchored at
    the released gradient, each coordinate of theta held within ``half_width`` draws' sds of ``point``.

    A linear Newton step ``-H^-1 g`` trusts the quadratic model over the whole step; from the draws' mean,
    many data sds from the estimate on a curved loss, it overshoots or stalls (so the private path holds each
    step within one draws' sd, and four such stages did not reach the estimate on Adult-shaped data). For a
    link whose curvature reads no label (``phi(z, y) = A(z) + b(y) z + c(y)``), the private gradient's change
    between two points, ``mean w [phi'(<theta, x>) - phi'(<p, x>)] x``, depends on the features only. With
    public rows standing in for the private ones it is the gradient of
    ``F(theta) = L_pub(theta) - theta . (grad L_pub(p) - g_theta)``, ``L_pub(theta) = mean_pub w phi(<theta, x>, 0)
    + l2 |theta|^2 / 2`` (same weights rule): a convex function whose gradient at ``p`` is the released
    gradient (``g_theta = C^-T g``, theta-coordinates) and whose curvature is the public one. Its minimiser is
    where the private gradient would vanish if the public rows were the private ones; the error left is the
    gap between the two row sets' curvatures times the distance moved, so each stage contracts the distance
    to the estimate by about ``sqrt(d / m)`` for ``m`` public rows, however far the start.

    Where noise puts a coordinate's released gradient beyond what the surrogate can reach (a rare level:
    its gradient's range is its frequency), ``F`` decreases without end along it; the box (``half_width``
    times the draws' sd per coordinate, ``trust_covariance`` the draws' covariance in psi) holds that
    coordinate at its edge while the others reach their minimiser (on Adult at eps = 1, 40-55 of the 100
    coordinates end on the box's edge). Solved by Newton's method on the box (:func:`box_newton`) with the
    surrogate's exact public Hessian, in coordinates scaled by the draws' sds. Post-processing of the released
    gradient and public inputs: free."""
    Xp = np.asarray(X_public, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    p = np.asarray(point, dtype=np.float64)
    XC = Xp @ C
    w = row_weights(XC, rho, PUBLIC_WEIGHT_POWER, link_envelope(loss, Xp @ p))  # the stage's weights, held fixed
    m = Xp.shape[0]
    l2 = float(loss.l2 or 0.0)
    D = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", C, np.asarray(trust_covariance, dtype=np.float64), C), 1e-300))
    z0, Xs = Xp @ p, Xp * D[None, :]

    with jax.enable_x64(True):
        wj = jnp.asarray(w, dtype=jnp.float64)

        def surrogate(v):  # L_pub(p + D v) and its gradient in v (the anchor's linear term added below)
            val, dz = _public_link_total(jnp.asarray(z0 + Xs @ v, dtype=jnp.float64), wj, loss.index_fn)
            theta = p + D * v
            return (float(val) / m + 0.5 * l2 * float(theta @ theta),
                    Xs.T @ np.asarray(dz, dtype=np.float64) / m + l2 * D * theta)

        _, grad0 = surrogate(np.zeros_like(p))
        shift = grad0 - D * np.linalg.solve(C.T, np.asarray(gradient, dtype=np.float64))

        def objective(v):
            val, grd = surrogate(v)
            return val - float(v @ shift), grd - shift

        def hessian(v):  # the surrogate's (the anchor's term is linear), in the coordinates v: theta = p + D v
            return public_hessian(Xs, w * public_curvature_terms(loss, z0 + Xs @ v), l2=l2, A=np.diag(D))

        v = box_newton(objective, hessian, p.size, half_width)
    return p + D * v


def box_newton(objective, hessian, dim: int, half_width: float, max_iter: int = 100) -> np.ndarray:
    """The minimiser of a smooth convex ``objective`` (``v -> (value, gradient)``) over the box
    ``|v_i| <= half_width``, from ``v = 0``, by Newton's method with the box in the subproblem: each step is the
    minimiser of the quadratic model over the box (a bounded least-squares problem, scipy's BVLS, with the
    model's Hessian factored as ``R^T R``, eigenvalues floored at 1e-12 of the largest or of the gradient's size
    over the box's, so a flat direction's step is finite), then backtracking (Armijo, up to the objective's
    rounding) along it; every point evaluated or returned is in the box. Stops when a step moves
    no coordinate more than 1e-9 (units of ``v``), when an accepted step leaves the gradient unchanged to the last
    bit (a gradient read in float32 at a point that moved less than its resolution: the next step would be this
    one again, never under 1e-9; such a run had taken all ``max_iter`` iterations, ~16 line-search evaluations
    each), or when the line search cannot decrease the objective.

    Why not L-BFGS-B: the public surrogate of a one-hot design has strongly correlated coordinates; on Adult
    L-BFGS-B took 1,050-1,410 iterations (11-14 s) per stage where this takes 7-12 (0.2-0.6 s), and ends at a
    lower value with a projected gradient 1e-11-1e-14 against L-BFGS-B's 1e-8. ``max_iter`` bounds a run that
    does not meet the test (not seen): the point returned is then the last, feasible and no worse than the
    start."""
    from scipy.optimize import lsq_linear

    v = np.zeros(dim)
    f, g = objective(v)
    for _ in range(max_iter):
        lam, U = np.linalg.eigh(hessian(v))
        # the floor keeps R finite where the curvature vanishes (then a model step of about the box's width)
        lam = np.maximum(lam, 1e-12 * max(float(lam[-1]), float(np.max(np.abs(g))) / half_width, 1e-300))
        # 1/2 |R d + r|^2 = 1/2 d^T H d + g . d + const with R = diag(sqrt lam) U^T, R^T r = g
        step = lsq_linear(np.sqrt(lam)[:, None] * U.T, -(U.T @ g) / np.sqrt(lam),
                          bounds=(-half_width - v, half_width - v), method="bvls", tol=1e-14).x
        slope = float(g @ step)
        if np.max(np.abs(step)) <= 1e-9 or slope >= 0.0:
            break
        a, rounding = 1.0, 4.0 * np.finfo(float).eps * max(1.0, abs(f))
        while True:
            trial = np.clip(v + a * step, -half_width, half_width)  # v + step can round one ulp past a face
            f_new, g_new = objective(trial)
            if f_new <= f + 1e-4 * a * slope + rounding:
                break
            a *= 0.5
            if a < 1e-10:
                return v
        frozen = np.array_equal(g_new, g)  # the gradient is read at its resolution: the next model is this one
        v, f, g = trial, f_new, g_new
        if frozen:
            break
    return v


def release_newton_statistics(loss: PerExampleLoss, X, y, *, point, chol, rho: float, mu: float, key,
                              trust_covariance, X_public=None) -> NewtonRelease:
    """Release the module doc's statistics at GDP ``mu``.

    ``X``, ``y``: the checked rows (the run's); ``point``: public theta (the draws' mean);
    ``chol``: the run's metric factor C (public); ``rho``: the weights' radius
    (:func:`weight_radius`, public); ``trust_covariance``: the draws' covariance in psi (public,
    positive definite); ``key``: a JAX key (secret unless the run was seeded). ``X_public``: feature
    rows declared public (X's columns): the curvature and the model-based scores' second moment are
    computed from them at every stage and only the gradients are released
    (:data:`~dp_infer.routes.newton_release.PUBLIC_SCHEDULE`, the module doc of
    :mod:`dp_infer.routes.newton_release`); None (default): all released from the rows."""
    bounds = link_bounds(loss)
    if bounds is None:
        raise ValueError("loss: the interval release needs a generalised linear loss with declared link bounds")
    G_link, kappa = bounds
    X = check_finite_array("X", X, ndim=2)
    n, d = X.shape
    theta = check_finite_array("point", point, ndim=1)
    C = check_finite_array("chol", chol, ndim=2)
    S = check_finite_array("trust_covariance", trust_covariance, ndim=2)
    if theta.shape != (d,) or C.shape != (d, d) or S.shape != (d, d):
        raise ValueError(f"point must have {d} coordinates, chol and trust_covariance be {d} x {d}; got "
                         f"{theta.shape}, {C.shape}, {S.shape}")
    rho = check_positive("rho", rho)
    y = np.asarray(y, dtype=np.float64)
    Xp = None
    if X_public is not None:
        why = public_curvature_refusal(loss)
        if why is not None:
            raise ValueError(f"X_public: {why}")
        Xp = check_finite_array("X_public", X_public, ndim=2)
        if Xp.shape[1] != d:
            raise ValueError(f"X_public must have X's {d} columns, got {Xp.shape[1]}")
    ev = newton_event(mu, n=n, curvature="private" if Xp is None else "public")
    parts = ev.metadata["parts"]
    keys = jax.random.split(key, len(parts))
    XC = X @ C
    power = 2 if Xp is None else PUBLIC_WEIGHT_POWER
    w = row_weights(XC, rho, power)
    envelope = Xp is not None and loss.behaviour.link_derivative_envelope is not None
    slack = 1.0 + 1e-9  # the bounds hold exactly in real arithmetic; float64 rounding stays far inside this
    sens = {"gradient": 2.0 * G_link * rho * slack / n}
    Si = np.linalg.inv(0.5 * (S + S.T))
    point, path, out, gradient_sds, centre = theta, [theta], {}, [], None
    for k, (part, kk) in enumerate(zip(parts, keys)):
        if envelope:  # public: the stage's weights from each row's features at the stage's (public) point
            w = row_weights(XC, rho, power, link_envelope(loss, X @ point))
        Gr, Wr = _rows(loss, XC, w, X @ point, y)
        if envelope:  # |phi'| <= r G in real arithmetic; float32 scores may round past it: held to G rho
            nrm = np.linalg.norm(Gr, axis=1, keepdims=True)
            Gr = Gr * np.minimum(1.0, G_link * rho / np.maximum(nrm, 1e-300))
        kind = part["statistic"]
        if Xp is not None:  # the stage's curvature and J from the public rows, exact (sd 0)
            H_pub, J_pub = public_curvature(loss, Xp, point, C, rho)
            out.update(curvature=H_pub, curvature_sd=0.0, score=J_pub, score_sd=0.0)
        if kind == "gradient":
            sd = sens["gradient"] / part["mu"]
            g = Gr.mean(axis=0) + (loss.l2 * (C.T @ point) if loss.l2 else 0.0)
            with jax.enable_x64(True):  # privacy noise: 53-bit quantiles, tail to 11.4 sds (dp_infer.randomness)
                z = np.asarray(gaussian_noise(kk, (d,), jnp.float64), dtype=np.float64)
            g = g + z * sd
            out.update(gradient=g, gradient_sd=sd)
            gradient_sds.append(sd)
            if Xp is not None:  # the stage's end: the public surrogate's minimiser (the last: the data centre)
                nxt = public_surrogate_step(loss, Xp, point, g, C, rho, S, PUBLIC_STEP_BOX)
                if k < len(parts) - 1:
                    point = nxt
                    path.append(point)
                else:
                    centre = nxt
            elif k < len(parts) - 1:  # the stage's end: a Newton step, held inside the draws' bulk
                step = _solve_floored(out["curvature"], g, noise_floor(d, out["curvature_sd"]))
                r = float(np.sqrt(step @ Si @ step))
                point = point - C @ (step * min(1.0, TRUST_RADIUS / r if r > 0 else 1.0))
                path.append(point)
        else:
            rows, bound = (Wr, kappa * rho * rho * slack) if kind == "curvature" else (Gr, (G_link * rho) ** 2 * slack)
            released = private_second_moment_of_gram(rows.T @ rows, n, max_sq_norm=bound, mu=part["mu"], key=kk)
            M = released.matrix + (loss.l2 * (C.T @ C) if (loss.l2 and kind == "curvature") else 0.0)
            out.update({kind: M, f"{kind}_sd": float(released.event.metadata["noise_sd"])})

    def tup(a):
        return tuple(float(v) for v in a) if np.ndim(a) == 1 else tuple(tuple(float(v) for v in r) for r in a)

    return NewtonRelease(path=tuple(tup(p) for p in path), chol=tup(C), gradient=tup(out["gradient"]),
                         gradient_sd=float(out["gradient_sd"]), curvature=tup(out["curvature"]),
                         curvature_sd=float(out["curvature_sd"]), score=tup(out["score"]),
                         score_sd=float(out["score_sd"]), rho=float(rho), mu=float(mu), n=int(n), loss=loss.name,
                         curvature_source="private" if Xp is None else "public",
                         public_rows=None if Xp is None else int(Xp.shape[0]),
                         public_rows_sha256=None if Xp is None else hashlib.sha256(
                             np.ascontiguousarray(Xp).tobytes()).hexdigest(),
                         previous_gradient_sd=(float(gradient_sds[-2]) if Xp is not None and len(gradient_sds) > 1
                                               else None),
                         centre=None if centre is None else tup(centre), weight_power=power,
                         weight_envelope=bool(envelope))
