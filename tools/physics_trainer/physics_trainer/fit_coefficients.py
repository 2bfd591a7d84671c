"""The training pipeline of ``calibrate fit``, in Python: samples, ridge, CV, final fit.

This is the twin of Go's ``fit/`` (beta.go, alpha.go, overheads.go, fit.go,
run.go) and ``ridge/``; docs/fit.md states every rule. Go is the source of
truth: where this module and Go disagree, this module is wrong.

Pipeline, per configuration (model, hardware, TP, vLLM knobs) and trace:

* **Step index** (``step_index``): steps sorted by id (stable), duplicate ids
  dropped (first kept), steps with a negative count, ``kv_blocks_total_gpu <= 0``
  or a KV usage outside [0, 1] dropped; the preemption EMA of every gamma,
  ``ema = g * preempted / max(1, running) + (1 - g) * ema``, folded in before the
  step's own features.
* **Beta samples** (``BetaBuilder.add``): target = ts_start(S+1) - ts_start(S)
  when step S+1 was sampled (source ``step_pairs``), else, in journey mode, the
  first ``journey.SCHEDULED`` time with ``scheduler.step = S+1`` (source
  ``journey``). Journey mode: ``--beta-target journey``, or ``auto`` with fewer
  than ``min_pairs`` adjacent sampled steps in the trace. Left out, in this
  order: no next timestamp; warm-up (id <= warmup_steps); engine idle after the
  step (waiting = 0 and finished >= running); non-positive cycle time; under
  chunked prefill a prefill step without complete snapshots. Rich steps (the
  snapshot count equals running and their scheduled tokens add up) use exact
  snapshot sums; others the spec's fallbacks. Weight 0.5 above half the running
  requests preempted. Then the outlier rule (per power-of-two bucket of
  scheduled tokens, 5 x its median, the configuration's median below 20 steps).
* **Alpha samples** (``AlphaBuilder.add``): target = first_scheduled - queued
  (ns columns, else the seconds columns rounded to ns); the reference step is the
  latest sampled step starting at or before QUEUED; warm-up reference steps left
  out. Scheduler-overhead correction (median delay of unqueued requests,
  subtracted from the targets and added back to base_bias) when there are at
  least 10 unqueued requests.
* **Parts** (``assign_parts``): per trace, in time order, the last ``holdout``
  share is the hold-out, the rest is cut into ``folds`` contiguous blocks.
* **Ridge** (``Stats``, ``solve``, ``sse``, ``cross_validate``): weighted ridge
  from sufficient statistics, penalty lambda * sum (s_j beta_j)^2 with s_j the
  weighted RMS of column j, the bias columns (beta b16, alpha a4) unpenalized,
  all-zero columns dropped, the system equilibrated to a unit diagonal, Cholesky
  unless it fails or its condition exceeds 1e12, then a rank-truncated SVD
  (relative cut 1e-12). CV pools fold k of every configuration; the score is the
  pooled weighted MSE; the best (gamma, lambda) has the lowest score, ties within
  1e-12 relative going to the larger lambda of the same gamma (an equal score at a
  later gamma keeps the earlier gamma), exactly as ``fitVector`` loops.
* **Overheads** (``fit_line``): ARRIVED->QUEUED against prompt tokens and
  FINISHED->DEPARTED against output tokens, least squares in microseconds with
  both coefficients kept >= 0.

Numerics: every quantity that feeds a decision or a sample (targets, rounding
with Go's ``math.Round`` semantics, sequential sums where Go sums sequentially,
medians, the EMA recurrence, dot products in feature order) is computed with the
same IEEE operations in the same order as Go, so samples, targets and features
are bit-identical. The normal equations are accumulated by numpy/BLAS in another
order than Go's rank-8 updates, and LAPACK's Cholesky is not gonum's, so the
sufficient statistics and coefficients agree with Go to rounding amplified by the
system's condition (see tests/test_fit_parity.py). The Cholesky condition
that decides between Cholesky and SVD is gonum's: LAPACK's 1-norm estimate
(Dpocon/Dlacn2), not the exact condition number, which can be twice as large.
"""

from __future__ import annotations

import json
import os
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from . import compute_features as cf
from . import export_coeffs
from .extract_traces import Trace, add_count
from .scores import NOTE_NO_SAMPLES, Scorer

__all__ = [
    "Options",
    "Config",
    "FitError",
    "RidgeError",
    "Stats",
    "RidgeFit",
    "solve",
    "sse",
    "select_point",
    "cross_validate",
    "StepIndex",
    "step_index",
    "trace_engines",
    "engine_name",
    "BetaBuilder",
    "AlphaBuilder",
    "assign_parts",
    "fit_line",
    "overhead_samples",
    "median_of",
    "go_round",
    "run",
    "FitResult",
    "SOURCE_PAIRS",
    "SOURCE_JOURNEY",
    "TOOL_VERSION",
]

SOURCE_PAIRS = "step_pairs"
SOURCE_JOURNEY = "journey"
SOURCES = (SOURCE_PAIRS, SOURCE_JOURNEY)
REGIME0 = 0  # beta: prefill-dominated; alpha: queued
REGIME1 = 1  # beta: decode-dominated; alpha: unqueued
MIN_SAMPLES_PER_FOLD = 2
MIN_BUCKET = 20  # Go's fit.MinOutlierBucket
# Go's fit.OutlierTooFast and fit.OutlierTooSlow.
OUTLIER_TOO_FAST = "outlier: cycle time below the hardware's lower bound for the step's work"
OUTLIER_TOO_SLOW = "outlier: cycle time above outlier factor × the median of steps with as many tokens"
MAX_CHOLESKY_COND = 1e12
SVD_RCOND = 1e-12
CV_TIE_REL = 1e-12
EVAL_CHUNKS = 8
TOOL_VERSION = "0.1.0"  # the Go tool version whose pipeline this mirrors (fit.ToolVersion)


class FitError(ValueError):
    """The fit cannot run on these inputs (Go's fit.Run errors)."""


class RidgeError(ValueError):
    """The ridge system cannot be solved (Go's ridge.Solve errors)."""


# ---------------------------------------------------------------------------
# Options and configurations


@dataclass
class Options:
    """The pipeline settings; the defaults are Go's ``fit.DefaultOptions``."""

    lambdas: List[float] = field(default_factory=lambda: [0.001, 0.01, 0.1, 1.0, 10.0, 100.0])
    gammas: List[float] = field(default_factory=lambda: [0.1, 0.3, 0.5])
    folds: int = 5
    holdout: float = 0.2
    warmup_steps: int = 10
    outlier_factor: float = 5.0
    preempt_heavy: float = 0.5
    preempt_weight: float = 0.5
    beta_target: str = "auto"
    min_pairs: int = 1000
    alpha_correction: bool = True
    min_correction_samples: int = 10
    spec: str = cf.DEFAULT_SPEC  # beta feature spec fitted
    objective: str = "relative"  # beta objective: relative (weights 1/t^2) or absolute
    compare_objectives: bool = True  # also fit beta under the other objective and report it (Go's CompareObjectives)
    progress: Optional[Callable[[str], None]] = None

    def validate(self) -> None:
        """Raise FitError naming the offending option (Go's Options.Validate)."""
        if len(self.lambdas) == 0:
            raise FitError("lambdas: empty grid")
        for v in self.lambdas:
            if not (v >= 0) or math.isinf(v):
                raise FitError(f"lambdas: {v} is not a finite number ≥ 0")
        if len(self.gammas) == 0:
            raise FitError("gammas: empty grid")
        for g in self.gammas:
            if not (0 < g <= 1):
                raise FitError(f"gammas: {g} is not in (0, 1]")
        if self.folds < 2 or self.folds > 100:
            raise FitError(f"folds: {self.folds} is not in [2, 100]")
        if not (0 <= self.holdout <= 0.9):
            raise FitError(f"holdout: {self.holdout} is not in [0, 0.9]")
        if self.warmup_steps < 0:
            raise FitError(f"warmup-steps: {self.warmup_steps} is negative")
        if not (self.outlier_factor == 0 or self.outlier_factor > 1):
            raise FitError(f"outlier-factor: {self.outlier_factor} must be 0 (off) or > 1")
        if not (0 <= self.preempt_weight <= 1):
            raise FitError(f"preempt-weight: {self.preempt_weight} is not in [0, 1]")
        if not (self.preempt_heavy >= 0):
            raise FitError(f"preempt-heavy: {self.preempt_heavy} is negative")
        if self.min_pairs < 0:
            raise FitError(f"min-pairs: {self.min_pairs} is negative")
        if self.min_correction_samples < 0:
            raise FitError(f"min-correction-samples: {self.min_correction_samples} is negative")
        if self.spec not in cf.SPECS:
            raise FitError(f'feature-spec: feature spec "{self.spec}" is not {", ".join(cf.SPECS[:-1])} or {cf.SPECS[-1]}')
        if self.objective not in ("relative", "absolute"):
            raise FitError(f'objective: "{self.objective}" is not relative or absolute')
        if self.beta_target not in ("auto", SOURCE_PAIRS, SOURCE_JOURNEY):
            raise FitError(f"beta-target: {self.beta_target!r} is not auto, {SOURCE_PAIRS} or {SOURCE_JOURNEY}")

    def log(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)


@dataclass
class Config:
    """One configuration (a compute_features.PhysicsConfig) and its traces."""

    name: str
    phys: object
    traces: List[Trace]


