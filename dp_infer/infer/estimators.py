"""scikit-learn-style private Bayesian GLMs and the schema transformer (``pip install 'dp_infer[sklearn]'``).

* :class:`PrivateLogisticRegression` -- binary classifier (logistic loss);
* :class:`PrivatePoissonRegression` -- integer counts in 0 .. ``max_count``, log link, on an L2 ball;
* :class:`PrivateHuberRegression` -- robust linear regression (Huber loss);
* :class:`SchemaTransformer` -- a :class:`~dp_infer.schema.Schema`'s feature map as a transformer.

Each ``fit`` is one private release: it calibrates a plan from ``(eps, delta)``, the number of
rows, the dimension and the loss's declared constants (never the data), then samples it with
:func:`dp_infer.infer.fit.sample`. ``target="posterior"`` (logistic and Huber) plans for ``ess``
effective draws of ``N(0, I / prior_precision) x exp(-beta L)`` instead
(:func:`dp_infer.infer.posterior.fit_posterior`; ``horizon`` and ``lam_rel`` are then not used);
the default ``"estimate"``'s draws are an estimate path, not a posterior. ``coef_`` is the released estimate
(the mean of the released draws, or the purified mean on the pure route; in the posterior mode, by default
(``coef_source="auto"``), the centre of the run's intervals for theta where it made an interval release,
``coef_source_`` saying which); ``sample_posterior`` returns released draws (post-processing: free).

Hyper-parameter search on private data costs privacy: every ``fit`` of a grid search or of a
cross-validation fold is a separate release on (part of) the same data, and the selection
itself reads the data. Give the estimator a ``ledger`` (a path or a
:class:`~dp_infer.privacy.ledger.Ledger`) and a ``dataset_id``: every fit -- including the ones
``GridSearchCV`` or ``cross_val_score`` make on clones -- is charged to the ledger *before* it
samples, and a fit that would exceed the dataset's budget is refused. Without a ledger nothing
is recorded and the caller must account for the repetitions.

Rows are scaled down to ``||x|| <= row_norm`` (the loss's declared bound) by default
(``clip_rows=True``: a fixed map of each row, so the sensitivity holds for the function actually
run; scikit-learn's own checks pass with the defaults, docs/api/estimators.md lists the waived
ones). ``clip_rows=False`` refuses rows beyond the bound instead (a
:class:`SchemaTransformer` with ``row_norm: 1`` guarantees it); ``clip_rows="report"`` also keeps
the NON-PRIVATE number of scaled rows in ``clip_report_`` (computed on the private data, not
covered by the guarantee; ``None`` otherwise). ``random_state``: None (default) draws the noise key from the operating
system; an integer makes the run reproducible by whoever holds it (the report says so).
"""

from __future__ import annotations

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as e:  # pragma: no cover - the sklearn extra installs it
    raise ImportError("dp_infer.infer.estimators needs scikit-learn: pip install 'dp_infer[sklearn]'") from e

from .. import losses
from ..datasets import clip_rows as _clip_rows
from ..losses.count import poisson as _poisson

__all__ = ["PrivateLogisticRegression", "PrivatePoissonRegression", "PrivateHuberRegression",
           "SchemaTransformer"]

_COMMON = ("eps", "delta", "route", "horizon", "num_chains", "kernel", "lam_rel", "row_norm",
           "clip_rows", "random_state", "ledger", "dataset_id", "progress_bar", "target", "prior_precision", "ess",
           "coef_source")
_TARGETS = ("estimate", "posterior")
#: where a posterior-mode fit takes ``coef_`` from: ``"auto"`` the interval release's centre where the run made
#: one (else the draws' mean), ``"draws"`` always the tempered draws' mean
COEF_SOURCES = ("auto", "draws")


def _seed(random_state):
    """random_state -> dp_infer seed: None stays None (secret), an int is a user seed."""
    if random_state is None:
        return None
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool) and random_state >= 0:
        return int(random_state)
    raise ValueError(f"random_state must be None, an integer >= 0 or a numpy RandomState, got {random_state!r}")


