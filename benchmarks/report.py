"""Markdown tables and PNG plots from a results dict."""

from __future__ import annotations

import os

from .report_quality import quality_markdown, quality_plot


def _f(x, nd=3):
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def mutation_results(docs_dir: str) -> str:
    """The Results table of docs/mutation-testing.md (the mutation runs are not benchmark sections:
    their own page holds the commands; this copy keeps every measured figure on one page)."""
    path = os.path.join(docs_dir, "mutation-testing.md")
    if not os.path.exists(path):
        return ""
    lines = open(path).read().splitlines()
    try:
        start = lines.index("## Results")
    except ValueError:
        return ""
    out, in_table = [], False
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            in_table = True
        elif in_table:
            break
        out.append(line)
    return ("\n## Mutation testing of the privacy-critical code (copied from "
            "[mutation-testing.md](mutation-testing.md), which has the commands and what is left)\n"
            + "\n".join(out).rstrip() + "\n")


def _provenance(res: dict) -> list[str]:
    """Which run produced each section (only when sections come from more than one run)."""
    prov = res.get("provenance", {})
    if len({(p["command"], p["started"]) for p in prov.values()}) <= 1:
        return []
    L = ["Sections come from more than one run; each section's figures and ratios are from the one run named here:", "",
         "| section | command | started | load average at start | runtime (s) |", "|---|---|---|---|---|"]
    for name in res["sections"]:
        p = prov.get(name, {})
        la = p.get("loadavg_at_start")
        L.append(f"| {name} | `{p.get('command', res['command'])}` | {p.get('started', res['started'])} | "
                 f"{', '.join(f'{x:.1f}' for x in la) if la else '—'} | {_f(p.get('runtime_s'), 0)} |")
    return L + [""]