def _check_duplicates(cfgs) -> None:
    """Go's checkDuplicates: one steps table (by sha256) listed twice would count its samples twice."""
    seen: Dict[str, str] = {}
    for cfg in cfgs:
        for tr in cfg.traces:
            for inp in tr.inputs:
                if os.path.basename(inp.path) != "steps.parquet" or not inp.sha256:
                    continue
                where = f"configuration {cfg.name}, trace {tr.dir}"
                if inp.sha256 in seen:
                    raise FitError(f"{where} has the same steps table as {seen[inp.sha256]} (sha256 {inp.sha256[:12]}): "
                                   "listing one trace twice counts its samples twice")
                seen[inp.sha256] = where


def _cross_check(cfg, tr) -> None:
    """Go's crossCheck, without the model-name warning (the twin does not read the requests' model column)."""
    k = cfg.phys.knobs
    s = tr.steps
    for i in range(len(s["id"])):
        if s["running"][i] > k.max_num_seqs:
            raise FitError(f"configuration {cfg.name}: {tr.dir}: step {int(s['id'][i])} runs {int(s['running'][i])} requests "
                           f"at once, more than the configuration's max_num_seqs {k.max_num_seqs}: give the server's value")
        if s["scheduled"][i] > k.max_batched_tokens:
            raise FitError(f"configuration {cfg.name}: {tr.dir}: step {int(s['id'][i])} schedules {int(s['scheduled'][i])} "
                           f"tokens, more than the configuration's max_batched_tokens {k.max_batched_tokens}: give the "
                           "server's value")
    if not k.chunked_prefill_enabled:
        sn = tr.snapshots
        bad = np.flatnonzero(sn["prefill"] & (sn["scheduled"] > 0) & (sn["computed"] + sn["scheduled"] < sn["prompt"]))
        if len(bad):
            i = int(bad[0])
            raise FitError(f"configuration {cfg.name}: {tr.dir}: step {int(sn['step_id'][i])} schedules "
                           f"{int(sn['scheduled'][i])} of request {json.dumps(str(sn['request'][i]))}'s {int(sn['prompt'][i])} "
                           f"prompt tokens ({int(sn['computed'][i])} computed): a prefill chunk, but the configuration has "
                           "chunked prefill off: give the server's setting")


def predict_options() -> Options:
    """Go's fit.PredictOptions: the defaults for scoring a file against traces, with no warm-up and no outlier
    rule, so every step with a measured cycle is scored."""
    return Options(warmup_steps=0, outlier_factor=0.0)


# ---------------------------------------------------------------------------
# Numeric helpers with Go's semantics


def go_round(x) -> np.ndarray:
    """Go's math.Round (half away from zero), elementwise, as float64."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    f = np.floor(a)
    r = f + ((a - f) >= 0.5)
    return np.copysign(r, x)


def seqsum(a) -> float:
    """Sum in index order, one addition at a time (a Go ``for`` loop), not pairwise."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return 0.0
    return float(np.cumsum(a)[-1])


