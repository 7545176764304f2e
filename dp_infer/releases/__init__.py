"""Release primitives: the functions that read private rows and return a noised statistic with its
GDP event -- the preconditioner's second moment (:mod:`.second_moment`) and the interval release's
Newton statistics (:mod:`.newton`). They sit below :mod:`dp_infer.infer` and beside
:mod:`dp_infer.routes`, which plans with their events and stand-ins and never reads data (the
routes never import this package). A model's score release and clip count live with the model
(:mod:`dp_infer.model.score_release`, :mod:`dp_infer.model.clipping`).
"""
