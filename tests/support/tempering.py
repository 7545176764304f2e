"""NUTS references on a tempered target: the observation's log-likelihood scaled, the prior not."""

from __future__ import annotations

from numpyro.primitives import Messenger


class temper(Messenger):
    """Scale the log-likelihood of the observed site ``y`` by ``scale`` (the prior is untouched)."""

    def __init__(self, fn, scale):
        self.scale = scale
        super().__init__(fn)

    def process_message(self, msg):
        # the model's observation "y" only: NumPyro's potential_energy adds each constrained latent's
        # log-Jacobian as an observed factor site (_<site>_log_det), which belongs to the prior
        if msg["type"] == "sample" and msg.get("is_observed") and msg["name"] == "y":
            msg["scale"] = self.scale if msg.get("scale") is None else self.scale * msg["scale"]