def median_of(a) -> float:
    """Go's medianOf: the middle value, or the mean of the two middle ones; NaN when empty."""
    a = np.asarray(a, dtype=np.float64)
    n = a.size
    if n == 0:
        return float("nan")
    s = np.sort(a)
    if n % 2 == 1:
        return float(s[n // 2])
    return float((s[n // 2 - 1] + s[n // 2]) / 2)


def bit_len(x: np.ndarray) -> np.ndarray:
    """Go's bits.Len64(uint64(x)) for x >= 0: the number of binary digits (0 for 0)."""
    v = np.asarray(x, dtype=np.int64).astype(np.uint64)
    out = np.zeros(v.shape, dtype=np.int64)
    while True:
        nz = v != 0
        if not nz.any():
            return out
        out += nz
        v = v >> np.uint64(1)


def seq_dot(coef: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Row-wise coef . x summed in feature order from 0, as ridge.Fit.Predict does."""
    out = np.zeros(X.shape[0], dtype=np.float64)
    for j in range(X.shape[1]):
        out = out + coef[..., j] * X[:, j]
    return out


# ---------------------------------------------------------------------------
# Ridge from sufficient statistics (ridge/)


class Stats:
    """Sufficient statistics of weighted least squares over p features (ridge.Stats).

    ``xtwx`` is kept full and symmetric (the upper triangle mirrored). Rows with a
    non-finite x, y or w, or w < 0, are counted in ``bad`` and not accumulated;
    rows with w == 0 count in ``n`` only.
    """

    def __init__(self, p: int):
        self.p = p
        self.xtwx = np.zeros((p, p))
        self.xtwy = np.zeros(p)
        self.ytwy = 0.0
        self.sumw = 0.0
        self.n = 0
        self.bad = 0

    @classmethod
    def from_rows(cls, X: np.ndarray, y: np.ndarray, w: np.ndarray) -> "Stats":
        s = cls(X.shape[1])
        s.add_rows(X, y, w)
        return s

    def add_rows(self, X: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        good = np.isfinite(y) & np.isfinite(w) & (w >= 0) & np.all(np.isfinite(X), axis=1)
        self.bad += int(np.count_nonzero(~good))
        self.n += int(np.count_nonzero(good))
        use = good & (w != 0)
        if not use.any():
            return
        X, y, w = X[use], y[use], w[use]
        wX = X * w[:, None]
        g = X.T @ wX
        g = np.triu(g)
        self.xtwx += g + np.triu(g, 1).T
        wy = w * y
        self.xtwy += X.T @ wy
        self.ytwy += float(wy @ y)
        self.sumw += float(np.sum(w))

    def clone(self) -> "Stats":
        c = Stats(self.p)
        c.xtwx, c.xtwy = self.xtwx.copy(), self.xtwy.copy()
        c.ytwy, c.sumw, c.n, c.bad = self.ytwy, self.sumw, self.n, self.bad
        return c

    def _combine(self, o: "Stats", sign: float) -> None:
        if o.p != self.p:
            raise RidgeError(f"ridge: dimension mismatch: stats over {o.p} features combined with stats over {self.p}")
        self.xtwx = self.xtwx + sign * o.xtwx
        self.xtwy = self.xtwy + sign * o.xtwy
        self.ytwy += sign * o.ytwy
        self.sumw += sign * o.sumw
        self.n += int(sign) * o.n
        self.bad += int(sign) * o.bad

    def add_stats(self, o: "Stats") -> None:
        self._combine(o, 1.0)

    def sub(self, o: "Stats") -> None:
        self._combine(o, -1.0)

    def finite(self) -> bool:
        return bool(np.isfinite(self.xtwx).all() and np.isfinite(self.xtwy).all()
                    and math.isfinite(self.ytwy) and math.isfinite(self.sumw))


@dataclass
class RidgeFit:
    coef: np.ndarray
    dropped: np.ndarray
    scale: np.ndarray
    method: str
    cond: float
    rank: int
    lam: float


def _cholesky(m: np.ndarray) -> Optional[np.ndarray]:
    try:
        return np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return None


def _chol_solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = len(b)
    z = np.zeros(k)
    for i in range(k):
        z[i] = (b[i] - L[i, :i] @ z[:i]) / L[i, i]
    x = np.zeros(k)
    for i in range(k - 1, -1, -1):
        x[i] = (z[i] - L[i + 1:, i] @ x[i + 1:]) / L[i, i]
    return x


def _cond1_estimate(m: np.ndarray, L: np.ndarray) -> float:
    """1-norm condition estimate of m from its Cholesky factor, as gonum's
    Cholesky.Cond: LAPACK's Dpocon (Hager-Higham iteration of Dlacn2 on m^-1)."""
    n = len(m)
    anorm = float(np.abs(m).sum(axis=0).max())
    if anorm == 0:
        return math.inf

    def apply(x):
        return _chol_solve(L, x)

    x = apply(np.full(n, 1.0 / n))
    if n == 1:
        est = abs(float(x[0]))
    else:
        est = float(np.abs(x).sum())
        x = np.copysign(1.0, x)
        isgn = x.copy()
        x = apply(x)
        j = int(np.argmax(np.abs(x)))
        it = 2
        e = np.zeros(n)
        e[j] = 1.0
        x = apply(e)
        while True:  # Dlacn2 state 3
            estold = est
            est = float(np.abs(x).sum())
            if np.array_equal(np.copysign(1.0, x), isgn) or not est > estold:
                break
            x = np.copysign(1.0, x)
            isgn = x.copy()
            x = apply(x)
            jlast = j  # state 4
            j = int(np.argmax(np.abs(x)))
            if not (x[jlast] != abs(x[j]) and it < 5):
                break
            it += 1
            e = np.zeros(n)
            e[j] = 1.0
            x = apply(e)
        alt = np.array([(1.0 if i % 2 == 0 else -1.0) * (1 + i / (n - 1)) for i in range(n)])
        x = apply(alt)
        tmp = 2 * float(np.abs(x).sum()) / float(3 * n)
        if tmp > est:
            est = tmp
    if est == 0:
        return math.inf
    return 1 / ((1 / est) / anorm)


def solve(s: Stats, lam: float, unpenalized: Optional[Sequence[bool]] = None) -> RidgeFit:
    """Weighted ridge of ridge.Solve: scaled penalty, unpenalized bias, Cholesky or SVD."""
    if s.p == 0:
        raise RidgeError("ridge: no data: zero features")
    if s.bad > 0:
        raise RidgeError(f"ridge: {s.bad} of {s.bad + s.n} rows had a non-finite x, y or w, or w < 0")
    if s.bad < 0 or s.n < 0:
        raise RidgeError("ridge: inconsistent statistics: a shard was subtracted that was never added")
    if s.n == 0:
        raise RidgeError("ridge: no data: no rows")
    if not s.finite():
        raise RidgeError("ridge: the statistics overflowed (features or responses too large)")
    if not (s.sumw > 0):
        raise RidgeError(f"ridge: no data: Σw = {s.sumw}")
    if not (lam >= 0) or math.isinf(lam):
        raise RidgeError(f"ridge: lambda must be finite and ≥ 0, got {lam}")
    p = s.p
    unpen = np.zeros(p, dtype=bool) if not unpenalized else np.asarray(unpenalized, dtype=bool)
    if len(unpen) != p:
        raise RidgeError(f"ridge: dimension mismatch: len(Unpenalized) = {len(unpen)}, want 0 or {p}")
    coef = np.zeros(p)
    dropped = np.zeros(p, dtype=bool)
    scale = np.zeros(p)
    kept = []
    for j in range(p):
        d = s.xtwx[j, j]
        if d <= 0:
            dropped[j] = True
            continue
        sj = math.sqrt(d / s.sumw)
        if sj == 0 or math.isinf(sj):
            raise RidgeError(f"ridge: column {j} has an unrepresentable scale (X'WX_jj = {d}, Σw = {s.sumw})")
        scale[j] = sj
        kept.append(j)
    if not kept:
        return RidgeFit(coef, dropped, scale, "none", 0.0, 0, lam)
    kept = np.asarray(kept)
    k = len(kept)
    pen = ~unpen[kept]
    t = np.where(pen, s.sumw + lam, s.sumw)
    r = scale[kept] * np.sqrt(t)
    v = s.xtwx[np.ix_(kept, kept)].copy()
    di = np.arange(k)
    v[di, di] = np.where(pen, v[di, di] + lam * scale[kept] * scale[kept], v[di, di])
    m = (v / r[:, None]) / r[None, :]
    b = s.xtwy[kept] / r
    if not (np.isfinite(r).all() and np.isfinite(m).all() and np.isfinite(b).all()):
        raise RidgeError("ridge: the penalized system overflowed (lambda too large?)")
    gamma = None
    method, cond, rank = "", 0.0, 0
    L = _cholesky(m)
    if L is not None:
        c1 = _cond1_estimate(m, L)
        if c1 <= MAX_CHOLESKY_COND:
            g = _chol_solve(L, b)
            if np.isfinite(g).all():
                gamma, method, cond, rank = g, "cholesky", c1, k
    if gamma is None:
        try:
            u, sv, vt = np.linalg.svd(m)
        except np.linalg.LinAlgError as e:
            raise RidgeError("ridge: SVD of the penalized system did not converge") from e
        rank = len(sv)
        for i, x in enumerate(sv):
            if x <= SVD_RCOND * sv[0]:
                rank = i
                break
        if rank == 0:
            raise RidgeError("ridge: the penalized system is numerically zero")
        c = u.T @ b
        gamma = vt[:rank].T @ (c[:rank] / sv[:rank])
        method, cond = "svd", float(sv[0] / sv[rank - 1])
    coef[kept] = gamma / r
    if not np.isfinite(coef).all():
        raise RidgeError(f"ridge: {method} solve produced non-finite coefficients")
    return RidgeFit(coef, dropped, scale, method, cond, rank, lam)


def sse(s: Stats, coef: np.ndarray) -> float:
    """y'Wy - 2 b'X'Wy + b'X'WXb from the statistics, clamped at 0 (ridge.SSE)."""
    p = s.p
    lin = 0.0
    quad = 0.0
    for i in range(p):
        bi = float(coef[i])
        lin += bi * s.xtwy[i]
        off = 0.0
        for j in range(i + 1, p):
            off += s.xtwx[i, j] * coef[j]
        quad += bi * (s.xtwx[i, i] * bi + 2 * off)
    out = s.ytwy - 2 * lin + quad
    return out if out > 0 else 0.0


def cross_validate(folds: List[Stats], lambdas: Sequence[float], unpenalized: Sequence[bool]) -> List[float]:
    """Pooled weighted validation MSE of every lambda (ridge.CrossValidate's MSE)."""
    if len(folds) < 2:
        raise RidgeError(f"ridge: cross-validation needs at least 2 folds, got {len(folds)}")
    total_w = 0.0
    for k, f in enumerate(folds):
        if f.bad != 0:
            raise RidgeError(f"ridge: fold {k}: {f.bad} rows had a non-finite x, y or w, or w < 0")
        if not f.finite():
            raise RidgeError(f"ridge: fold {k}: the statistics overflowed")
        total_w += f.sumw
    if not (total_w > 0):
        raise RidgeError(f"ridge: no data: total validation Σw = {total_w}")
    mse = [0.0] * len(lambdas)
    for k, f in enumerate(folds):
        train = Stats(folds[0].p)
        for o, g in enumerate(folds):
            if o != k:
                train.add_stats(g)
        for i, lam in enumerate(lambdas):
            try:
                fit = solve(train, lam, unpenalized)
            except RidgeError as e:
                raise RidgeError(f"ridge: fold {k}, lambda {lam:g}: {e}") from e
            mse[i] += sse(f, fit.coef)
    return [m / total_w for m in mse]


# ---------------------------------------------------------------------------
# Steps, EMA


@dataclass
class StepIndex:
    """A trace's steps sorted by id and cleaned, with the EMA of every gamma (n x G)."""

    steps: Dict[str, np.ndarray]
    ema: np.ndarray

    def __len__(self) -> int:
        return len(self.steps["id"])


def preemption_ema(share: np.ndarray, gammas: Sequence[float]) -> np.ndarray:
    """ema_i = g * share_i + (1 - g) * ema_{i-1}, ema_{-1} = 0, for every gamma.

    Runs of share == 0 are a repeated multiplication by (1 - g) (0 + x == x), done
    with multiply.accumulate, which multiplies in the same order as the loop.
    """
    n = len(share)
    out = np.zeros((n, len(gammas)))
    nz = np.flatnonzero(share != 0)
    if n == 0 or len(nz) == 0:
        return out
    for gi, g in enumerate(gammas):
        col = np.zeros(n)
        prev = 0.0
        keep = 1 - g
        bounds = list(nz) + [n]
        for a, i in enumerate(nz):
            prev = g * float(share[i]) + keep * prev
            col[i] = prev
            j = bounds[a + 1]
            if j > i + 1:
                seq = np.empty(j - i)
                seq[0] = prev
                seq[1:] = keep
                run = np.multiply.accumulate(seq)[1:]
                col[i + 1:j] = run
                prev = float(run[-1])
        out[:, gi] = col
    return out


def trace_engines(tr: Trace) -> List[Trace]:
    """Go's Trace.engines: one trace per instance (engine) of ``tr``, rows in table order.

    ``tr`` itself when it has one instance. KV events name no engine: they go to
    the one engine with steps when only one has any, and a trace whose steps come
    from several engines and that has KV events is a :class:`FitError`.
    """
    if len(tr.instances) <= 1:
        return [tr]
    step_inst = tr.inst["steps"]
    with_steps = [bool(np.any(step_inst == k)) for k in range(len(tr.instances))]
    step_engines = [name for name, ok in zip(tr.instances, with_steps) if ok]
    n_kv = len(tr.kv["type"])
    if n_kv > 0 and len(step_engines) > 1:
        quoted = ", ".join(json.dumps(n) for n in step_engines)
        raise FitError(
            f"{tr.dir}: the steps come from {len(step_engines)} engines (instances {quoted}) and kv_events has {n_kv} "
            "transfer or CPU-load events, but KV events lines name no engine and count scheduler_step per engine, "
            "so they cannot be matched to steps; ingest the trace without its KV events (the transfer features are "
            "then 0)")
    out = []
    for k, name in enumerate(tr.instances):
        def part(table: Dict[str, np.ndarray], key: str) -> Dict[str, np.ndarray]:
            m = tr.inst[key] == k
            return {c: v[m] for c, v in table.items()}

        steps = part(tr.steps, "steps")
        kv = tr.kv if with_steps[k] else {c: v[:0] for c, v in tr.kv.items()}
        out.append(Trace(dir=tr.dir, steps=steps, snapshots=part(tr.snapshots, "snapshots"),
                         requests=part(tr.requests, "requests"), scheduled=part(tr.scheduled, "scheduled"),
                         kv=kv, has_kv=tr.has_kv, instances=[name],
                         inst={key: np.zeros(int(np.count_nonzero(tr.inst[key] == k)), dtype=np.int64)
                               for key in tr.inst}))
    return out


def engine_name(tr: Trace) -> str:
    """Go's Trace.engineName: the directory, and the instance id when there is one."""
    if len(tr.instances) == 1 and tr.instances[0] != "":
        return f"{tr.dir} (instance {json.dumps(tr.instances[0])})"
    return tr.dir


def step_index(tr: Trace, gammas: Sequence[float], dropped: List[List]) -> StepIndex:
    """Go's newStepIndex: sort by id, drop duplicates and invalid steps, EMA per gamma."""
    st = tr.steps
    order = np.argsort(st["id"], kind="stable")
    s = {k: v[order] for k, v in st.items()}
    n = len(order)
    ids = s["id"]
    dup = np.zeros(n, dtype=bool)
    if n > 1:
        dup[1:] = ids[1:] == ids[:-1]
    u = s["kv_usage"]
    bad = ~dup & ((s["running"] < 0) | (s["waiting"] < 0) | (s["num_prefill"] < 0) | (s["num_decode"] < 0)
                  | (s["scheduled"] < 0) | (s["prefill_tok"] < 0) | (s["decode_tok"] < 0)
                  | (s["num_preempted"] < 0) | (s["kv_total"] <= 0) | (s["kv_free"] < 0)
                  | ~((u >= 0) & (u <= 1)))
    add_count(dropped, "duplicate step id (first kept)", int(dup.sum()))
    add_count(dropped, "step with a negative count or a KV usage outside [0,1]", int(bad.sum()))
    keep = ~dup & ~bad
    s = {k: v[keep] for k, v in s.items()}
    share = s["num_preempted"].astype(np.float64) / np.maximum(1, s["running"]).astype(np.float64)
    return StepIndex(steps=s, ema=preemption_ema(share, gammas))


# ---------------------------------------------------------------------------
# Samples


def assign_parts(trace: np.ndarray, folds: int, holdout: float) -> np.ndarray:
    """Go's samples.assignParts: per contiguous run of one trace, in time order, the
    last ceil(holdout * n) samples are the hold-out (part ``folds``; at most n - 1
    of them), sample j of the n_train others is in fold j * folds // n_train."""
    trace = np.asarray(trace)
    part = np.zeros(len(trace), dtype=np.int64)
    bounds = [0] + list(_run_ends(trace)) + [len(trace)]
    for start, end in zip(bounds[:-1], bounds[1:]):
        n = end - start
        if n == 0:
            continue
        n_hold = int(math.ceil(holdout * float(n)))
        if holdout > 0 and n_hold >= n:
            n_hold = n - 1
        n_train = n - n_hold
        j = np.arange(n, dtype=np.int64)
        part[start:end] = np.where(j >= n_train, folds, (j * folds) // max(n_train, 1))
    return part


def _run_ends(trace: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.diff(trace)) + 1


class Samples:
    """One vector's samples of one configuration, in trace then time order."""

    def __init__(self, cfg, n_gammas: int):
        self.cfg = cfg
        self.g = n_gammas
        self.y = np.zeros(0)
        self.w = np.zeros(0)
        self.trace = np.zeros(0, dtype=np.int64)
        self.regime = np.zeros(0, dtype=np.int64)
        self.source = np.zeros(0, dtype=np.int64)
        self.part = np.zeros(0, dtype=np.int64)
        self.inputs: Dict[str, np.ndarray] = {}
        self.ema = np.zeros((0, n_gammas))
        self.extra: Dict[str, np.ndarray] = {}  # per-sample bookkeeping (step id, scheduled, ...)
        self._cache = (None, None)

    def __len__(self) -> int:
        return len(self.y)

    def append(self, y, w, trace, regime, source, inputs, ema, extra) -> None:
        self.y = np.concatenate([self.y, y])
        self.w = np.concatenate([self.w, w])
        self.trace = np.concatenate([self.trace, trace])
        self.regime = np.concatenate([self.regime, regime])
        self.source = np.concatenate([self.source, source])
        self.ema = np.concatenate([self.ema, ema]) if len(self.ema) else np.asarray(ema).reshape(-1, self.g)
        for k, v in inputs.items():
            self.inputs[k] = np.concatenate([self.inputs[k], v]) if k in self.inputs else v
        for k, v in extra.items():
            self.extra[k] = np.concatenate([self.extra[k], v]) if k in self.extra else v
        self._cache = (None, None)

    def keep(self, mask: np.ndarray) -> None:
        self.y, self.w, self.trace = self.y[mask], self.w[mask], self.trace[mask]
        self.regime, self.source, self.ema = self.regime[mask], self.source[mask], self.ema[mask]
        if len(self.part):
            self.part = self.part[mask]
        self.inputs = {k: v[mask] for k, v in self.inputs.items()}
        self.extra = {k: v[mask] for k, v in self.extra.items()}
        self._cache = (None, None)

    def assign_parts(self, folds: int, holdout: float) -> None:
        self.part = assign_parts(self.trace, folds, holdout)

    def columns(self, g: int) -> Dict[str, np.ndarray]:
        cols = dict(self.inputs)
        cols["preemption_ema"] = self.ema[:, g] if len(self.y) else np.zeros(0)
        return cols

    def features(self, g: int) -> np.ndarray:
        """The n x p feature matrix at gamma index g (the last one is cached)."""
        if self._cache[0] == g:
            return self._cache[1]
        X = self._features(self.columns(g)) if len(self.y) else np.zeros((0, self.p))
        X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        self._cache = (g, X)
        return X


class BetaSamples(Samples):
    def __init__(self, cfg, n_gammas: int, spec: str = cf.SPEC_V1):
        super().__init__(cfg, n_gammas)
        self.spec = spec
        self.names = cf.beta_names_of(spec)
        self.p = len(self.names)

    def _features(self, cols):
        return cf.beta_features_batch_of(self.spec, self.cfg, cols)


class AlphaSamples(Samples):
    p = cf.NUM_ALPHA
    names = tuple(cf.ALPHA_NAMES)

    def _features(self, cols):
        return cf.alpha_features_batch(self.cfg, cols)


def _lookup(keys: np.ndarray, values: np.ndarray, q: np.ndarray, default=0):
    """values[keys == q] for sorted unique keys; (found, value) per query."""
    if len(keys) == 0:
        return np.zeros(len(q), dtype=bool), np.full(len(q), default, dtype=values.dtype if len(values) else np.int64)
    pos = np.searchsorted(keys, q)
    pc = np.minimum(pos, len(keys) - 1)
    found = (pos < len(keys)) & (keys[pc] == q)
    return found, np.where(found, values[pc], default)


def prompt_cv2(tr: Trace) -> float:
    """Squared coefficient of variation of prompt lengths for the non-rich Σp² fallback:
    from the requests table, else the rich snapshots (one per request), else 0."""
    p = tr.requests["prompt"]
    xs = p[p > 0].astype(np.float64)
    if len(xs) < 2:
        sn = tr.snapshots
        ok = sn["prompt"] > 0
        req, prm = sn["request"][ok], sn["prompt"][ok]
        seen, vals = set(), []
        for r, v in zip(req.tolist(), prm.tolist()):
            if r not in seen:
                seen.add(r)
                vals.append(float(v))
        xs = np.asarray(vals, dtype=np.float64)
    if len(xs) < 2:
        return 0.0
    mean = seqsum(xs) / float(len(xs))
    ss = seqsum((xs - mean) * (xs - mean))
    return ss / float(len(xs)) / (mean * mean)


# Go's fit.SkipLastStep: a step's time is the next step's start minus its own, and a trace records no end of a
# step (step.ts_end_ns and step.duration_us end before the model runs), so a trace's last step with nothing after
# it is left out under this reason.
SKIP_LAST_STEP = "last step of the trace: no next step start to end it (a trace records no step end)"


class BetaBuilder:
    """Beta samples of one configuration (Go's betaBuilder)."""

    def __init__(self, cfg, opt: Options):
        self.cfg = cfg
        self.opt = opt
        self.out = BetaSamples(cfg, len(opt.gammas), opt.spec)
        self.skipped: List[List] = []
        self.rich = 0
        self.chunked_prefill_steps = 0
        self.chunked_rich = 0
        self.no_kv = False
        self.trace_names: List[str] = []  # by sample trace index, for the outlier list

    def add(self, t: int, tr: Trace, x: StepIndex) -> None:
        opt, k = self.opt, self.cfg.knobs
        self.trace_names.extend([""] * (t + 1 - len(self.trace_names)))
        self.trace_names[t] = engine_name(tr)
        s = x.steps
        n = len(x)
        ids = s["id"]
        # Snapshot sums per step id (table order; bincount adds in order).
        sn = tr.snapshots
        u_ids, inv = np.unique(sn["step_id"], return_inverse=True)
        nb = len(u_ids)
        sch = sn["scheduled"]
        cnt = np.bincount(inv, minlength=nb).astype(np.int64)
        sched_sum = np.zeros(nb, dtype=np.int64)
        np.add.at(sched_sum, inv, sch)
        active = sch != 0
        pre = active & sn["prefill"]
        dec = active & ~sn["prefill"]
        work = (sn["computed"] + sch).astype(np.float64) * sch.astype(np.float64)
        pwork = np.bincount(inv, weights=np.where(pre, work, 0.0), minlength=nb) if nb else np.zeros(0)
        dctx = np.zeros(nb, dtype=np.int64)
        np.add.at(dctx, inv[dec], (sn["computed"] + sch)[dec])
        dkv = np.zeros(nb, dtype=np.int64)
        np.add.at(dkv, inv[dec], (sn["blocks_allocated"] + sn["blocks_cached"])[dec])
        # KV transfer blocks per step.
        kv = tr.kv
        tmask = (kv["type"] == "TransferCompleted") & kv["success"]
        cmask = (kv["type"] == "CacheLoadCommitted") & (kv["medium"] == "CPU")

        def per_step(mask):
            st_, bl = kv["step"][mask], kv["blocks"][mask]
            uk, iv = np.unique(st_, return_inverse=True)
            sums = np.zeros(len(uk), dtype=np.int64)
            np.add.at(sums, iv, bl)
            return _lookup(uk, sums, ids)[1].astype(np.int64)

        transfer = per_step(tmask)
        cpu_read = per_step(cmask)
        if k.cpu_offloading and not tr.has_kv:
            self.no_kv = True

        use_journey = opt.beta_target == SOURCE_JOURNEY
        adjacent = np.zeros(n, dtype=bool)
        if n > 1:
            adjacent[:-1] = ids[1:] == ids[:-1] + 1
        if opt.beta_target == "auto":
            use_journey = int(adjacent.sum()) < opt.min_pairs
        ts = s["ts_start_ns"]
        next_ts = np.zeros(n, dtype=np.int64)
        src = np.zeros(n, dtype=np.int64)
        has_next = np.zeros(n, dtype=bool)
        if opt.beta_target != SOURCE_JOURNEY:
            has_next |= adjacent
            next_ts[:-1] = np.where(adjacent[:-1], ts[1:], 0)
        reason = np.zeros(n, dtype=np.int64)  # 0 kept; else index into reasons
        reasons = ["", "no timestamp of the next step", "next step not sampled", "warm-up step",
                   "engine idle after the step", "non-positive cycle time",
                   "prefill step without complete snapshots (chunked prefill on)", SKIP_LAST_STEP]
        if use_journey:
            sched = tr.scheduled
            u_step, first_idx = np.unique(sched["step"], return_index=True)  # sorted (step, ts): first = earliest
            found, jts = _lookup(u_step, sched["ts_ns"][first_idx], ids + 1)
            j = ~has_next
            next_ts = np.where(j & found, jts, next_ts)
            src = np.where(j, 1, 0)
            reason[j & ~found] = 1
            has_next = has_next | (j & found)
        else:
            reason[~has_next] = 2
        if n and reason[-1] in (1, 2):  # nothing after the trace's last step gives its end (Go's noNext)
            reason[-1] = 7
        live = reason == 0
        warm = live & (ids <= opt.warmup_steps)
        reason[warm] = 3
        live &= ~warm
        idle = live & (s["waiting"] == 0) & (s["num_finished"] >= s["running"])
        reason[idle] = 4
        live &= ~idle
        dt = (next_ts - ts).astype(np.float64) / 1e9
        nonpos = live & ~(dt > 0)
        reason[nonpos] = 5
        live &= ~nonpos
        found, pos = _lookup(u_ids, np.arange(nb), ids, default=0)
        rich = (s["rich"] & found & (cnt[pos] == s["running"]) & (sched_sum[pos] == s["scheduled"])
                if nb else np.zeros(n, dtype=bool))
        rich_live = live & rich
        self.rich += int(rich_live.sum())
        prefill_step = s["num_prefill"] > 0
        if k.chunked_prefill_enabled:
            self.chunked_prefill_steps += int((live & prefill_step).sum())
            self.chunked_rich += int((rich_live & prefill_step).sum())
            lost = live & ~rich & prefill_step
            reason[lost] = 6
            live &= ~lost
        for r in range(1, len(reasons)):
            add_count(self.skipped, reasons[r], int((reason == r).sum()))
        idx = np.flatnonzero(live)
        cv2 = 0.0 if k.chunked_prefill_enabled else prompt_cv2(tr)

        P = s["prefill_tok"][idx]
        NP = s["num_prefill"][idx]
        ND = s["num_decode"][idx]
        R = s["running"][idx]
        rk = rich[idx]
        pi = pos[idx]
        fallback_work = np.where(NP > 0, P.astype(np.float64) * P.astype(np.float64)
                                 / np.maximum(NP, 1).astype(np.float64) * (1 + cv2), 0.0)
        share = ND.astype(np.float64) / np.maximum(1, R).astype(np.float64)
        total = s["kv_total"][idx]
        ctx_fb = go_round(s["kv_usage"][idx] * total.astype(np.float64) * float(k.block_size_tokens) * share)
        kvb_fb = go_round((total - s["kv_free"][idx]).astype(np.float64) * share)
        if nb:
            work_r, ctx_r, kvb_r = pwork[pi], dctx[pi], dkv[pi]
        else:
            work_r = ctx_r = kvb_r = np.zeros(len(idx))
        inputs = {
            "prefill_tokens": P,
            "decode_tokens": s["decode_tok"][idx],
            "scheduled_tokens": s["scheduled"][idx],
            "num_prefill_reqs": NP,
            "num_decode_reqs": ND,
            "running_depth": R,
            "sum_prefill_attn_work": np.where(rk, work_r, fallback_work).astype(np.float64),
            "decode_context_tokens": np.where(rk, ctx_r, ctx_fb.astype(np.int64)).astype(np.int64),
            "sum_decode_kv_blocks": np.where(rk, kvb_r, kvb_fb.astype(np.int64)).astype(np.int64),
            "transfer_blocks": transfer[idx],
            "cpu_resident_read_blocks": cpu_read[idx],
        }
        heavy = s["num_preempted"][idx].astype(np.float64) / np.maximum(1, R).astype(np.float64) > opt.preempt_heavy
        w = np.where(heavy, opt.preempt_weight, 1.0)
        regime = np.where(P >= s["decode_tok"][idx], REGIME0, REGIME1)
        self.out.append(
            y=dt[idx], w=w, trace=np.full(len(idx), t, dtype=np.int64), regime=regime,
            source=src[idx].astype(np.int64), inputs=inputs, ema=x.ema[idx],
            extra={"step_id": ids[idx], "rich": rk},
        )

    def drop_outliers(self, factor: float):
        """Go's dropOutliers: (the configuration's median cycle time, NaN when empty; the outlier summary).

        With factor > 0, a step faster than compute_features.lower_bound_seconds_batch or slower than factor x the
        median of its token bucket (bucket of at least MIN_BUCKET steps; smaller buckets are not judged) is left
        out, counted by reason and listed."""
        out = self.out
        summary = {"steps_in_small_buckets_not_judged": 0, "removed": []}
        if len(out) == 0:
            return float("nan"), summary
        median = median_of(out.y)
        if factor <= 0:
            return median, summary
        sched = out.inputs["scheduled_tokens"]
        bucket = bit_len(sched)
        limit = np.full(len(out), math.inf)
        for b in np.unique(bucket):
            m = bucket == b
            if m.sum() >= MIN_BUCKET:
                limit[m] = factor * median_of(out.y[m])
            else:
                summary["steps_in_small_buckets_not_judged"] += int(m.sum())
        lb = cf.lower_bound_seconds_batch(self.cfg, out.columns(0))
        fast = out.y < lb
        slow = ~fast & (out.y > limit)
        for i in np.flatnonzero(fast | slow):
            reason, lim = (OUTLIER_TOO_FAST, lb[i]) if fast[i] else (OUTLIER_TOO_SLOW, limit[i])
            add_count(self.skipped, reason, 1)
            summary["removed"].append({"trace": self.trace_names[int(out.trace[i])], "step_id": int(out.extra["step_id"][i]),
                                       "scheduled_tokens": int(sched[i]), "cycle_ms": float(out.y[i]) * 1e3,
                                       "limit_ms": float(lim) * 1e3, "reason": reason})
        out.keep(~(fast | slow))
        return median, summary


class AlphaBuilder:
    """Alpha samples of one configuration (Go's alphaBuilder)."""

    def __init__(self, cfg, opt: Options):
        self.cfg = cfg
        self.opt = opt
        self.out = AlphaSamples(cfg, len(opt.gammas))
        self.skipped: List[List] = []
        self.lag = np.zeros(0)

    def add(self, t: int, tr: Trace, x: StepIndex) -> None:
        opt, c = self.opt, self.cfg
        rq = tr.requests
        nr = len(rq["prompt"])
        if nr == 0:
            return
        s = x.steps
        order = np.argsort(s["ts_start_ns"], kind="stable")
        ts = s["ts_start_ns"][order]
        # Prefix hit ratio from each request's first snapshot (smallest step id,
        # first in table order among equal ids).
        hit_of: Dict[str, float] = {}
        if c.knobs.prefix_caching_enabled and len(tr.snapshots["step_id"]):
            sn = tr.snapshots
            rows = np.arange(len(sn["step_id"]))
            req = sn["request"].astype(str)
            o = np.lexsort((rows, sn["step_id"], req))
            req_o = req[o]
            first = np.ones(len(o), dtype=bool)
            first[1:] = req_o[1:] != req_o[:-1]
            fo = o[first]
            hr = sn["blocks_cached"][fo].astype(np.float64) / np.maximum(
                1, sn["blocks_allocated"][fo] + sn["blocks_cached"][fo]).astype(np.float64)
            hit_of = dict(zip(req[fo].tolist(), hr.tolist()))
        q = rq["queued_ns"].copy()
        sc = rq["first_scheduled_ns"].copy()
        fq = (q < 0) & ~np.isnan(rq["queued_s"])
        q[fq] = go_round(rq["queued_s"][fq] * 1e9).astype(np.int64)
        fs = (sc < 0) & ~np.isnan(rq["first_scheduled_s"])
        sc[fs] = go_round(rq["first_scheduled_s"][fs] * 1e9).astype(np.int64)
        reason = np.zeros(nr, dtype=np.int64)
        reasons = ["", "request without journey.QUEUED or journey.SCHEDULED", "request without prompt tokens",
                   "SCHEDULED before QUEUED", "QUEUED before the first sampled step", "reference step in the warm-up"]
        live = np.ones(nr, dtype=bool)

        def cut(mask, r):
            nonlocal live
            m = live & mask
            reason[m] = r
            live &= ~m

        cut((q < 0) | (sc < 0), 1)
        cut(rq["prompt"] <= 0, 2)
        cut(sc < q, 3)
        ref = np.searchsorted(ts, q, side="right") - 1
        cut(ref < 0, 4)
        si = order[np.maximum(ref, 0)] if len(order) else np.zeros(nr, dtype=np.int64)
        cut(s["id"][si] <= opt.warmup_steps if len(order) else np.ones(nr, dtype=bool), 5)
        for r in range(1, len(reasons)):
            add_count(self.skipped, reasons[r], int((reason == r).sum()))
        idx = np.flatnonzero(live)
        idx = idx[np.argsort(q[idx], kind="stable")]
        st = si[idx]
        running = s["running"][st]
        hit = np.asarray([hit_of.get(e, 0.0) for e in rq["engine_id"][idx].tolist()], dtype=np.float64)
        inputs = {
            "running_depth": running,
            "waiting_depth": s["waiting"][st],
            "kv_usage_ratio": s["kv_usage"][st],
            "prompt_tokens": rq["prompt"][idx],
            "prefix_hit_ratio": hit,
            "kv_free_bytes": s["kv_free"][st].astype(np.float64) * c.block_size_bytes,
        }
        share = s["num_preempted"][st].astype(np.float64) / np.maximum(1, running).astype(np.float64)
        heavy = share > opt.preempt_heavy
        w = np.where(heavy, opt.preempt_weight, 1.0)
        regime = np.where((s["waiting"][st] > 0) | (running >= c.knobs.max_num_seqs), REGIME0, REGIME1)
        y = (sc[idx] - q[idx]).astype(np.float64) / 1e9
        self.lag = np.concatenate([self.lag, (q[idx] - s["ts_start_ns"][st]).astype(np.float64) / 1e9])
        self.out.append(
            y=y, w=w, trace=np.full(len(idx), t, dtype=np.int64), regime=regime,
            source=np.zeros(len(idx), dtype=np.int64), inputs=inputs, ema=x.ema[st],
            extra={"request_row": idx, "ref_step_id": s["id"][st]},
        )


# ---------------------------------------------------------------------------
# Overheads


def fit_line(xs, ys) -> dict:
    """Go's fitLine: least squares y = base + per_unit * x with both kept >= 0 (µs)."""
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    n = float(len(xs))
    out = {"samples": len(xs), "base_us": 0.0, "per_token_us": 0.0, "method": "none", "mae_us": 0.0,
           "median_us": 0.0}
    if len(xs) == 0:
        return out
    mx, my = seqsum(xs) / n, seqsum(ys) / n
    dx = xs - mx
    sxx = seqsum(dx * dx)
    sxy = seqsum(dx * (ys - my))
    s2 = seqsum(xs * xs)
    per = sxy / sxx if sxx > 0 else 0.0
    base = my - per * mx
    method = "ols"
    if per < 0:
        per, base, method = 0.0, my, "ols, slope clamped to 0"
    elif base < 0:
        base, method = 0.0, "ols, base clamped to 0"
        per = 0.0
        if s2 > 0:
            per = max(0.0, seqsum(xs * ys) / s2)
    ae = np.abs(ys - (base + per * xs))
    out.update(base_us=base, per_token_us=per, method=method, mae_us=seqsum(ae) / n, median_us=median_of(ys))
    return out


ENVELOPE_BINS = 10


def fit_lower_envelope(xs, ys) -> dict:
    """Go's fitLowerEnvelope: the arrival overhead as the lower envelope of
    ARRIVED->QUEUED (the engine core adds requests only between steps, so the
    delay holds a wait for the running step): ENVELOPE_BINS bins of equal count
    by prompt length (stable sort), each bin's median prompt and smallest
    delay, fit_line through those points; MAE and median over all samples."""
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    n = len(xs)
    if n == 0:
        return fit_line(xs, ys)
    idx = np.argsort(xs, kind="stable")
    bins = min(ENVELOPE_BINS, max(1, n // 20))
    bx, by = [], []
    for b in range(bins):
        lo, hi = b * n // bins, (b + 1) * n // bins
        sel = idx[lo:hi]
        bx.append(median_of(xs[sel]))
        by.append(float(np.min(ys[sel])))
    f = fit_line(bx, by)
    f["method"] = "lower envelope (minimum of %d prompt-length bins), %s" % (bins, f["method"])
    f["samples"] = n
    ae = np.abs(ys - (f["base_us"] + f["per_token_us"] * xs))
    f["mae_us"] = seqsum(ae) / float(n)
    f["median_us"] = median_of(ys)
    return f


def overhead_samples(tr: Trace, acc: Dict[str, list], skipped: List[List]) -> None:
    """ARRIVED->QUEUED vs prompt tokens and FINISHED->DEPARTED vs output tokens, µs."""
    r = tr.requests
    d = (r["queued_s"] - r["arrived_s"]) * 1e6
    ok = (r["prompt"] > 0) & (d >= 0)
    acc["arr_x"].append(r["prompt"][ok].astype(np.float64))
    acc["arr_y"].append(d[ok])
    add_count(skipped, "arrival: QUEUED before ARRIVED or no prompt tokens", int((~ok & ~np.isnan(d)).sum()))
    d = (r["departed_s"] - r["finished_s"]) * 1e6
    ok = (r["output"] >= 0) & (d >= 0)
    acc["dep_x"].append(r["output"][ok].astype(np.float64))
    acc["dep_y"].append(d[ok])
    add_count(skipped, "departure: DEPARTED before FINISHED or no output tokens", int((~ok & ~np.isnan(d)).sum()))


# ---------------------------------------------------------------------------
# Fitting one vector


@dataclass
class VectorFit:
    coef: np.ndarray
    gamma: int
    lam: float
    report: dict
    holdout_points: List[tuple]  # (config, predicted, actual)
    final: RidgeFit


def _sum_stats(st, p: int, g: int, use) -> Stats:
    out = Stats(p)
    for c in range(len(st)):
        for k in range(len(st[c])):
            if use(c, k):
                out.add_stats(st[c][k][g])
    return out


def _accumulate(ds: List[Samples], p: int, parts: int, n_gammas: int):
    st = [[[None] * n_gammas for _ in range(parts)] for _ in ds]
    for g in range(n_gammas):
        for c, d in enumerate(ds):
            X = d.features(g)
            for k in range(parts):
                m = d.part == k
                st[c][k][g] = Stats.from_rows(X[m], d.y[m], d.w[m])
    return st


def evaluate(d: Samples, c: int, g: int, coefs: Dict[int, np.ndarray], offset: float,
             keep_points: bool = False):
    """Predict every sample whose part has a model in coefs (Go's evaluate).

    Returns (all, [regime0, regime1], points) scorers; sums are merged per fixed
    chunk of the samples as Go does, so the numbers are Go's to the last bit
    given the same coefficients.
    """
    n = len(d)
    allsc, regs = Scorer(), [Scorer(), Scorer()]
    points = []
    if n == 0:
        return allsc, regs, points
    sel = np.zeros(n, dtype=bool)
    C = np.zeros((n, d.p))
    for part, coef in coefs.items():
        m = d.part == part
        sel |= m
        C[m] = coef
    X = d.features(g)
    pred = seq_dot(C, X) + offset
    y = d.y + offset
    for k in range(EVAL_CHUNKS):
        lo, hi = n * k // EVAL_CHUNKS, n * (k + 1) // EVAL_CHUNKS
        m = sel[lo:hi]
        p_, y_, r_ = pred[lo:hi][m], y[lo:hi][m], d.regime[lo:hi][m]
        allsc.merge(Scorer.of(p_, y_))
        for rg in (0, 1):
            mm = r_ == rg
            regs[rg].merge(Scorer.of(p_[mm], y_[mm]))
        if keep_points:
            points.extend((c, float(a), float(b)) for a, b in zip(p_, y_))
    return allsc, regs, points


def select_point(mse: Sequence[Sequence[float]], lambdas: Sequence[float]) -> tuple:
    """The (gamma index, lambda index) fitVector picks from the CV MSE grid mse[g][l].

    Scanned gamma by gamma, lambda by lambda: a point replaces the best when it is
    lower by more than 1e-12 relative; a point within 1e-12 of the best replaces
    it only when it has the larger lambda *and the same gamma*, so an equal score
    at a later gamma keeps the earlier gamma.
    """
    best_g, best_l, best_mse = -1, -1, math.inf
    for g, row in enumerate(mse):
        for li, m in enumerate(row):
            better = m < best_mse * (1 - CV_TIE_REL)
            tie = (not better) and best_l >= 0 and m <= best_mse * (1 + CV_TIE_REL) and lambdas[li] > lambdas[best_l]
            if best_g < 0 or better or (tie and g == best_g):
                best_g, best_l, best_mse = g, li, m
    return best_g, best_l


def fit_vector(ds: List[Samples], names: Sequence[str], cfg_names: Sequence[str], unpen: Sequence[bool],
               offset: float, opt: Options) -> VectorFit:
    """Go's fitVector: the CV grid, CV errors, hold-out, LOCO and the final fit."""
    p, K = len(names), opt.folds
    parts = K + 1
    st = _accumulate(ds, p, parts, len(opt.gammas))
    rep: dict = {"cv_grid": []}
    grid = []
    for g in range(len(opt.gammas)):
        folds = [_sum_stats(st, p, g, lambda _c, kk, k=k: kk == k) for k in range(K)]
        try:
            mses = cross_validate(folds, opt.lambdas, unpen)
        except RidgeError as e:
            raise FitError(f"cross-validation at γ={opt.gammas[g]}: {e}") from e
        grid.append(mses)
        for li, mse in enumerate(mses):
            rep["cv_grid"].append({"gamma": opt.gammas[g], "lambda": opt.lambdas[li],
                                   "cv_rmse_ms": math.sqrt(mse) * 1e3, "cv_mse": mse})
    best_g, best_l = select_point(grid, opt.lambdas)
    best_mse = grid[best_g][best_l]
    lam = opt.lambdas[best_l]
    rep["gamma"], rep["lambda"] = opt.gammas[best_g], lam
    opt.log(f"  CV over {len(opt.lambdas)} λ × {len(opt.gammas)} γ: best λ={lam:g} γ={opt.gammas[best_g]:g} "
            f"(CV RMSE {math.sqrt(best_mse) * 1e3:.4g} ms)")

    def fit(s: Stats) -> RidgeFit:
        return solve(s, lam, unpen)

    # CV errors at the chosen point: each training sample predicted by the
    # model that did not see its fold (train minus fold, as Go does).
    train = _sum_stats(st, p, best_g, lambda _c, k: k < K)
    models = {}
    for k in range(K):
        s = train.clone()
        s.sub(_sum_stats(st, p, best_g, lambda _c, kk, k=k: kk == k))
        try:
            models[k] = fit(s).coef
        except RidgeError as e:
            raise FitError(f"fit without fold {k + 1}: {e}") from e
    cvs = Scorer()
    for c, d in enumerate(ds):
        a, _, _ = evaluate(d, c, best_g, models, offset)
        cvs.merge(a)
    rep["cv"] = cvs.result()

    points: List[tuple] = []
    rep["holdout"] = []
    if opt.holdout > 0:
        try:
            f = fit(train)
        except RidgeError as e:
            raise FitError(f"fit on the training part: {e}") from e
        for c, d in enumerate(ds):
            a, regs, pts = evaluate(d, c, best_g, {K: f.coef}, offset, keep_points=True)
            points.extend(pts)
            e = a.result()
            e["config"] = cfg_names[c]
            e["regimes"] = [regs[0].result(), regs[1].result()]
            rep["holdout"].append(e)
        rep["holdout_coef"] = f.coef.tolist()

    if len(ds) >= 2:
        rep["leave_one_config_out"] = []
        for c, d in enumerate(ds):
            try:
                f = fit(_sum_stats(st, p, best_g, lambda cc, _k, c=c: cc != c))
            except RidgeError as e:
                raise FitError(f"fit without configuration {cfg_names[c]}: {e}") from e
            a, _, _ = evaluate(d, c, best_g, {k: f.coef for k in range(parts)}, offset)
            e = a.result()
            e["config"] = cfg_names[c]
            rep["leave_one_config_out"].append(e)

    all_ = _sum_stats(st, p, best_g, lambda _c, _k: True)
    try:
        final = fit(all_)
    except RidgeError as e:
        raise FitError(f"final fit: {e}") from e
    rep["solve"] = {"method": final.method, "condition": final.cond, "rank": final.rank,
                    "dropped_all_zero_features": [names[j] for j in range(p) if final.dropped[j]],
                    "scale": final.scale.tolist()}
    rep["samples"] = all_.n
    return VectorFit(coef=final.coef.copy(), gamma=best_g, lam=lam, report=rep, holdout_points=points, final=final)


# ---------------------------------------------------------------------------
# Run


@dataclass
class FitResult:
    """What ``run`` returns: the coefficient file (export_coeffs.CoefficientFile)
    and a report dict shaped like Go's report.json (see validate.py for what is
    left out)."""

    file: object
    report: dict
    beta: VectorFit
    alpha: Optional[VectorFit]
    beta_samples: List[BetaSamples]
    alpha_samples: List[AlphaSamples]


def _sorted_counts(cs: List[List]) -> List[dict]:
    return [{"reason": r, "count": c} for r, c in sorted(cs, key=lambda rc: rc[0])]


def _describe_counts(cs: List[List]) -> str:
    if not cs:
        return "none skipped"
    return "skipped: " + "; ".join(f"{c['count']} {c['reason']}" for c in _sorted_counts(cs))


def describe_sources(src: Dict[str, int]) -> str:
    return " + ".join(f"{k} ({src[k]})" for k in SOURCES if src.get(k, 0) > 0)


def _train_count(part: np.ndarray, folds: int) -> int:
    return int(np.count_nonzero(part < folds))


def _finite_or0(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _cv_mape(cv: dict) -> float:
    """The CV MAPE the coefficient file records: 0 for a MAPE over no positive target (see run)."""
    return 0.0 if cv["mape"] is None else float(cv["mape"])


def _checks(v: dict, is_beta: bool, coef: np.ndarray) -> None:
    within, loco, max_med = (0.15, 0.25, 3.0) if is_beta else (0.25, 0.40, 5.0)
    checks = []
    def below(e, key, limit):  # Go: N > 0 && x < limit, false for a NaN (None) score
        return e["samples"] > 0 and e[key] is not None and e[key] < limit

    def noted(c, note):  # Go's Check.Note: omitted when empty
        if note:
            c["note"] = note
        return c

    for h in v.get("holdout", []):
        checks.append(noted({"config": h["config"], "check": "within-config hold-out MAPE", "value": h["mape"],
                             "threshold": f"< {within:g}", "pass": below(h, "mape", within)}, h.get("note", "")))
        checks.append(noted({"config": h["config"], "check": "max abs error / median abs error (hold-out)",
                             "value": h["max_over_median_abs_error"], "threshold": f"< {max_med:g}",
                             "pass": below(h, "max_over_median_abs_error", max_med)},
                            NOTE_NO_SAMPLES if h["samples"] == 0 else ""))
    for lo in v.get("leave_one_config_out", []):
        checks.append(noted({"config": lo["config"], "check": "leave-one-config-out MAPE", "value": lo["mape"],
                             "threshold": f"< {loco:g}", "pass": below(lo, "mape", loco)}, lo.get("note", "")))

    def sign(names, idx, strict):
        val = float(coef[idx])
        checks.append({"config": "all", "check": "sign of " + names[idx], "value": val,
                       "threshold": "> 0" if strict else ">= 0", "pass": val > 0 if strict else val >= 0})

    if is_beta and len(coef) == cf.NUM_BETA_V2:
        for i in (0, 1):
            sign(cf.BETA_V2_NAMES, i, False)
    elif is_beta:
        for i, strict in ((0, True), (2, True), (10, True), (15, False)):
            sign(cf.BETA_NAMES, i, strict)
    else:
        for i in (2, 3, 4):
            sign(cf.ALPHA_NAMES, i, False)
    v["checks"] = checks


def run(cfgs: List[Config], opt: Optional[Options] = None, command: str = "python -m physics_trainer fit",
        notes: str = "") -> FitResult:
    """Go's fit.Run: samples, beta and alpha fits, overheads, the coefficient file."""
    opt = opt or Options()
    opt.validate()
    if not cfgs:
        raise FitError("no configuration to fit")
    rep: dict = {"tool": "physics_trainer", "tool_version": TOOL_VERSION, "command": command, "options": {
        "lambda_grid": list(opt.lambdas), "gamma_grid": list(opt.gammas), "folds": opt.folds,
        "holdout": opt.holdout, "warmup_steps": opt.warmup_steps, "outlier_factor": opt.outlier_factor,
        "preempt_heavy_share": opt.preempt_heavy, "preempt_heavy_weight": opt.preempt_weight,
        "beta_target": opt.beta_target, "min_pairs": opt.min_pairs, "alpha_correction": opt.alpha_correction,
    }, "configs": []}
    betas: List[BetaSamples] = []
    base_w: List[np.ndarray] = []  # beta weights before the objective's, for compare_objectives
    alphas: List[AlphaSamples] = []
    cfg_names: List[str] = []
    beta_skipped: List[List] = []
    alpha_skipped: List[List] = []
    over_skipped: List[List] = []
    acc = {"arr_x": [], "arr_y": [], "dep_x": [], "dep_y": []}
    sources = {SOURCE_PAIRS: 0, SOURCE_JOURNEY: 0}
    lags = []
    _check_duplicates(cfgs)
    for cfg in cfgs:
        phys = cfg.phys
        try:
            cf.check_spec(phys, opt.spec)
        except ValueError as e:
            raise FitError(f"configuration {cfg.name}: {e}") from e
        info = {"name": cfg.name, "model": phys.model.name, "hardware": phys.hardware.name, "tp": phys.tp,
                "traces": [], "inputs": [], "rows_dropped_on_read": [], "warnings": []}
        dropped_all: List[List] = []
        bb, ab = BetaBuilder(phys, opt), AlphaBuilder(phys, opt)
        t = 0  # samples are grouped by engine: each engine of each trace is a time series
        for tr in cfg.traces:
            _cross_check(cfg, tr)
            info["traces"].append(tr.dir)
            info["inputs"].extend({"path": i.path, "sha256": i.sha256, "rows": i.rows} for i in tr.inputs)
            for r, c in tr.dropped:
                add_count(dropped_all, r, c)
            for eng in trace_engines(tr):
                dropped: List[List] = []
                x = step_index(eng, opt.gammas, dropped)
                for r, c in dropped:
                    add_count(dropped_all, r, c)
                if len(x) > 0 and int(x.steps["kv_total"][0]) != int(phys.knobs.total_kv_blocks_gpu):
                    raise FitError(
                        f"{engine_name(eng)}: steps report kv.blocks_total_gpu = {int(x.steps['kv_total'][0])} but "
                        f"configuration {cfg.name} has {int(phys.knobs.total_kv_blocks_gpu)} GPU KV blocks (set "
                        f"--kv-blocks-gpu to the trace's value)")
                bb.add(t, eng, x)
                ab.add(t, eng, x)
                overhead_samples(eng, acc, over_skipped)
                t += 1
        info["rows_dropped_on_read"] = [{"reason": r, "count": c} for r, c in dropped_all]
        if bb.no_kv:
            info["warnings"].append("CPU offloading is on but a trace has no kv_events table: transfer features are 0 "
                                    "(ingest with --kv-events)")
        if bb.chunked_prefill_steps > 0 and bb.chunked_rich == 0:
            raise FitError(
                f"configuration {cfg.name}: chunked prefill is on and none of its {bb.chunked_prefill_steps} prefill "
                "steps has complete REQUEST_SNAPSHOTs, so prefill attention (b2) cannot be computed; trace with "
                "--step-tracing-rich-subsample-rate > 0 (and a raised OTEL_SPAN_EVENT_COUNT_LIMIT), or pass "
                "--enable-chunked-prefill=false if the server ran without it")
        med, info["beta_outliers"] = bb.drop_outliers(opt.outlier_factor)
        info["beta_median_cycle_ms"] = _finite_or0(med * 1e3)
        base_w.append(bb.out.w)
        if opt.objective == "relative":
            bb.out.w = bb.out.w / (bb.out.y * bb.out.y)
        bb.out.assign_parts(opt.folds, opt.holdout)
        ab.out.assign_parts(opt.folds, opt.holdout)
        for sidx, name in enumerate(SOURCES):
            sources[name] += int(np.count_nonzero(bb.out.source == sidx))
        info["beta_samples_with_snapshots"] = bb.rich
        lags.append(ab.lag)
        for r, c in bb.skipped:
            add_count(beta_skipped, r, c)
        for r, c in ab.skipped:
            add_count(alpha_skipped, r, c)
        need = MIN_SAMPLES_PER_FOLD * opt.folds
        if _train_count(bb.out.part, opt.folds) < need:
            raise FitError(
                f"configuration {cfg.name}: {len(bb.out)} usable beta samples ({_describe_counts(bb.skipped)}); "
                f"{opt.folds}-fold CV needs at least {need} training samples per configuration")
        betas.append(bb.out)
        alphas.append(ab.out)
        cfg_names.append(cfg.name)
        rep["configs"].append(info)
        opt.log(f"{cfg.name}: {len(bb.out)} beta samples, {len(ab.out)} alpha samples")

    beta_names = cf.beta_names_of(opt.spec)
    opt.log(f"fitting beta (feature spec {opt.spec}, {len(beta_names)} features, {opt.objective} objective)")
    beta_unpen = [False] * len(beta_names)
    if opt.spec == cf.SPEC_V1:
        beta_unpen[15] = True
    try:
        bf = fit_vector(betas, beta_names, cfg_names, beta_unpen, 0.0, opt)
    except FitError as e:
        raise FitError(f"beta: {e}") from e
    beta_rep = dict(bf.report)
    beta_rep.update(fitted=True, target_sources={k: v for k, v in sources.items() if v},
                    skipped=_sorted_counts(beta_skipped),
                    coefficients=[{"name": n, "value": float(v)} for n, v in zip(beta_names, bf.coef)])
    _checks(beta_rep, True, bf.coef)
    if opt.compare_objectives:
        other = "absolute" if opt.objective == "relative" else "relative"
        opt.log(f"fitting beta with the {other} objective too, for comparison")
        for d, w in zip(betas, base_w):
            d.w = w / (d.y * d.y) if other == "relative" else w
        o = Options(**{**opt.__dict__, "objective": other, "gammas": [opt.gammas[bf.gamma]]})
        try:
            of = fit_vector(betas, beta_names, cfg_names, beta_unpen, 0.0, o)
        except FitError as e:
            raise FitError(f"beta, {other} objective (for comparison): {e}") from e
        beta_rep["other_objective"] = {"objective": other, "lambda": of.lam, "cv": of.report["cv"],
                                       "holdout": of.report["holdout"]}
        if "leave_one_config_out" in of.report:
            beta_rep["other_objective"]["leave_one_config_out"] = of.report["leave_one_config_out"]

    alpha_coef = np.zeros(cf.NUM_ALPHA)
    af: Optional[VectorFit] = None
    alpha_rep: dict = {"fitted": False, "skipped": _sorted_counts(alpha_skipped)}
    corr = {"applied": False, "scheduler_overhead_ms": 0.0, "unqueued_samples": 0, "note": "",
            "base_bias_fitted": 0.0,
            "median_reference_lag_ms": _finite_or0(median_of(np.concatenate(lags) if lags else []) * 1e3)}
    short = ""
    for c, d in enumerate(alphas):
        if _train_count(d.part, opt.folds) < MIN_SAMPLES_PER_FOLD * opt.folds:
            short = (f"configuration {cfg_names[c]} has {len(d)} usable alpha samples "
                     f"({_describe_counts(alpha_skipped)})")
            break
    if short:
        alpha_rep["not_fitted_reason"] = short + "; alpha is written as zeros (the simulator does not use it)"
        opt.log(f"alpha not fitted: {short}")
    else:
        offset = 0.0
        if opt.alpha_correction:
            ys = np.concatenate([d.y[d.regime == REGIME1] for d in alphas])
            corr["unqueued_samples"] = int(len(ys))
            if len(ys) >= opt.min_correction_samples:
                offset = median_of(ys)
                corr["applied"] = True
                corr["scheduler_overhead_ms"] = offset * 1e3
                corr["note"] = ("the median QUEUED→SCHEDULED delay of unqueued requests was subtracted from every "
                                "target before the fit and added back to base_bias after it; not clamped at 0, "
                                "which would bias the mean")
                for d in alphas:
                    d.y = d.y - offset
            else:
                corr["note"] = (f"not applied: {len(ys)} unqueued requests, fewer than {opt.min_correction_samples}; "
                                "base_bias includes the scheduler overhead")
        else:
            corr["note"] = "off (--alpha-correction=false): base_bias includes the scheduler overhead"
        opt.log(f"fitting alpha ({cf.NUM_ALPHA} features)")
        alpha_unpen = [False] * cf.NUM_ALPHA
        alpha_unpen[3] = True
        try:
            af = fit_vector(alphas, cf.ALPHA_NAMES, cfg_names, alpha_unpen, offset, opt)
        except FitError as e:
            raise FitError(f"alpha: {e}") from e
        alpha_coef = af.coef.copy()
        corr["base_bias_fitted"] = float(alpha_coef[3])
        alpha_coef[3] += offset
        alpha_rep.update(af.report)
        alpha_rep.update(fitted=True,
                         coefficients=[{"name": n, "value": float(v)} for n, v in zip(cf.ALPHA_NAMES, alpha_coef)])
        _checks(alpha_rep, False, alpha_coef)

    cat = lambda k: np.concatenate(acc[k]) if acc[k] else np.zeros(0)  # noqa: E731
    arrival, departure = fit_lower_envelope(cat("arr_x"), cat("arr_y")), fit_line(cat("dep_x"), cat("dep_y"))

    def passed(v):
        return v.get("fitted", False) and all(c["pass"] for c in v.get("checks", []))

    rep.update(beta=beta_rep, alpha=alpha_rep, alpha_correction=corr, overhead_arrival=arrival,
               overhead_departure=departure, overhead_samples_skipped=_sorted_counts(over_skipped))
    # The verdict is beta's: alpha's checks are reported, not judged (docs/physics-spec.md §9).
    rep["acceptance_pass"] = passed(beta_rep)

    first = cfgs[0].phys
    f = export_coeffs.CoefficientFile(
        feature_spec_version=opt.spec,
        applies_to=export_coeffs.AppliesTo.from_phys(first),
        gamma=float(opt.gammas[bf.gamma]),
        alpha=[float(v) for v in alpha_coef],
        beta=[float(v) for v in bf.coef],
        overheads=export_coeffs.Overheads(
            arrival_base_us=float(arrival["base_us"]), arrival_per_prompt_token_us=float(arrival["per_token_us"]),
            departure_base_us=float(departure["base_us"]),
            departure_per_output_token_us=float(departure["per_token_us"])),
        fit=export_coeffs.FitInfo(
            lambda_alpha=float(af.lam) if af else 0.0, lambda_beta=float(bf.lam), folds=opt.folds,
            lambda_grid=[float(v) for v in opt.lambdas], gamma_grid=[float(v) for v in opt.gammas],
            alpha_cv_mape=_cv_mape(af.report["cv"]) if af else 0.0,
            beta_cv_mape=_cv_mape(bf.report["cv"]), beta_target=describe_sources(sources),
            samples_alpha=int(af.report["samples"]) if af else 0, samples_beta=int(bf.report["samples"]),
            objective=opt.objective),
        provenance=export_coeffs.Provenance(tool="physics_trainer", tool_version=export_coeffs.tool_version(),
                                            command=command),
    )
    if af is not None and af.gamma != bf.gamma:
        alpha_rep.setdefault("checks", []).append({
            "config": "all", "check": "alpha's best γ equals beta's", "value": opt.gammas[af.gamma],
            "threshold": f"{opt.gammas[bf.gamma]:g}", "pass": True,
            "note": "the file records beta's γ; alpha's a9 was fitted with its own"})
    parts_ = []
    for c in rep["configs"]:
        for i in c["inputs"]:
            f.provenance.inputs.append(export_coeffs.Input(path=i["path"], sha256=i["sha256"], rows=int(i["rows"])))
        parts_.append(f"{c['name']} ({c['model']} on {c['tp']} × {c['hardware']})")
    f.provenance.notes = "fitted on " + ", ".join(parts_)
    if len(cfgs) > 1:
        f.provenance.notes += "; applies_to is the first configuration"
    if not alpha_rep["fitted"]:
        f.provenance.notes += "; alpha not fitted: " + alpha_rep["not_fitted_reason"]
    # Go's fit.Run: a CV MAPE over no positive target is None (null in the
    # report); the file's field is a number, so it holds 0 and the notes say why.
    for name, r in (("beta_cv_mape", bf.report), ("alpha_cv_mape", af.report if af else None)):
        if r is not None and r["cv"]["mape"] is None:
            f.provenance.notes += "; " + name + " is 0 for want of a positive CV target: not a score"
    if notes:
        f.provenance.notes += "; " + notes
    # Every configuration, for the span Go's File.Check compares runs with.
    f.fitted_configs = [export_coeffs.FittedConfig.from_phys(c.name, c.phys, len(betas[i]), len(alphas[i]))
                        for i, c in enumerate(cfgs)]
    f.validate()
    return FitResult(file=f, report=rep, beta=bf, alpha=af, beta_samples=betas, alpha_samples=alphas)
