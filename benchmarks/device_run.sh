#!/usr/bin/env bash
# The device benchmark on a lent GPU machine, in one call (docs/results.md "On a GPU").
#
#   bash benchmarks/device_run.sh --fetch-wheels   # here, once: the wheels the GPU image lacks, into .whl/
#   bash benchmarks/device_run.sh [ARGS..]         # there: install .whl/ into /tmp/site, run
#                                                  #   python -m benchmarks.device ARGS (default --large --demo --model)
#                                                  #   writing device.md, device.json and log.txt to $OUT (or ./device-out)
#
# The GPU image has JAX (CUDA) and most of the stack but no registry: numpyro >= 0.22, ArviZ 1.x,
# dp-accounting (with the attrs it pins), h5netcdf, and the pandas / xarray this project is tested
# with travel as wheels (about 16 MB; name .whl in the call's carry, and add /.whl/ to .git/info/exclude).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
WHEELS="numpyro arviz arviz-base arviz-stats arviz-plots xarray-einstats dp-accounting dm-tree h5netcdf attrs pandas xarray"

if [ "${1:-}" = "--fetch-wheels" ]; then
  py="${DP_INFER_VENV:-$here/.venv}/bin/python"
  pins=$("$py" - "$WHEELS" <<'PY'
import importlib.metadata as m, sys
print(" ".join(f"{n}=={m.version(n)}" for n in sys.argv[1].split()))
PY
)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .whl $pins
  grep -qx "/.whl/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.whl/ >> .git/info/exclude; }
  du -sh .whl
  exit 0
fi

out="${OUT:-$here/device-out}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$here${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/log.txt" || true
python3 -c "import jax, numpyro, arviz, dp_accounting; print('jax', jax.__version__, jax.devices(), 'numpyro', numpyro.__version__)" \
  2>&1 | tee -a "$out/log.txt"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--large --demo --model)
python3 -m benchmarks.device "${args[@]}" --md "$out/device.md" --json "$out/device.json" 2>&1 | tee -a "$out/log.txt"
