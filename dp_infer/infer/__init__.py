"""Private inference: validate -> plan -> charge -> run, and what a run gives back.

* :mod:`~dp_infer.infer.fit`: :func:`~dp_infer.infer.fit.fit` and :func:`~dp_infer.infer.fit.sample`
  (the public ``dp_infer.fit`` / ``dp_infer.sample``);
* :mod:`~dp_infer.infer.fit_model`, :mod:`~dp_infer.infer.posterior`, :mod:`~dp_infer.infer.proximal`:
  the NumPyro-model, posterior-mode and proximal (non-smooth) runs;
* :mod:`~dp_infer.infer.run`, :mod:`~dp_infer.infer.run_io`: :class:`~dp_infer.infer.run.PrivateRun`
  and its files;
* :mod:`~dp_infer.infer.prediction`: predictions from released draws;
* :mod:`~dp_infer.infer.estimators`: scikit-learn style estimators;
* :mod:`~dp_infer.infer.nonprivate`: non-private baselines (for comparisons only).
"""