def to_markdown(res: dict) -> str:
    m = res["machine"]
    L = [f"Machine: {m['cpu']}, nproc {m['nproc']} (affinity {m['affinity']}), memory {m['memory']}, "
         f"JAX {m['jax']} ({m['backend']}), Python {m['python']}; load average at start {m.get('loadavg_at_start')} "
         "(the machine is shared: absolute times are noisy, ratios are measured in the same run).",
         f"Started {res['started']}; section runtimes (s): "
         + ", ".join(f"{k} {v:.0f}" for k, v in res["runtime_s"].items()) + ".", ""]
    L += _provenance(res)
    S = res["sections"]
    for name, sec in S.items():
        if "error" in sec:
            L += [f"## {name}: FAILED", "", "```", sec["error"][-1500:], "```", ""]
    a = S.get("audits", {})
    if "rows" in a:
        L += ["## Empirical privacy audits (95% Clopper-Pearson lower bounds)", "",
              "| family | route | statistic | claimed eps | delta | eps lower bound | exact eps of audited law | chains/side | caught? |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in a["rows"]:
            bad = r["eps_lower"] > r["claimed_eps"]
            L.append(f"| {r['family']} | {r['route']} | {r['statistic']} | {_f(r['claimed_eps'])} | {r['delta']:g} | "
                     f"{_f(r['eps_lower'])} | {_f(r['eps_exact'])} | {r['num_samples']} | {'VIOLATION' if bad else 'ok'} |")
        L.append("")
    k = S.get("kernels", {})
    if "rows" in k:
        L += ["## Kernel overhead (marginal steps/s; ratio = inline loop per-step time / variant's, target >= 0.9)", "",
              "| problem | n | d | kernel | variant | steps/s | ratio vs inline (per step) | fixed s per run | "
              "ratio vs inline (total, long run) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in k["rows"]:
            L.append(f"| {r['problem']} | {r['n']} | {r['d']} | {r['kernel']} | {r['variant']} | "
                     f"{r['steps_per_s']:.1f} | {r['ratio_vs_inline']:.3f} | {r['fixed_s']:.2f} | "
                     f"{r['ratio_total_vs_inline']:.3f} ({r['steps']} steps) |")
        L += ["", "BlackJAX: " + ("installed; `blackjax_mala` is its MALA step in a lax.scan (a different, "
                                  "Metropolis-adjusted update: one extra potential evaluation per step)."
                                  if k.get("blackjax") else "absent."), ""]
    h = S.get("hardware", {})
    if "copy_GBps" in h:
        L += ["## Hardware bound", "",
              f"Full-batch logistic gradient, n = {h['n']}, d = {h['d']}: {h['grad_step_s'] * 1e3:.2f} ms per step, "
              f"{h['bytes_per_step'] / 1e6:.0f} MB moved (X read twice) = {h['achieved_GBps']:.2f} GB/s; "
              f"same run, {h.get('array_MB', 0):.0f} MB array: read (reduction) {h.get('read_GBps', 0):.2f} GB/s, "
              f"copy (read + write, donated) {h['copy_GBps']:.2f} GB/s; gradient step at "
              f"{h['fraction_of_bandwidth']:.2f} of the read bandwidth.", ""]
    c = S.get("chains", {})
    if "rows" in c:
        L += ["## Vectorised chains (Adult, chain_method='vectorized')", "",
              "| chains | ms per step (marginal) | fixed s per run | step time vs 1 chain | per-chain cost vs 1 |",
              "|---|---|---|---|---|"]
        for r in c["rows"]:
            L.append(f"| {r['chains']} | {r['per_step_s'] * 1e3:.2f} | {r['fixed_s']:.2f} | {r['time_vs_one']:.2f} | "
                     f"{r['per_chain_cost_vs_one']:.3f} |")
        L.append("")
    u = S.get("utility", {})
    if "methods" in u:
        eps = u["eps"]
        L += [f"## Privacy-utility on Adult (test accuracy, mean ± sd over seeds {u['seeds']}, delta = {u['delta']:g})", "",
              "| method | " + " | ".join(f"eps={e:g}" for e in eps) + " | time (s) |",
              "|---|" + "---|" * (len(eps) + 1)]
        for name, rows in u["methods"].items():
            L.append(f"| {name} | " + " | ".join(f"{r['mean']:.4f} ± {r['sd']:.4f}" for r in rows)
                     + f" | {u['timing_s'].get(name, 0):.0f} |")
        dpl = u.get("diffprivlib", {})
        if "rows" in dpl:
            L.append(f"| diffprivlib {dpl.get('version', '')} (pure eps) | "
                     + " | ".join(f"{r['mean']:.4f} ± {r['sd']:.4f}" for r in dpl["rows"])
                     + f" | {dpl.get('timing_s', 0):.0f} |")
        L.append(f"| non-private (L-BFGS) | " + " | ".join(f"{u['nonprivate']:.4f}" for _ in eps) + " | |")
        if "absent" in dpl:
            L.append(f"\ndiffprivlib: {dpl['absent']}")
        if "last_iterate_error" in u:
            L.append(f"\nlast-iterate route failed: {u['last_iterate_error']}")
        L.append("")
    L += quality_markdown(S.get("quality", {}))
    L += _mechanisms_b(S.get("mechanisms_b", {}))
    L += _data_markdown(S.get("data", {}))
    L += _model_section(S.get("model", {}))
    L += _model_posterior(S.get("model_posterior", {}))
    L += _rashomon_compare(S.get("rashomon_compare", {}))
    L += _mechanisms_a(S.get("mechanisms_a", {}))
    if "one_device" in S.get("scaling", {}):
        from .scaling import markdown as scaling_markdown

        L += scaling_markdown(S["scaling"])
    return "\n".join(L) + "\n"


def _model_posterior(m: dict) -> list[str]:
    from .model_posterior import markdown

    return markdown(m)


def _mechanisms_a(m: dict) -> list[str]:
    from .mechanisms_a import markdown

    return markdown(m)


def _mechanisms_b(mb: dict) -> list[str]:
    """Markdown for the ``mechanisms_b`` section (GG / Gaussian / Laplace queries; pure regression)."""
    L: list[str] = []
    q = mb.get("queries", {})
    if "rows" in q:
        L += [f"## Counting queries on Adult (k random 2-way conjunctions, eps = {q['eps']:g}, delta = {q['delta']:g}, "
              f"{q['reps']} draws)", "",
              "Max error = max over the k answers of |released - true count|. Every mechanism calibrated exactly "
              "for its own accounting (Gaussian: GDP profile; Laplace, GG: dp-accounting PLD; pure Laplace: b = k/eps).",
              "", "| k | method | noise scale | mean max error (± se) | exact E max error | RMS error | note |",
              "|---|---|---|---|---|---|---|"]
        for r in q["rows"]:
            meas = "—" if r["max_error"] is None else f"{r['max_error']:.1f} ± {r['max_error_se']:.1f}"
            note = ""
            if "sigma_ratio_vs_pld" in r:
                note = (f"{r['sigma_ratio_vs_pld']:.0f}x the PLD sigma; thesis conditions "
                        f"{'hold' if r['thesis_conditions_hold'] else 'do not all hold'}")
            elif "corrected_mean" in r:
                note = f"{r['corrected_mean']:.1f} coordinates re-answered on average"
            L.append(f"| {r['k']} | {r['method']} | {r['noise_scale']:.3g} | {meas} | {_f(r['expected_max_error'], 1)} | "
                     f"{_f(r['rms_error'], 1)} | {note} |")
        L.append("")
    g = mb.get("regression", {})
    if "methods" in g:
        eps = g["eps"]
        L += [f"## Linear regression on Adult (age from {g['dim']} features, n = {g['n']}; test MSE, mean ± sd over "
              f"seeds {g['seeds']}; pure methods on the l2 ball of radius {g['radius']:g})", "",
              "| method | " + " | ".join(f"eps={e:g}" for e in eps) + " | time (s) |", "|---|" + "---|" * (len(eps) + 1)]
        for name, rows in g["methods"].items():
            L.append(f"| {name} | " + " | ".join(f"{r['mean']:.4f} ± {r['sd']:.4f}" for r in rows)
                     + f" | {g['timing_s'].get(name, 0):.0f} |")
        L.append(f"| non-private OLS | " + " | ".join(f"{g['ols_mse']:.4f}" for _ in eps) + " | |")
        L += ["", f"Label variance on the test split {g['label_variance']:.4f}; OLS coefficient norm "
              f"{g['ols_norm']:.2f} (the radius is a fixed a-priori choice); {g['rows_clipped']} training rows clipped "
              "to norm 1 by the feature map's declared bound.", ""]
    return L


def _data_markdown(d: dict) -> list[str]:
    if "rows" not in d:
        return []
    npv = d["nonprivate"]
    L = [f"## Your own data: Adult through the shipped schema vs the embedded pipeline (delta = {d['delta']:g}, "
         f"seeds {d['seeds']}, horizon 1, 2 chains)", "",
         f"Load: embedded {d['load_s']['embedded']:.2f} s, schema route from the raw files {d['load_s']['schema']:.2f} s. "
         "Non-private test accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in npv.items() if not k.endswith(" flat"))
         + "; eigenvalues of X'X/n below 1e-10 (flat directions of the training rows): "
         + ", ".join(f"{k[:-5]} {v}" for k, v in npv.items() if k.endswith(" flat")) + ".", "",
         "| eps | coding | dim | route | test accuracy | max R-hat (median) | min bulk ESS (median) | s per fit |",
         "|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        L.append(f"| {r['eps']:g} | {r['route']} | {r['dim']} | {r['plan_route']} | {r['acc_mean']:.4f} ± "
                 f"{r['acc_sd']:.4f} | {r['rhat_median']:.2f} | {r['ess_median']:.1f} | {r['seconds']:.1f} |")
    dr = d.get("draft", {})
    if dr:
        L += ["", f"Private schema draft of adult.data (OpenDP, eps = {dr['eps']:g}, delta = {dr['delta']:g}): "
              f"{dr['seconds']:.1f} s, {dr['columns']} feature columns, {dr['dim']} encoded features; its DP bounds "
              f"clip a value in {100 * dr['fraction_rows_clipped']:.1f}% of the rows."]
    return L + [""]


def plots(res: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = res["sections"]
    if "adult" in S.get("quality", {}):
        quality_plot(S["quality"], out)
    u = S.get("utility", {})
    if "methods" in u:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, rows in u["methods"].items():
            ax.errorbar([r["eps"] for r in rows], [r["mean"] for r in rows], yerr=[r["sd"] for r in rows],
                        marker="o", capsize=3, label=name)
        if "rows" in u.get("diffprivlib", {}):
            rows = u["diffprivlib"]["rows"]
            ax.errorbar([r["eps"] for r in rows], [r["mean"] for r in rows], yerr=[r["sd"] for r in rows],
                        marker="s", capsize=3, label="diffprivlib (pure eps)")
        ax.axhline(u["nonprivate"], color="k", ls="--", label="non-private")
        ax.set_xscale("log")
        ax.set_xlabel("eps (delta = 1e-5)")
        ax.set_ylabel("test accuracy")
        ax.set_title("Adult: privacy-utility")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "utility.png"), dpi=120)
        plt.close(fig)
    a = S.get("audits", {})
    if "rows" in a:
        fig, ax = plt.subplots(figsize=(6, 4))
        rows = a["rows"]
        lbl = [f"{r['family'][:4]}/{r['route']}\n(eps {r['claimed_eps']:.2g})" for r in rows]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [r["claimed_eps"] for r in rows], 0.4, label="claimed")
        ax.bar([i + 0.2 for i in x], [r["eps_lower"] for r in rows], 0.4, label="95% lower bound")
        ax.set_xticks(list(x))
        ax.set_xticklabels(lbl, rotation=60, fontsize=6, ha="right")
        ax.legend()
        ax.set_title("Empirical audits")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "audits.png"), dpi=120)
        plt.close(fig)
    c = S.get("chains", {})
    if "rows" in c:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot([r["chains"] for r in c["rows"]], [r["time_vs_one"] for r in c["rows"]], "o-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("vectorised chains")
        ax.set_ylabel("time / time(1 chain)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "chains.png"), dpi=120)
        plt.close(fig)
    k = S.get("kernels", {})
    if "rows" in k:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        rows = k["rows"]
        ax.barh([f"{r['problem']}/{r['kernel']}/{r['variant']}" for r in rows], [r["ratio_vs_inline"] for r in rows])
        ax.axvline(0.9, color="r", ls="--")
        ax.set_xlabel("speed ratio vs inline lax.scan")
        ax.tick_params(labelsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "kernels.png"), dpi=120)
        plt.close(fig)


def _model_section(mo: dict) -> list[str]:
    """Section ``model``: your own NumPyro model against the built-in loss."""
    if "rows" not in mo:
        return []
    L = [f"## Your own model vs the built-in loss (Adult n = {mo['n']}, d = {mo['d']}, eps = 1, delta = 1e-5, "
         f"2 chains, horizon {mo['horizon']:g})", "",
         "| path | beta | step size | steps | gradient of U, 2 chains (CPU ms) | vs loss | one fit, wall (s) | "
         "one fit, CPU (s) | test accuracy (mean ± sd over seeds) |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in mo["rows"]:
        L.append(f"| {r['path']} | {r['beta']:.1f} | {r['step_size']:.2e} | {r['steps']} | {r['grad_ms']:.2f} | "
                 f"{r['grad_vs_loss']:.2f} | {r['fit_s']:.1f} | {r.get('fit_cpu_s', float('nan')):.1f} | "
                 f"{r['acc_mean']:.4f} ± {r['acc_sd']:.4f} |")
    return L + [""]
def _rashomon_compare(r: dict) -> list[str]:
    """Section rashomon_compare: threshold faithfulness, MCR against exact, breast cancer."""
    L: list[str] = []
    if "threshold" in r:
        t = r["threshold"]
        ex, old, new = t["exact"], t["old"], t["new"]
        L += [f"## Rashomon sets: faithful at the threshold (2-D logistic, n = {t['n']}, l2 = {t['l2']:g}, "
              f"psi = {t['psi']:g}, beta = {t['beta']:g}; {t['chains']} chains, horizon {t['horizon']:g})", "",
              "| | share of in-set draws with L - L* > 0.9 psi | 97.5% quantile of coefficient 0 | share in the set | step | steps | seconds |",
              "|---|---|---|---|---|---|---|",
              f"| exact (1201 x 1201 grid) | {ex['share_above_09psi']:.4f} | {ex['q975_coef0']:.3f} | {ex['in_set']:.4f} | | | |"]
        if "exact_smoothed" in t:
            es = t["exact_smoothed"]
            L.append(f"| exact, smoothed target the current plan runs on (grid) | {es['share_above_09psi']:.4f} | "
                     f"{es['q975_coef0']:.3f} | {es['in_set']:.4f} | | | |")
        for name, row in (("old plan: hard threshold, step 0.5/(beta M)", old),
                          (f"current: threshold smoothed over w = {new.get('threshold_width', 0):.2g}, step from the jump", new)):
            L.append(f"| {name} | {row['share_above_09psi']:.4f} ± {row['share_se']:.4f} | {row['q975_coef0']:.3f} | "
                     f"{row['in_set']:.4f} ± {row['in_set_se']:.4f} | {row['step']:.2e} | {row['steps']} | {row['seconds']:.0f} |")
        L.append("")
    if "mcr" in r:
        m = r["mcr"]
        L += [f"Model class reliance on {m['eval_rows']} public rows, ratio, loss without penalty "
              f"({m['num_draws']} draws of the current plan, exact pairwise swap):", "",
              "| feature | exact [MCR-, MCR+] over the set | from the draws | abs error | exact with the penalty (old definition) |",
              "|---|---|---|---|---|"]
        for j in range(len(m["exact_minus"])):
            L.append(f"| x{j} | [{m['exact_minus'][j]:.4f}, {m['exact_plus'][j]:.4f}] | "
                     f"[{m['draws_minus'][j]:.4f}, {m['draws_plus'][j]:.4f}] | "
                     f"{m['abs_error_minus'][j]:.4f}, {m['abs_error_plus'][j]:.4f} | "
                     f"[{m['exact_penalised_minus'][j]:.4f}, {m['exact_penalised_plus'][j]:.4f}] |")
        L.append("")
    if "breast_cancer" in r:
        b = r["breast_cancer"]
        L += [f"Breast cancer (n_train {b['n_train']}, {b['n_eval']} public evaluation rows, psi {b['psi']:g}):", "",
              "| run | beta | guarantee | flip rate | discrepancy | mean prediction range | mean Rashomon capacity | sign-stable |",
              "|---|---|---|---|---|---|---|---|"]
        for k in ("nonprivate", "private"):
            x = b[k]
            L.append(f"| {k} | {x['beta']:.4g} | {x['guarantee']} | {x['flip_rate']:.3f} | {x['discrepancy']:.3f} | "
                     f"{x['mean_prediction_width']:.3f} | {x['capacity_mean']:.3f} | {x['num_sign_stable']} |")
        L.append("")
    return L
