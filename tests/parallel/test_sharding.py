"""Past one device: blocked evaluation, row-sharded potentials, bfloat16 storage, several processes.

Oracles: the unblocked, unsharded :class:`GibbsPotential` (the function the privacy plan was made
for) and single-process runs with the same key. Float tolerances: the blocked/sharded sums only
reorder float32 additions, so values and gradients agree to a few float32 ulps of their
magnitude (rtol 1e-5); Langevin draws with an L2 term are a contraction of such perturbations, so
they stay within 1e-4 (observed ~1e-6) while the draws themselves spread by ~1 (checked, so the
comparison could fail).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dp_infer
from dp_infer.domains import L2Ball
from dp_infer.losses import clipped_loss, huber, logistic, multinomial_logistic, squared
from dp_infer.potentials import gibbs_potential
from dp_infer.parallel.precision import cast_rows, check_cast_rows
from dp_infer.parallel.sharding import ShardedPotential, data_mesh, shard_rows

from tests.support.sharded_worker import FIT, problem

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "support" / "sharded_worker.py"


def _rows(n, d, seed=0, norm=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    return X * (norm / np.maximum(norm, np.linalg.norm(X, axis=1, keepdims=True))), rng


def _softplus_margin(t, x, y):
    return jnp.logaddexp(0.0, -(2 * y - 1) * jnp.dot(t, x)) + jnp.sum(t ** 4)


LOSSES = {
    "logistic": lambda: logistic(l2=0.1),
    "multinomial": lambda: multinomial_logistic(3),
    "huber": lambda: huber(),
    "squared": lambda: squared(2.0, L2Ball(4, radius=3.0)),
    "clipped": lambda: clipped_loss(_softplus_margin, 0.2),
}


# every loss once, every block size (1, a block with a remainder, exactly n, more than n) at least
# twice, the clipped loss with each: 8 compilations rather than the 20 of a full product
BLOCK_CASES = [("logistic", 16), ("logistic", 1000), ("multinomial", 101), ("huber", 1), ("squared", 16),
               ("clipped", 1), ("clipped", 101), ("clipped", 1000)]


@pytest.mark.parametrize("name,block", BLOCK_CASES)
def test_blocked_mean_is_the_same_function(name, block):
    loss = LOSSES[name]()
    X, rng = _rows(101, 4)
    y = rng.integers(0, 3 if name == "multinomial" else 2, size=101).astype(np.float32)
    th = jnp.asarray(rng.normal(size=loss.num_params(4)).astype(np.float32))
    f0 = jax.value_and_grad(lambda t: loss.mean(t, X, y))
    f1 = jax.jit(jax.value_and_grad(lambda t, X, y: loss.mean(t, X, y, block_rows=block)))
    (v0, g0), (v1, g1) = f0(th), f1(th, X, y)
    np.testing.assert_allclose(v1, v0, rtol=1e-5)
    np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-6 * float(jnp.abs(g0).max()))
    # weight-0 padding rows change nothing (value or gradient)
    Xp, yp = np.vstack([X, np.zeros((5, 4), np.float32)]), np.concatenate([y, np.zeros(5, np.float32)])
    w = np.r_[np.ones(101), np.zeros(5)].astype(np.float32)
    v2, g2 = jax.value_and_grad(lambda t: loss.sum(t, Xp, yp, w, block_rows=block) / 101)(th)
    np.testing.assert_allclose(v2, v0, rtol=1e-5)
    np.testing.assert_allclose(g2, g0, rtol=1e-5, atol=1e-6 * float(jnp.abs(g0).max()))


def test_blocked_clipped_gradient_has_no_n_by_d_temporary():
    # oracle: XLA's own buffer assignment. Unblocked clipping builds the (n, d) per-example
    # gradients; in blocks of 256 the temporaries stay a small fraction of X.
    loss = LOSSES["clipped"]()
    n, d = 20_000, 50
    X, rng = _rows(n, d)
    y = (rng.random(n) < 0.5).astype(np.float32)
    th = jnp.zeros(d)

    def temp(block):
        f = jax.jit(jax.grad(lambda t, X, y: loss.mean(t, X, y, block_rows=block)))
        return f.lower(th, X, y).compile().memory_analysis().temp_size_in_bytes

    x_bytes = n * d * 4
    assert temp(None) >= x_bytes  # the oracle can see an (n, d) temporary...
    assert temp(256) < 0.1 * x_bytes  # ...and the blocked version has none


def test_sharded_potential_on_one_device_matches_gibbs_potential():
    for name in ("logistic", "clipped"):
        loss = LOSSES[name]()
        X, rng = _rows(203, 4)
        y = (rng.random(203) < 0.5).astype(np.float32)
        ref = gibbs_potential(loss, X, y, beta=40.0, lam=0.3)
        U = ShardedPotential(loss, shard_rows(loss, X, y, data_mesh(), block_rows=32), 40.0, 0.3)
        th = jnp.asarray(rng.normal(size=4).astype(np.float32))
        v0, g0 = jax.value_and_grad(ref)(th)
        v1, g1 = jax.jit(jax.value_and_grad(U))(th, *U.args())
        np.testing.assert_allclose(v1, v0, rtol=1e-5)
        np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-5 * float(jnp.abs(g0).max()))
        assert U.gradient_sensitivity() == ref.gradient_sensitivity()


def test_plan_and_report_do_not_depend_on_the_mesh():
    loss, X, y = problem()
    kw = dict(FIT, num_chains=2)
    plain = dp_infer.fit(loss, X, y, **kw)
    meshed = dp_infer.fit(loss, X, y, mesh="auto", **kw)
    assert meshed.plan == plain.plan
    r0, r1 = plain.report(), meshed.report()
    placement = r1["potential"].pop("placement")
    assert r0 == r1 and placement["row_shards"] == jax.device_count()
    a, b = plain.draws(drop_burn_in=False), meshed.draws(drop_burn_in=False)
    assert a.std() > 0.1
    np.testing.assert_allclose(b, a, atol=1e-4)
    # a charged continuation of the sharded run passes its data again and stays the same chain
    steps = 10 * plain.plan.thinning
    plain.extend(steps)
    meshed.extend(steps)
    assert meshed.plan == plain.plan and meshed.draws().shape == plain.draws().shape
    np.testing.assert_allclose(meshed.draws(drop_burn_in=False), plain.draws(drop_burn_in=False), atol=1e-4)


def test_bfloat16_rows_keep_the_declared_bound():
    X, _ = _rows(4000, 30, seed=3)  # most rows lie exactly on the bound ||x|| = 1
    t = cast_rows(X, "bfloat16", rounding="toward_zero")
    x64 = t.astype(np.float64)
    assert np.all(np.abs(x64) <= np.abs(X)) and np.all(np.sign(x64) * np.sign(X) >= 0)
    check_cast_rows(t, 1.0)  # never lengthened
    near = cast_rows(X, "bfloat16", rounding="nearest")
    assert np.linalg.norm(near.astype(np.float64), axis=1).max() > 1 + 1e-6  # nearest can cross it
    with pytest.raises(ValueError, match="exceeds the declared row_norm=1.0 after the cast"):
        check_cast_rows(near, 1.0)
    y = np.zeros(4000, np.float32)
    with pytest.raises(ValueError, match="rounding='toward_zero'"):
        shard_rows(logistic(), X, y, dtype="bfloat16", rounding="nearest")
    data = shard_rows(logistic(), X, y, dtype="bfloat16")
    assert data.X.dtype == jnp.bfloat16 and data.describe()["data_dtype"] == "bfloat16"
    np.testing.assert_array_equal(np.asarray(data.X[:4000]).view(np.uint16), t.view(np.uint16))


def test_bad_inputs_raise_before_anything_runs():
    X, _ = _rows(50, 3)
    y = np.zeros(50, np.float32)
    loss = logistic()
    Xn = X.copy()
    Xn[7, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        shard_rows(loss, Xn, y)
    with pytest.raises(ValueError, match="exceeds the declared row_norm"):
        shard_rows(loss, 2 * X, y)
    with pytest.raises(ValueError, match="0/1 labels"):
        shard_rows(loss, X, y + 2)
    with pytest.raises(ValueError, match="mesh must be a jax.sharding.Mesh"):
        shard_rows(loss, X, y, mesh="all")
    with pytest.raises(ValueError, match="dtype must be one of"):
        shard_rows(loss, X, y, dtype="float16")
    with pytest.raises(ValueError, match="block_rows must be an integer >= 1"):
        shard_rows(loss, X, y, block_rows=0)
    with pytest.raises(ValueError, match="chain_shards must divide"):
        data_mesh(chain_shards=jax.device_count() + 1)
    U = ShardedPotential(loss, shard_rows(loss, X, y), 1.0)
    with pytest.raises(ValueError, match="chain_method must be 'vectorized' or 'sequential'"):
        U.chain_method(2, "parallel")
    with pytest.raises(ValueError, match=r"mesh must be None for model=\.\.\."):
        dp_infer.fit(None, X, y, model=lambda X=None, y=None: None, eps=1.0, delta=1e-5, target="posterior",
                     mesh="auto")


def test_read_rows_reads_only_the_range(tmp_path):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from dp_infer.parallel.distributed import count_rows, read_rows

    X, rng = _rows(97, 3)
    y = (rng.random(97) < 0.5).astype(np.float32)
    frame = pd.DataFrame({"a": X[:, 0], "y": y, "b": X[:, 1], "c": X[:, 2]})
    frame.to_csv(tmp_path / "d.csv", index=False, float_format="%.9g")
    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "d.parquet", row_group_size=10)
    for f in ("d.csv", "d.parquet"):
        assert count_rows(tmp_path / f) == 97
        for start, stop in [(0, 97), (13, 41), (90, 97)]:
            Xr, yr = read_rows(tmp_path / f, start, stop, target="y", columns=["a", "b", "c"])
            np.testing.assert_array_equal(Xr, X[start:stop])
            np.testing.assert_array_equal(yr, y[start:stop])
        with pytest.raises(ValueError, match="fewer rows|beyond"):
            read_rows(tmp_path / f, 90, 98, target="y")


def _python():
    return [sys.executable, str(WORKER)]


@pytest.mark.slow
def test_eight_simulated_devices_give_the_same_draws(tmp_path):
    out = tmp_path / "dev.npz"
    subprocess.run(_python() + ["devices", str(out)], check=True, timeout=900, cwd=ROOT)
    res = np.load(out)
    assert int(res["device_count"]) == 8
    loss, X, y = problem()
    plain = dp_infer.fit(loss, X, y, **FIT)
    ref = plain.draws(drop_burn_in=False)
    assert ref.std() > 0.1
    ref_report = repr(sorted((k, v) for k, v in plain.report().items() if k not in ("potential", "randomness")))
    for name in ("one", "rows8", "chains2_rows4"):
        np.testing.assert_allclose(res[name], ref, atol=1e-4, err_msg=name)
        assert str(res[name + "_report"]) == ref_report  # the same plan, event and (eps, delta)
    assert "chains" in str(res["chains2_rows4_chain_spec"])  # chains split over the mesh axis
    # bfloat16 rows: a different (rechecked) dataset, so close but not equal draws
    gap = np.abs(res["bf16"].mean(axis=(0, 1)) - ref.mean(axis=(0, 1))).max()
    assert 0 < gap < 0.1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_each_reading_its_rows(tmp_path):
    pd = pytest.importorskip("pandas")
    loss, X, y = problem()
    X = X.astype(np.float32)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame["y"] = y.astype(np.float32)
    csv = tmp_path / "rows.csv"
    frame.to_csv(csv, index=False, float_format="%.9g")
    out = str(tmp_path / "host.npz")
    port = str(_free_port())
    procs = [subprocess.Popen(_python() + ["host", str(p), port, str(csv), str(len(X)), out], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for p in (0, 1)]
    logs = [p.communicate(timeout=900)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    res = np.load(out)
    assert int(res["processes"]) == 2 and int(res["devices"]) == 4
    p1 = np.load(out + ".p1.npz")
    r1 = p1["rows"]
    assert list(res["rows"]) == [0, r1[0]] and r1[1] == len(X)  # each process read only its half
    ref = dp_infer.fit(loss, X, frame["y"].to_numpy(), **FIT).draws(drop_burn_in=False)
    np.testing.assert_allclose(res["draws"], ref, atol=1e-4)
    # process 1 was given another seed; both ran process 0's key (the draws are the same numbers)
    np.testing.assert_array_equal(p1["draws"], res["draws"])


def test_potential_fn_kernel_receives_run_arguments():
    from numpyro.infer import MCMC

    from dp_infer.kernels import Langevin
    from dp_infer.kernels.langevin import sample_chain

    a = jnp.array([1.0, -2.0])

    def U(z, shift):
        return 0.5 * jnp.sum((z["x"] - shift) ** 2)

    mcmc = MCMC(Langevin(potential_fn=U, step_size=0.1), num_warmup=0, num_samples=50,
                progress_bar=False, jit_model_args=True)
    key = jax.random.PRNGKey(0)
    mcmc.run(key, a, init_params={"x": jnp.zeros(2)})
    ref = sample_chain(jax.random.split(key)[0], lambda z: U(z, a), {"x": jnp.zeros(2)}, 0.1, 50)
    np.testing.assert_allclose(mcmc.get_samples()["x"], ref.z["x"], rtol=1e-6)
