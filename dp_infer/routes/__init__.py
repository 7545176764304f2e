"""Privacy routes: data-independent plans (inverse temperature, step size, steps) for a target.

* :mod:`~dp_infer.routes.plan`: :class:`~dp_infer.routes.plan.SamplingPlan` and the trajectory plan;
* :mod:`~dp_infer.routes.calibrate`: the estimate mode, every route's plan for an (eps, delta) target;
* :mod:`~dp_infer.routes.posterior`: the posterior mode (effective draws of a tempered posterior);
* :mod:`~dp_infer.routes.preconditioning`: data-independent preconditioners for a plan.

A plan never reads the data. Imported by :mod:`dp_infer.infer`, never the other way round.
"""
