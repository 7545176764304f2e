"""scikit-learn's estimator checks on the private estimators.

Configuration: ``clip_rows=True`` (the checks fit on arbitrary unbounded data; by default rows
beyond the declared ``row_norm`` are refused -- that default is the only reason the checks would
fail), a large eps (the checks' accuracy thresholds are for non-private models), a short horizon
and one chain (speed). The classifier and the Huber regressor run every applicable check; the
Poisson regressor shares their fit/predict code and runs the checks that depend on its target
(positive-only counts) and link. Skipped by scikit-learn itself: ``check_array_api_input``
(needs SCIPY_ARRAY_API) and the multiclass checks (tag ``multi_class=False``).
"""

import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import (check_estimators_dtypes, check_fit2d_1sample,  # noqa: E402
                                            check_fit_score_takes_y, check_regressors_train,
                                            parametrize_with_checks)

from dp_infer.infer.estimators import (
    PrivateHuberRegression, PrivateLogisticRegression, PrivatePoissonRegression,
)

_CFG = dict(eps=50.0, horizon=0.3, num_chains=1, clip_rows=True, random_state=0)


@parametrize_with_checks([PrivateLogisticRegression(**_CFG), PrivateHuberRegression(**_CFG)])
def test_sklearn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("check", [check_regressors_train, check_fit2d_1sample, check_estimators_dtypes,
                                   check_fit_score_takes_y])
def test_poisson_target_checks(check):
    est = PrivatePoissonRegression(max_count=1e4, **_CFG)
    check(type(est).__name__, est)
