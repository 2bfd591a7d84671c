"""Validation numbers of the fit: the headline errors of Go's ``calibrate fit`` report.

Mirrored from Go (``fit/fit.go`` scorer, ``fit/evaluate.go``, ``fit/report.go``):

* the error summary of a set of predictions (``Scorer``, defined in ``scores``
  and re-exported here): samples, MAPE and median APE over the samples with a
  positive target (the others are counted in ``targets_not_positive``), RMSE,
  MAE, median and maximum absolute error (ms) and maximum / median absolute
  error; sums are merged over the same fixed chunks as Go, so the same
  predictions give the same numbers to the last bit;
* CV errors at the chosen (gamma, lambda), the within-configuration temporal
  hold-out errors with their regime splits, and leave-one-configuration-out errors
  (with two or more configurations) are computed by ``fit_coefficients.fit_vector``
  with this scorer and appear in ``FitResult.report`` under the keys of Go's
  report.json (``cv``, ``holdout``, ``leave_one_config_out``);
* the v1 acceptance and sign checks (``checks``, ``acceptance_pass``);
* ``evaluate_file``: a coefficient file scored on every sample of a
  configuration's traces, by default every step with a measured cycle
  (``fit_coefficients.predict_options``; Go's ``fit.Evaluate``,
  what ``calibrate predict --tables`` prints), with the per-step points that
  ``--per-step`` writes.

Not mirrored: the residual plots (``*_predicted_vs_actual.png``,
``*_residuals.png``) and report.md (Go's markdown rendering); ``summary`` gives a
short text instead. report.json's structure is followed, but not byte for byte
(extra keys: ``cv_mse`` per grid point, ``holdout_coef``, and ``solve.scale``,
the weighted RMS s_j of every feature in the final fit).

Imports go one way: this module uses ``fit_coefficients`` and ``export_coeffs``,
which never import it (tests/test_import_graph.py).
"""

from __future__ import annotations

from typing import List

import numpy as np

from . import export_coeffs
from . import fit_coefficients as fc
from .scores import NOTE_NO_POSITIVE_TARGETS, NOTE_NO_SAMPLES, Errors, Scorer, errors_dict, mape_text

__all__ = ["Scorer", "Errors", "errors_dict", "evaluate_file", "Evaluation", "summary", "mape_text",
           "NOTE_NO_SAMPLES", "NOTE_NO_POSITIVE_TARGETS"]


class Evaluation(dict):
    """Go's fit.Evaluation as a dict: beta, beta_regimes, beta_skipped,
    beta_target_sources, alpha, alpha_skipped; ``points`` holds the beta
    (predicted, actual) pairs in sample order when asked for."""

    points: List[tuple]


def evaluate_file(cfg, traces, coef_file, opt=None, keep_points: bool = False) -> Evaluation:
    """Score a coefficient file on every sample of ``traces`` (Go's fit.Evaluate).

    ``cfg`` is the compute_features.PhysicsConfig of the file's applies_to,
    ``coef_file`` an export_coeffs.CoefficientFile. ``opt`` defaults to
    ``predict_options()`` (every step with a measured cycle); pass the fit's
    options to clean as the fit does. The file's gamma; no split.
    """
    opt = opt or fc.predict_options()
    opt = fc.Options(**{**opt.__dict__, "gammas": [coef_file.gamma], "folds": 2, "holdout": 0.0,
                        "spec": export_coeffs.spec_of(coef_file.feature_spec_version)})
    opt.validate()
    bb, ab = fc.BetaBuilder(cfg, opt), fc.AlphaBuilder(cfg, opt)
    t = 0
    for tr in traces:
        for eng in fc.trace_engines(tr):
            x = fc.step_index(eng, opt.gammas, [])
            bb.add(t, eng, x)
            ab.add(t, eng, x)
            t += 1
    if bb.chunked_prefill_steps > 0 and bb.chunked_rich == 0:
        raise fc.FitError(f"chunked prefill is on and none of the {bb.chunked_prefill_steps} prefill steps has "
                          "complete REQUEST_SNAPSHOTs: prefill attention cannot be computed")
    _, outliers = bb.drop_outliers(opt.outlier_factor)
    bb.out.part = np.zeros(len(bb.out), dtype=np.int64)
    ab.out.part = np.zeros(len(ab.out), dtype=np.int64)
    ev = Evaluation()
    a, regs, pts = fc.evaluate(bb.out, 0, 0, {0: np.asarray(coef_file.beta, dtype=np.float64)}, 0.0, keep_points)
    ev["beta"] = a.result()
    ev["beta_regimes"] = [regs[0].result(), regs[1].result()]
    ev["beta_skipped"] = fc._sorted_counts(bb.skipped)
    ev["beta_outliers"] = outliers
    ev["beta_target_sources"] = {name: int(np.count_nonzero(bb.out.source == i))
                                 for i, name in enumerate(fc.SOURCES) if np.any(bb.out.source == i)}
    aa, _, _ = fc.evaluate(ab.out, 0, 0, {0: np.asarray(coef_file.alpha, dtype=np.float64)}, 0.0)
    ev["alpha"] = aa.result()
    ev["alpha_skipped"] = fc._sorted_counts(ab.skipped)
    ev.points = [(p, y) for _, p, y in pts]
    return ev


def summary(report: dict) -> str:
    """The lines ``calibrate fit`` prints after a fit: hold-out MAPE per vector and configuration."""
    lines = []
    beta = report.get("beta", {})
    other = beta.get("other_objective")
    for i, h in enumerate(beta.get("holdout", [])):
        o = ""
        if other and i < len(other["holdout"]):
            o = f" ({other['objective']} objective: {mape_text(other['holdout'][i]['mape'])})"
        lines.append(f"beta  {h['config']}: hold-out MAPE {mape_text(h['mape'])} over {h['samples']} steps{o}")
    for h in report.get("alpha", {}).get("holdout", []):
        lines.append(f"alpha {h['config']}: hold-out MAPE {mape_text(h['mape'])} over {h['samples']} requests")
    lines.append("acceptance: " + ("pass" if report.get("acceptance_pass") else "FAIL (see the report's checks)"))
    return "\n".join(lines)