class _PrivateGLM(BaseEstimator):
    """Shared fit / sampling / charging logic (subclasses define the loss and the link)."""

    def _loss(self, dim: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _domain(self, dim: int):
        return None

    def _prepare_y(self, y):
        return np.asarray(y, dtype=float)

    def fit(self, X, y, X_public=None):
        """Charge (if a ledger is given) and run one private release on (X, y).

        ``X_public`` (``target="posterior"`` only): feature rows you declare public, drawn from X's population;
        the interval release then takes its curvature from them and releases only gradients
        (``interval_curvature="public"``, logistic and Poisson). The intervals land in ``intervals_``
        (:class:`~dp_infer.diagnostics.released_interval.ParameterIntervals`), or ``intervals_`` is None and
        ``intervals_note_`` says why."""
        from .driver import Hooks, execute
        from .fit import ESTIMATE_ROUTE, estimate_public

        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=not isinstance(self, ClassifierMixin))
        y = self._prepare_y(y)
        seed = _seed(self.random_state)
        if self.ledger is not None and not (isinstance(self.dataset_id, str) and self.dataset_id):
            raise ValueError("dataset_id must be a non-empty string when a ledger is given")
        self.clip_report_ = None
        if self.clip_rows not in (True, False, "report"):
            raise ValueError(f"clip_rows must be True, False or 'report', got {self.clip_rows!r}")
        target = getattr(self, "target", "estimate")
        if X_public is not None:
            if target != "posterior":
                raise ValueError("X_public applies to target='posterior' (the interval release's curvature)")
            X_public = np.asarray(X_public, dtype=np.float64)
            if X_public.ndim != 2 or X_public.shape[1] != X.shape[1] or not np.all(np.isfinite(X_public)):
                raise ValueError(f"X_public must be a finite 2-D array with X's {X.shape[1]} columns, got shape "
                                 f"{X_public.shape}")
        if self.clip_rows:  # a fixed per-row map (rows scaled to norm <= row_norm): the function actually run
            X, rep = _clip_rows(X, self.row_norm)
            if X_public is not None:  # the same public map on the public rows
                X_public = _clip_rows(X_public, self.row_norm)[0]
            if self.clip_rows == "report":
                self.clip_report_ = rep  # NON-PRIVATE count, kept only when asked for
        dim = X.shape[1]
        loss = self._loss(dim)
        X, y = loss.check_data(X, y)
        if target not in _TARGETS:
            raise ValueError(f"target must be one of {_TARGETS}, got {target!r}")
        if getattr(self, "coef_source", "auto") not in COEF_SOURCES:
            raise ValueError(f"coef_source must be one of {COEF_SOURCES}, got {self.coef_source!r}")
        if target == "posterior":
            return self._fit_posterior(loss, X, y, seed, X_public)
        public = estimate_public(loss, X.shape[0], loss.num_params(dim), eps=self.eps, delta=self.delta,
                                 route=self.route, domain=self._domain(dim), horizon=self.horizon,
                                 num_chains=self.num_chains, kernel=self.kernel, lam_rel=self.lam_rel,
                                 sample_options=dict(seed=seed, progress_bar=self.progress_bar))

        def store(run, keeper, receipt):
            draws = None if run.plan.release == "purified_mean" else np.asarray(run.draws())
            self._store(run, run.estimate(), draws, seed, receipt)

        execute(ESTIMATE_ROUTE, public, (loss, X, y), ledger=self.ledger, dataset_id=self.dataset_id,
                hooks=Hooks(finish=store, step=f"{type(self).__name__}.fit: storing the release"))
        return self

    def _store(self, run, coef, draws, seed, receipt):
        """The fitted attributes of one release: plan (plain data), route, coefficients, draws, the
        privacy report (with where the noise came from) and the ledger receipt."""
        from ..randomness import describe_seed

        self.plan_ = run.plan.as_dict()  # plain data (picklable); the privacy report is report_
        self.route_ = run.plan.route
        self.coef_ = np.asarray(coef, dtype=float)
        self.draws_ = draws
        rep = run.report()
        rep.setdefault("randomness", describe_seed(seed))
        self.report_ = rep
        self.receipt_ = receipt
        return self

    def _fit_posterior(self, loss, X, y, seed, X_public=None):
        """target='posterior': :func:`dp_infer.infer.posterior.fit_posterior` (prior N(0, I /
        prior_precision), ``ess`` effective draws over ``num_chains`` chains, preconditioner from a
        privately released X'X/n); ``intervals_``: the run's 90% intervals for theta (None where it made no
        interval release, ``intervals_note_`` the reason); ``coef_``: with ``coef_source="auto"`` (default) their
        centre where there are intervals (the noise-aware estimate the data determine, where the tempered draws
        sit near the prior: Adult at eps = 1, accuracy 0.83 against the draws' mean's 0.79), else the mean of the
        released draws after burn-in (``coef_source="draws"``: always); ``coef_source_`` says which."""
        from .fallback import keep_draws
        from .posterior import fit_posterior

        if self._domain(X.shape[1]) is not None:
            raise ValueError(f"target='posterior' is not available for {type(self).__name__} (its loss lives on a "
                             "bounded domain); use target='estimate'")
        if self.route not in ("auto", "trajectory"):
            raise ValueError(f"route={self.route!r}: target='posterior' runs the trajectory route")
        with keep_draws(ledger=self.ledger, step=f"{type(self).__name__}.fit: storing the release") as keeper:
            run = keeper.keep(fit_posterior(loss, X, y, eps=self.eps, delta=self.delta,
                                            prior_precision=self.prior_precision, ess=self.ess,
                                            num_chains=self.num_chains, kernel=self.kernel, seed=seed,
                                            ledger=self.ledger, dataset_id=self.dataset_id or "default",
                                            progress_bar=self.progress_bar,
                                            interval_curvature="private" if X_public is None else "public",
                                            X_public=X_public))
            try:
                self.intervals_, self.intervals_note_ = run.intervals(0.9), None
            except ValueError as e:
                self.intervals_, self.intervals_note_ = None, str(e)
            centre = self.intervals_ is not None and self.coef_source == "auto"
            self.coef_source_ = "intervals" if centre else "draws"
            self._store(run, self.intervals_.centre if centre else run.posterior_mean(), np.asarray(run.draws()),
                        seed, None)
            return self

    def sample_posterior(self, n_samples: int | None = None) -> np.ndarray:
        """Released draws, shape (n, dim): all post-burn-in draws of all chains, or ``n_samples``
        of them evenly spaced (post-processing). Not available on the pure route."""
        check_is_fitted(self, "coef_")
        if self.draws_ is None:
            raise ValueError("n_samples: route 'pure' releases only the purified estimate coef_, no draws")
        flat = self.draws_.reshape(-1, self.draws_.shape[-1])
        if n_samples is None:
            return flat.copy()
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or not 1 <= n_samples <= len(flat):
            raise ValueError(f"n_samples must be an integer in [1, {len(flat)}], got {n_samples!r}")
        return flat[np.linspace(0, len(flat) - 1, int(n_samples)).round().astype(int)]

    def _linear(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _common_kwargs(obj, eps, delta, route, horizon, num_chains, kernel, lam_rel, row_norm, clip_rows,
                   random_state, ledger, dataset_id, progress_bar, *posterior):
    if posterior:  # (target, prior_precision, ess, coef_source): the estimators with a posterior mode
        obj.target, obj.prior_precision, obj.ess, obj.coef_source = posterior
    obj.eps, obj.delta, obj.route, obj.horizon = eps, delta, route, horizon
    obj.num_chains, obj.kernel, obj.lam_rel, obj.row_norm = num_chains, kernel, lam_rel, row_norm
    obj.clip_rows, obj.random_state, obj.ledger, obj.dataset_id = clip_rows, random_state, ledger, dataset_id
    obj.progress_bar = progress_bar


class PrivateLogisticRegression(ClassifierMixin, _PrivateGLM):
    """Private Bayesian logistic regression (binary labels; ``classes_[1]`` is the positive class).

    ``predict_proba`` uses the released estimate ``coef_``; for a posterior predictive average
    the released draws (``sample_posterior``) are post-processing.
    """

    def __init__(self, *, eps=1.0, delta=1e-5, route="auto", horizon=1.0, num_chains=2,
                 kernel="langevin", lam_rel=None, row_norm=1.0, clip_rows=True, random_state=None,
                 ledger=None, dataset_id=None, progress_bar=False, target="estimate", prior_precision=1.0,
                 ess=400, coef_source="auto"):
        _common_kwargs(self, eps, delta, route, horizon, num_chains, kernel, lam_rel, row_norm,
                       clip_rows, random_state, ledger, dataset_id, progress_bar, target, prior_precision, ess,
                       coef_source)

    def _loss(self, dim):
        return losses.logistic(row_norm=self.row_norm)

    def _prepare_y(self, y):
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) > 2:
            raise ValueError(f"y: Only binary classification is supported. The type of the target is "
                             f"{type_of_target(y)} ({len(self.classes_)} classes)")
        if len(self.classes_) < 2:
            raise ValueError("y must hold exactly 2 classes for PrivateLogisticRegression, got 1 class")
        return (np.asarray(y) == self.classes_[1]).astype(float)

    def decision_function(self, X) -> np.ndarray:
        return self._linear(X)

    def predict_proba(self, X) -> np.ndarray:
        p1 = 1.0 / (1.0 + np.exp(-self._linear(X)))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X) -> np.ndarray:
        score = self._linear(X)
        return self.classes_[(score > 0).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.poor_score = True
        return tags


class PrivateHuberRegression(RegressorMixin, _PrivateGLM):
    """Private robust linear regression: Huber loss with ``threshold`` (labels unbounded)."""

    def __init__(self, *, threshold=1.0, eps=1.0, delta=1e-5, route="auto", horizon=1.0,
                 num_chains=2, kernel="langevin", lam_rel=None, row_norm=1.0, clip_rows=True,
                 random_state=None, ledger=None, dataset_id=None, progress_bar=False, target="estimate",
                 prior_precision=1.0, ess=400, coef_source="auto"):
        self.threshold = threshold
        _common_kwargs(self, eps, delta, route, horizon, num_chains, kernel, lam_rel, row_norm,
                       clip_rows, random_state, ledger, dataset_id, progress_bar, target, prior_precision, ess,
                       coef_source)

    def _loss(self, dim):
        return losses.huber(threshold=self.threshold, row_norm=self.row_norm)

    def predict(self, X) -> np.ndarray:
        return self._linear(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags


class PrivatePoissonRegression(RegressorMixin, _PrivateGLM):
    """Private Poisson regression (log link), integer counts in 0 .. ``max_count`` (others are refused),
    theta in the L2 ball of ``radius`` (both declared: they set the loss constants, see
    :mod:`dp_infer.losses.count`)."""

    def __init__(self, *, max_count=100.0, radius=2.0, eps=1.0, delta=1e-5, route="auto",
                 horizon=1.0, num_chains=2, kernel="langevin", lam_rel=None, row_norm=1.0,
                 clip_rows=True, random_state=None, ledger=None, dataset_id=None, progress_bar=False):
        self.max_count = max_count
        self.radius = radius
        _common_kwargs(self, eps, delta, route, horizon, num_chains, kernel, lam_rel, row_norm,
                       clip_rows, random_state, ledger, dataset_id, progress_bar)

    def _domain(self, dim):
        from ..domains import L2Ball

        return L2Ball(dim, self.radius)

    def _loss(self, dim):
        return _poisson(self.max_count, self._domain(dim), row_norm=self.row_norm)

    def predict(self, X) -> np.ndarray:
        return np.exp(self._linear(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        tags.regressor_tags.poor_score = True
        return tags


class SchemaTransformer(TransformerMixin, BaseEstimator):
    """A schema's feature map as a scikit-learn transformer (pandas DataFrame in, array out).

    ``fit`` reads nothing from the data beyond checking the column names: the map comes from the
    schema alone. Rows cannot be dropped inside a Pipeline, so a missing value in a column with
    ``missing: drop`` raises (keep the default ``missing: neutral`` or declare ``missing: {fill: ...}``). The
    NON-PRIVATE counts of the last call are in ``last_report_`` (local only).
    """

    def __init__(self, schema=None):
        self.schema = schema

    def fit(self, X, y=None):
        from ..schema import FeatureMap, load_schema

        if self.schema is None:
            raise ValueError("schema must be a dp_infer.schema.Schema or a schema file path, got None")
        self.feature_map_ = FeatureMap(load_schema(self.schema))
        self.transform(X)
        self.n_features_in_ = len(self.feature_map_.schema.source_columns)
        self.feature_names_in_ = np.asarray(self.feature_map_.schema.source_columns, dtype=object)
        return self

    def transform(self, X):
        check_is_fitted(self, "feature_map_")
        enc = self.feature_map_.transform(X, target="ignore")
        self.last_report_ = enc.report
        if enc.X.shape[0] != enc.kept.shape[0]:
            raise ValueError("X: a row holds a missing value in a column with missing: drop; a Pipeline cannot "
                             "drop rows (keep the default missing: neutral or declare a fill value)")
        return enc.X

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "feature_map_")
        return np.asarray(self.feature_map_.feature_names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # a DataFrame with named columns, not a bare array
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.input_tags.allow_nan = True  # missing cells are handled as the schema declares
        tags.requires_fit = True
        return tags
