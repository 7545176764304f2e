"""Finding 4 of issue 30: default outputs fit the threat model's "who sees what".

The recipient of a release sees the draws, the report, the run file and every line printed by
default; none of them may carry a private count, a private cell value, a row norm, a
data-dependent time, or draws the guarantee does not cover.
"""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import dp_infer.schema as S
from dp_infer import fit, losses
from dp_infer.domains import L2Ball
from dp_infer.schema import FeatureMap, Schema

SECRET = "Alice_Smith_HIV+"


def _schema():
    return Schema(columns=(S.numeric("age", 20, 60), S.categorical("c", ["a", "b"])),
                  target=S.binary_target("y", "yes", "no"))


def test_the_clipping_warning_is_off_by_default_whatever_the_rows():
    fm = FeatureMap(_schema())
    df = pd.DataFrame({"age": ["10", "99", "30"], "c": ["a", "b", "a"], "y": ["yes", "no", "no"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        enc = fm.transform(df)
    assert enc.report.n_rows_clipped == 2  # counted locally, not announced
    with pytest.warns(S.ClippingWarning, match="^NON-PRIVATE"):
        fm.transform(df, nonprivate_warnings=True)


@pytest.mark.parametrize("frame,column", [
    ({"age": ["30", SECRET], "c": ["a", "b"], "y": ["yes", "no"]}, "age"),
    ({"age": ["30", "40"], "c": ["a", SECRET], "y": ["yes", "no"]}, "c"),
    ({"age": ["30", "40"], "c": ["a", "b"], "y": ["yes", SECRET]}, "y"),
])
def test_input_errors_name_the_column_not_the_private_cell(frame, column):
    with pytest.raises(ValueError) as ei:
        FeatureMap(_schema()).transform(pd.DataFrame(frame))
    msg = str(ei.value)
    assert repr(column) in msg and SECRET not in msg and "row 2" not in msg and "\n" not in msg


def test_row_norm_and_label_errors_hold_no_private_number():
    X = np.array([[0.6, 0.0], [3.14159, 2.71828]])
    with pytest.raises(ValueError, match="^X: a row exceeds the declared row_norm=1") as ei:
        losses.logistic().check_data(X, np.array([0.0, 1.0]))
    assert "4.1" not in str(ei.value) and "1 row" not in str(ei.value)
    with pytest.raises(ValueError) as ei:
        losses.logistic().check_data(X[:1], np.array([7.0]))
    assert "y must contain only 0/1 labels" in str(ei.value) and "1 row" not in str(ei.value)


@pytest.mark.slow
def test_proximal_report_run_file_and_pickle_hold_no_time():
    from dp_infer.losses import nonsmooth as ns
    from dp_infer.infer.proximal import fit_proximal

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2)) / 3
    y = (X[:, 0] > 0).astype(float)
    run = fit_proximal(ns.hinge(), X, y, eps=0.5, delta=1e-5, seed=1)
    assert run.elapsed_seconds is not None  # the operator may ask for it
    assert "elapsed_seconds" not in run.report()
    assert "elapsed" not in str(run.to_datatree().attrs)
    back = pickle.loads(pickle.dumps(run))
    assert back.debug_info == {} and back.elapsed_seconds is None
    np.testing.assert_array_equal(back.final, run.final)


@pytest.mark.slow
def test_a_pure_run_keeps_only_its_purified_estimate():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)) / 3
    y = (X[:, 0] > 0).astype(float)
    dom = L2Ball(2, 2.0)
    run = fit(losses.logistic(domain=dom), X, y, eps=1.0, delta=None, domain=dom, route="pure", seed=1, progress_bar=False,
              horizon=0.5, num_draws=20)
    assert run.purified is not None and run.theta is None and run._mcmc is None
    with pytest.raises(ValueError, match="^theta: a pure-route run releases only its purified estimate"):
        run.draws()
    back = pickle.loads(pickle.dumps(run))
    assert back.theta is None and back.diverging is None
    np.testing.assert_array_equal(back.estimate(), run.estimate())
    assert back.released_draws().shape == (1, 1, 2)
