"""Privacy routes: data-independent plans (inverse temperature, step size, steps) for a target.

* :mod:`~dp_infer.routes.registry`: every route, one record each (what it plans for, releases and needs);
* one module per estimate route: :mod:`~dp_infer.routes.trajectory`, :mod:`~dp_infer.routes.last_iterate`,
  :mod:`~dp_infer.routes.stationary`, :mod:`~dp_infer.routes.pure` (each ``option(...) -> RouteOption``);
* :mod:`~dp_infer.routes.plan`: :class:`~dp_infer.routes.plan.SamplingPlan`, the step rule and the trajectory plan;
* :mod:`~dp_infer.routes.calibrate`: the estimate mode, a loop over the registry's estimate routes;
* :mod:`~dp_infer.routes.posterior`: the posterior mode (effective draws of a tempered posterior);
* :mod:`~dp_infer.routes.preconditioning`: data-independent preconditioners for a plan.

A plan never reads the data. Imported by :mod:`dp_infer.infer`, never the other way round.
"""
