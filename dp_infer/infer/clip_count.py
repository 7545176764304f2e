"""A per-example loss's private count of the rows its own clip touches (``run.clipped_rows``): the budget
share it takes (:func:`clip_count_plan`, public inputs only, checked before anything is charged) and the
release made after the draws (:func:`release_loss_clip_count`), for the estimate mode
(:mod:`dp_infer.infer.fit`) and the posterior mode (:mod:`dp_infer.infer.posterior`) alike. A NumPyro
model's count is :mod:`dp_infer.infer.fit_model`'s; the mechanism is :mod:`dp_infer.model.clipping`'s.
"""

from __future__ import annotations

import jax

from ..losses import PerExampleLoss
from ..model.clipping import DEFAULT_COUNT_SHARE, clip_warning, private_example_clip_count
from ..randomness import secret_key

__all__ = ["clip_count_plan", "count_key", "keep_clip_count", "release_loss_clip_count"]


def clip_count_plan(loss: PerExampleLoss, delta, share, sharded: bool) -> tuple[float, str | None]:
    """``(share, why_not)``: the share of the run's mu^2 spent on the private count of the rows a
    clipped loss's clip touches (``run.clipped_rows``), as a model run's
    (:data:`~dp_infer.model.clipping.DEFAULT_COUNT_SHARE` by default), or 0 and the reason there is
    none (a loss without ``clip_norm``, a pure-eps target, row-sharded data, ``clip_count_share=0``)."""
    if loss.clip_norm is None:
        if share:
            raise ValueError("clip_count_share: the loss has no clip_norm (nothing is clipped, nothing to count)")
        return 0.0, None
    asked = share is not None
    share = DEFAULT_COUNT_SHARE if share is None else share
    if not 0 <= share < 1:
        raise ValueError(f"clip_count_share must lie in [0, 1), got {share!r}")
    why = ("a pure-eps target (delta=None): the count's Gaussian noise needs delta > 0" if delta is None else
           "row-sharded data (mesh): the count is made on one device only" if sharded else None)
    if why is not None and asked and share > 0:
        raise ValueError(f"clip_count_share: no clipped-row count is made for {why}")
    why = why or ("clip_count_share=0" if share == 0 else None)
    return (0.0, f"no private count of the clipped rows was made: {why}") if why else (float(share), None)


def release_loss_clip_count(run, loss: PerExampleLoss, X, y, count: dict) -> None:
    """The private count of the rows whose per-example gradient the clipped loss's clip touches at the
    released posterior mean (charged with the run: part of the plan's event), kept in
    ``run.clipped_rows`` (the charged figures in ``run.report_extras["clipped_rows"]``); a warning when
    it says the clip is active on more than a tenth of the rows. Made after the draws are kept."""
    if run.purified is not None or run.theta is None:  # pragma: no cover - clipped losses run the trajectory route
        return
    key = count_key(count["seed"], count["key_impl"])
    keep_clip_count(run, private_example_clip_count(loss.example, run.posterior_mean(), X, y, loss.clip_norm,
                                                    count["mu"], key))


def count_key(seed, key_impl):
    """The clipped-row count's key: the run's seed (or fresh secret entropy) on its own stream, never
    the run's noise."""
    key, _ = secret_key(seed, impl=key_impl)
    return jax.random.fold_in(key, 0xC1)


def keep_clip_count(run, counted: dict) -> None:
    """Keep a released count (:func:`~dp_infer.model.clipping.private_clip_count` or
    :func:`~dp_infer.model.clipping.private_example_clip_count`) on the run: ``run.clipped_rows``, the
    charged figures (data independent) in ``run.report_extras["clipped_rows"]``, and a warning, also
    kept in the count, when it says the clip is active on more than a tenth of the rows."""
    run.report_extras["clipped_rows"] = {k: counted[k] for k in ("at", "clip_norm", "mu", "noise_sd")}
    run.clipped_rows = counted
    msg = clip_warning(counted)
    if msg:
        import warnings
        from pathlib import Path

        warnings.warn(msg, UserWarning, skip_file_prefixes=(str(Path(__file__).parents[1]),))
        counted["warning"] = msg
