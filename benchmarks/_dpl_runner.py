"""Run diffprivlib's LogisticRegression (executed by the SEPARATE /tmp/dpl venv's python)."""

import json
import sys
import warnings

import numpy as np
from diffprivlib.models import LogisticRegression

warnings.filterwarnings("ignore")
d = np.load(sys.argv[1])
eps_list, seeds = json.loads(sys.argv[2]), json.loads(sys.argv[3])
rows = []
for e in eps_list:
    accs = []
    for s in seeds:
        # rows already contain an intercept column and have norm <= 1
        m = LogisticRegression(epsilon=e, data_norm=1.0, C=1.0, max_iter=1000, fit_intercept=False, random_state=s)
        m.fit(d["Xtr"], d["ytr"].astype(int))
        accs.append(float(np.mean(m.predict(d["Xte"]) == d["yte"].astype(int))))
    rows.append({"eps": e, "mean": float(np.mean(accs)), "sd": float(np.std(accs, ddof=1)), "accs": accs})
import diffprivlib  # noqa: E402

print(json.dumps({"version": diffprivlib.__version__, "rows": rows}))
