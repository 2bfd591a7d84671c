"""Error summaries of predictions: Go's ``scorer`` and ``Errors`` (``fit/fit.go``, ``fit/report.go``).

``Scorer`` gives the errors of a set of predictions against their targets
(seconds): samples, MAPE and median APE over the samples with a positive target
(the others are counted in ``targets_not_positive``), RMSE, MAE, median and
maximum absolute error (ms) and maximum / median absolute error, under the keys
of Go's report.json. Sums are merged over the same fixed chunks as Go, so the
same predictions give the same numbers to the last bit. A score over no sample
is None (Go: NaN, written as JSON null), never 0.

This module imports nothing from the package: ``fit_coefficients`` scores its
fits with it and ``validate`` re-exports it, so neither needs the other at
import time (tests/test_import_graph.py keeps the package's imports acyclic).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np

__all__ = ["Scorer", "Errors", "errors_dict", "mape_text", "NOTE_NO_SAMPLES", "NOTE_NO_POSITIVE_TARGETS"]

Errors = Dict[str, Optional[float]]

# A score over no sample is None (Go: NaN, written as JSON null), never 0, a
# perfect score: every score when there is no sample, mape and median_ape when
# no target is positive; "note" then says so (Go's Errors.Note).
NOTE_NO_SAMPLES = "no samples: every score is null"
NOTE_NO_POSITIVE_TARGETS = "no positive target: mape and median_ape are null"

_EMPTY = {"samples": 0, "mape": None, "median_ape": None, "rmse_ms": None, "mae_ms": None, "median_abs_error_ms": None,
          "max_abs_error_ms": None, "max_over_median_abs_error": None, "targets_not_positive": 0,
          "note": NOTE_NO_SAMPLES}


def _seqsum(a: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    return float(np.cumsum(a)[-1])


def _median(a: np.ndarray) -> float:
    n = a.size
    if n == 0:
        return float("nan")
    s = np.sort(a)
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


class Scorer:
    """Go's scorer: absolute and relative errors of predictions against targets (seconds)."""

    def __init__(self):
        self.ape: List[np.ndarray] = []
        self.ae: List[np.ndarray] = []
        self.se = 0.0
        self.n = 0
        self.non_pos = 0

    @classmethod
    def of(cls, pred: np.ndarray, y: np.ndarray) -> "Scorer":
        """One chunk: errors added one sample at a time, as Go's scorer.add."""
        s = cls()
        pred = np.asarray(pred, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        e = np.abs(pred - y)
        s.n = int(e.size)
        s.ae.append(e)
        s.se = _seqsum(e * e)
        pos = y > 0
        s.ape.append(e[pos] / y[pos])
        s.non_pos = int(np.count_nonzero(~pos))
        return s

    def merge(self, o: "Scorer") -> None:
        self.ape.extend(o.ape)
        self.ae.extend(o.ae)
        self.se += o.se
        self.n += o.n
        self.non_pos += o.non_pos

    def result(self) -> Errors:
        """Go's scorer.result: the summary of Errors (report.json's keys)."""
        if self.n == 0:
            return dict(_EMPTY)
        ae = np.concatenate(self.ae) if self.ae else np.zeros(0)
        ape = np.concatenate(self.ape) if self.ape else np.zeros(0)
        r = dict(_EMPTY)
        r["max_over_median_abs_error"] = 0.0
        del r["note"]
        r["samples"] = self.n
        r["targets_not_positive"] = self.non_pos
        r["rmse_ms"] = math.sqrt(self.se / float(self.n)) * 1e3
        r["mae_ms"] = _seqsum(ae) / float(self.n) * 1e3
        med = _median(ae)
        r["median_abs_error_ms"] = med * 1e3
        r["max_abs_error_ms"] = float(ae.max()) * 1e3
        if med > 0:
            r["max_over_median_abs_error"] = r["max_abs_error_ms"] / r["median_abs_error_ms"]
        if ape.size:
            r["mape"] = _seqsum(ape) / float(ape.size)
            r["median_ape"] = _median(ape)
        else:
            r["note"] = NOTE_NO_POSITIVE_TARGETS
        return r


def mape_text(x: Optional[float]) -> str:
    """A MAPE as calibrate fit prints it: a percentage, or "none (no samples)" (Go's mapeText)."""
    return "none (no samples)" if x is None else f"{x * 100:.2f}%"


def errors_dict(pred, y) -> Errors:
    """Errors of predictions against targets in one pass (no chunking)."""
    return Scorer.of(pred, y).result()
