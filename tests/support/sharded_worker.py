"""Subprocess side of tests/parallel/test_sharding.py: JAX with several (simulated) devices or processes.

The device count must be fixed before JAX initialises, so these runs live in their own process:

    python tests/support/sharded_worker.py devices OUT.npz            # 8 simulated CPU devices, one process
    python tests/support/sharded_worker.py host PID PORT CSV N OUT    # one of two processes (2 devices each)
"""

from __future__ import annotations

import os
import sys

FIT = dict(eps=1.0, delta=1e-5, num_chains=2, seed=11, progress_bar=False)
ROWS = 2001  # not a multiple of 8 or 4: the padding path runs


def problem():
    import numpy as np

    from dp_infer.datasets import load_adult
    from dp_infer.losses import logistic

    data = load_adult()
    return logistic(row_norm=1.0, l2=1e-3), np.asarray(data.X_train[:ROWS]), np.asarray(data.y_train[:ROWS])


def devices(out):
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax
    import numpy as np

    import dp_infer
    from dp_infer.parallel.sharding import data_mesh, shard_rows

    loss, X, y = problem()
    res = {"device_count": np.array(jax.device_count())}
    for name, mesh in [("one", data_mesh(jax.devices()[:1])), ("rows8", data_mesh()),
                       ("chains2_rows4", data_mesh(chain_shards=2))]:
        run = dp_infer.fit(loss, X, y, mesh=mesh, **FIT)
        res[name] = run.draws(drop_burn_in=False)
        res[name + "_chain_spec"] = np.array(str(run.mcmc.get_samples(group_by_chain=True)["theta"].sharding.spec))
        res[name + "_report"] = np.array(repr(sorted((k, v) for k, v in run.report().items()
                                                     if k not in ("potential", "randomness"))))
    data = shard_rows(loss, X, y, data_mesh(), dtype="bfloat16", block_rows=256)
    res["bf16"] = dp_infer.fit(loss, data, None, **FIT).draws(drop_burn_in=False)
    np.savez(out, **res)


def host(pid, port, csv, n, out):
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    from dp_infer.parallel.distributed import initialize

    initialize(f"127.0.0.1:{port}", 2, int(pid))
    import jax
    import numpy as np

    import dp_infer
    from dp_infer.parallel.distributed import process_row_range, read_rows
    from dp_infer.parallel.sharding import data_mesh, shard_rows

    loss, _, _ = problem()
    n = int(n)
    mesh = data_mesh()
    start, stop = process_row_range(n, mesh)
    X, y = read_rows(csv, start, stop, target="y")
    data = shard_rows(loss, X, y, mesh, n=n, row_offset=start, block_rows=512)
    # process 1 passes another seed: the run must use process 0's key on both (one SPMD program)
    run = dp_infer.fit(loss, data, None, **dict(FIT, seed=FIT["seed"] + 88 * jax.process_index()))
    draws = run.draws(drop_burn_in=False)
    if jax.process_index() == 0:
        np.savez(out, draws=draws, rows=np.array([start, stop]), processes=np.array(jax.process_count()),
                 devices=np.array(jax.device_count()))
    else:
        np.savez(out + ".p1.npz", rows=np.array([start, stop]), draws=draws)
    jax.distributed.shutdown()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    {"devices": devices, "host": host}[mode](*args)
