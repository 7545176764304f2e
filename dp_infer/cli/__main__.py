"""``python -m dp_infer.cli ...``: the ``dp-infer`` command where its installed script is not on the
PATH (a checkout on ``PYTHONPATH``, a machine where the package was not installed)."""

from . import run

if __name__ == "__main__":
    run()
