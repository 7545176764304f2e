"""The clipped-row count's plan, key and keeper (dp_infer.infer.clip_count), unit by unit: the share and its
refusals by name, a key that a known seed reproduces and nothing else does, on its own stream, and the kept
count's warning attributed to the caller's line."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from dp_infer import losses
from dp_infer.infer.clip_count import clip_count_plan, count_key, keep_clip_count
from dp_infer.model.clipping import DEFAULT_COUNT_SHARE
from dp_infer.randomness import secret_key


def _clipped():
    return losses.clipped_loss(lambda t, x, y: (t @ x - y) ** 2, 0.5, smoothness=1.0)


def test_the_plan_takes_the_default_share_or_the_asked_one():
    assert clip_count_plan(_clipped(), 1e-5, None, False) == (DEFAULT_COUNT_SHARE, None)
    assert clip_count_plan(_clipped(), 1e-5, 0.2, False) == (0.2, None)
    assert clip_count_plan(_clipped(), 1e-5, 0.0, False) == (
        0.0, "no private count of the clipped rows was made: clip_count_share=0")


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5])
def test_a_share_outside_0_1_is_refused_by_name(share):
    with pytest.raises(ValueError, match=r"^clip_count_share must lie in \[0, 1\), got "):
        clip_count_plan(_clipped(), 1e-5, share, False)


@pytest.mark.parametrize("delta,sharded,why", [
    (None, False, "a pure-eps target (delta=None): the count's Gaussian noise needs delta > 0"),
    (1e-5, True, "row-sharded data (mesh): the count is made on one device only")])
def test_no_count_where_it_cannot_be_made_and_a_share_asked_there_is_refused(delta, sharded, why):
    # by default: no count, the reason said; asked for explicitly: refused before anything is charged
    assert clip_count_plan(_clipped(), delta, None, sharded) == (0.0, f"no private count of the clipped rows was "
                                                                      f"made: {why}")
    with pytest.raises(ValueError, match=r"^clip_count_share: no clipped-row count is made for " + re.escape(why)):
        clip_count_plan(_clipped(), delta, 0.1, sharded)
    assert clip_count_plan(_clipped(), delta, 0.0, sharded) == (0.0, f"no private count of the clipped rows was "
                                                                     f"made: {why}")


def test_a_loss_without_a_clip_has_nothing_to_count():
    assert clip_count_plan(losses.logistic(), 1e-5, None, False) == (0.0, None)
    assert clip_count_plan(losses.logistic(), 1e-5, 0, False) == (0.0, None)
    with pytest.raises(ValueError, match="the loss has no clip_norm"):
        clip_count_plan(losses.logistic(), 1e-5, 0.1, False)


def _bits(key):
    return np.asarray(jax.random.key_data(key)).tobytes()


def test_a_known_seed_is_the_only_way_to_the_counts_key():
    a, b = count_key(7, "threefry2x32"), count_key(7, "threefry2x32")
    assert _bits(a) == _bits(b)  # a seeded run's count is reproducible
    assert _bits(count_key(8, "threefry2x32")) != _bits(a)
    # unseeded: fresh secret entropy each time
    assert _bits(count_key(None, "threefry2x32")) != _bits(count_key(None, "threefry2x32"))
    run_key, _ = secret_key(7, impl="threefry2x32")
    assert _bits(a) != _bits(run_key)  # its own stream, not the run's key
    assert all(_bits(a) != _bits(jax.random.fold_in(run_key, i)) for i in range(4))  # nor the run's sub-streams


def test_the_counts_key_honours_the_key_implementation():
    rbg = count_key(7, "rbg")
    three = count_key(7, "threefry2x32")
    assert np.asarray(jax.random.key_data(rbg)).shape != np.asarray(jax.random.key_data(three)).shape
    assert _bits(rbg) == _bits(count_key(7, "rbg"))


def _counted(noisy, n=1000, sd=16.0):
    return {"at": "posterior mean", "clip_norm": 0.5, "mu": 0.06, "noise_sd": sd, "noisy_count": noisy, "n": n,
            "share": noisy / n}


def test_a_count_that_says_the_clip_bites_warns_at_the_callers_line():
    run = SimpleNamespace(report_extras={}, clipped_rows=None)
    counted = _counted(400.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        keep_clip_count(run, counted)
    (rec,) = w
    assert rec.category is UserWarning and "is active on about 40% of the rows" in str(rec.message)
    package = str(Path(__import__("dp_infer").__file__).parent)
    assert not rec.filename.startswith(package), rec.filename  # the caller's line, not the package's
    assert counted["warning"] == str(rec.message)
    assert run.clipped_rows is counted
    assert run.report_extras["clipped_rows"] == {"at": "posterior mean", "clip_norm": 0.5, "mu": 0.06,
                                                 "noise_sd": 16.0}


def test_a_count_below_a_tenth_keeps_quiet():
    run = SimpleNamespace(report_extras={}, clipped_rows=None)
    counted = _counted(50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keep_clip_count(run, counted)
    assert "warning" not in counted and run.clipped_rows is counted
