"""An OpenEvolve evaluator (PyPI ``openevolve``, requirements-search.lock):
OpenEvolve evolves a policy bundle file, blis scores it.

The program OpenEvolve evolves is the policy file itself
(``blis run --policy-config``; docs/policies.md), YAML whose evolvable part
lies between ``# EVOLVE-BLOCK-START`` and ``# EVOLVE-BLOCK-END`` comment
lines (OpenEvolve's markers; in YAML they are comments), with
``language: yaml`` and ``file_suffix: .yaml`` in OpenEvolve's config. A
Python program (``.py``) is accepted too: it runs confined (a fresh working
folder, an allow-listed environment, resource limits, its processes killed at
the end; :mod:`~blis_sweep.search.confine`, and docs/policy-search.md for
what that does not contain) with the same timeout, and must print the
policy file on stdout.

An evaluator file for OpenEvolve builds one :class:`OpenEvolveEvaluator`
and exports its methods (tools/blis_sweep/examples/openevolve/evaluator.py)::

    from blis_sweep.search import OpenEvolveEvaluator
    _ev = OpenEvolveEvaluator(experiment="exp.yaml", workloads=["mixed-slo"], timeout_s=60)
    evaluate, evaluate_stage1, evaluate_stage2 = _ev.evaluate, _ev.evaluate_stage1, _ev.evaluate_stage2

* ``evaluate_stage1`` (OpenEvolve's cascade, ``cascade_evaluation: true``):
  a smoke test, the ``smoke_workloads`` (default: the workloads) for
  ``smoke_horizon_s`` simulated seconds with the first seed only: an invalid
  bundle, a crash or a hopeless policy stops here.
* ``evaluate_stage2``: the full evaluation, every workload and seed at the
  evaluator's horizon. OpenEvolve runs it when stage 1's ``combined_score``
  passes ``cascade_thresholds[0]``.
* ``evaluate``: the same as stage 2 (for ``cascade_evaluation: false``).

Each returns the metrics: ``combined_score`` (the mean of the workloads'
scores: PolicyEvaluator's, default the share of arrived requests that met
their SLO, in [0, 1]), ``slo_attainment`` (mean), and ``score_<workload>``;
with ``artifacts=True`` (the default when OpenEvolve is installed) an
``EvaluationResult`` whose artifacts carry the runs' feedback (blis's
summaries and anomaly counters) for the next prompt, and the error of a
program that scores 0. Every blis run has ``timeout_s``: a run still going
is killed and the program scores 0 with that reason (and ``timeout: True``,
OpenEvolve's flag). Keep OpenEvolve's own ``evaluator.timeout`` above it:
OpenEvolve abandons a stage at its timeout but cannot kill it.
Nothing raises for a bad program.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Sequence, TextIO

from ..backends import Backend
from .confine import Limits, SupervisorError, run_confined
from .core import CandidateError, Outcome, PolicyEvaluator, Workload, assemble_bundle, clip, split_bundle


# A policy file is a few hundred bytes (OpenEvolve's max_code_length is
# 4,000 characters by default): a program past MAX_PROGRAM_BYTES, or a policy
# file (the YAML program, or a Python program's output) past
# MAX_POLICY_BYTES, is refused before it is parsed.
MAX_PROGRAM_BYTES = 1 << 20
MAX_POLICY_BYTES = 64 << 10


def load_program(program_path: str, timeout_s: float | None = None, limits: Limits | None = None) -> str:
    """The policy file a program yields (validated locally; blis checks the
    rest): the file itself, or a Python program's stdout. A relative path
    is read from the working directory. A Python program runs confined
    (:func:`~blis_sweep.search.confine.run_confined`: a fresh working
    folder holding only the program, an allow-listed environment, resource
    limits, every process it started killed when it ends or at
    ``timeout_s``). Raises :class:`CandidateError` with the reason."""
    path = os.path.abspath(program_path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PROGRAM_BYTES + 1)
    except OSError as e:
        raise CandidateError(f"cannot read the program: {clip(str(e), 300)}") from None
    if len(data) > MAX_PROGRAM_BYTES:
        raise CandidateError(f"the program is larger than {MAX_PROGRAM_BYTES} bytes")
    if path.endswith(".py"):
        if timeout_s is not None and not 0 < timeout_s <= 1e6:
            raise CandidateError(f"timeout {timeout_s!r}: seconds in (0, 1e6]")
        try:
            res = run_confined([sys.executable, "-s", "program.py"], {"program.py": data},
                               timeout_s=timeout_s if timeout_s is not None else 60, limits=limits or Limits(),
                               max_stdout=MAX_PROGRAM_BYTES)
        except SupervisorError as e:
            raise CandidateError(clip(f"the program's supervisor was killed ({e})")) from None
        why = res.reason()
        if why == "timed out":
            raise CandidateError(f"timed out: the program ran longer than {timeout_s:g} s and was killed")
        if why is not None:
            tail = "\n".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-5:])
            raise CandidateError(clip(f"the program {why}" + (f": {tail}" if tail else "")))
        data = res.stdout
    if len(data) > MAX_POLICY_BYTES:
        raise CandidateError(f"a policy file of {len(data)} bytes; at most {MAX_POLICY_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CandidateError(f"not UTF-8 text: {e}") from None
    try:
        return assemble_bundle(split_bundle(text))
    except CandidateError as e:
        raise CandidateError(clip(str(e))) from None
    except Exception as e:  # yaml.YAMLError and the like
        raise CandidateError(clip(f"not a policy file: {' '.join(str(e).split())}")) from None


class OpenEvolveEvaluator:
    """The cascade for OpenEvolve over a :class:`PolicyEvaluator`.

    ``workloads``: the full evaluation's (scenario names, spec files or
    mappings; :meth:`Workload.of`); ``smoke_workloads`` and
    ``smoke_horizon_s``: stage 1's. The other keyword arguments
    (experiment, args, seeds, horizon_s, objective, fitness_weights,
    summary_max_tokens, counterfactual_sample, timeout_s, backend, blis) are
    :class:`PolicyEvaluator` 's. ``backend="ray"`` runs on Ray
    (``ray_address``: ``"auto"`` inside a cluster, None for a local one),
    created on first use in each OpenEvolve worker process. ``report``: a
    text stream that gets one line per program that scores 0 with an error,
    as it happens (default stderr; None for none). ``limits``: a Python
    program's resource limits (:class:`~blis_sweep.search.confine.Limits`).
    :meth:`check` finds, before any program runs, a mistake that would fail
    them all.
    """

    def __init__(self, workloads: Sequence[Any], *, smoke_workloads: Sequence[Any] | None = None,
                 smoke_horizon_s: float = 30.0, artifacts: bool | None = None,
                 backend: Backend | str | None = None, ray_address: str | None = None,
                 report: TextIO | None = sys.stderr, limits: Limits | None = None, **evaluator_kwargs: Any):
        if not workloads:
            raise ValueError("workloads: at least one")
        self.workloads = [Workload.of(w) for w in workloads]
        self.smoke_workloads = [Workload.of(w) for w in (smoke_workloads or workloads)]
        self.smoke_horizon_s = smoke_horizon_s
        if artifacts is None:
            try:
                import openevolve.evaluation_result  # noqa: F401

                artifacts = True
            except ImportError:
                artifacts = False
        self.artifacts = artifacts
        self._backend_spec = backend
        self._ray_address = ray_address
        self._kwargs = evaluator_kwargs
        self._evaluator: PolicyEvaluator | None = None
        self.report = report
        self.limits = limits

    def check(self) -> None:
        """Raise :class:`~blis_sweep.search.core.SetupError` when blis
        refuses the experiment, the flags or a workload (stage 1's or stage
        2's), before any program runs (:meth:`PolicyEvaluator.check`)."""
        loads = {w: None for w in self.smoke_workloads + self.workloads}
        self.evaluator.check(list(loads))

    @property
    def evaluator(self) -> PolicyEvaluator:
        if self._evaluator is None:
            backend = self._backend_spec
            if backend == "ray":
                from ..backends import RayBackend

                backend = RayBackend(self._kwargs.get("blis"), address=self._ray_address,
                                     ship_binary=True)
            elif backend in (None, "local"):
                backend = None
            self._evaluator = PolicyEvaluator(backend=backend, **self._kwargs)
        return self._evaluator

    def run(self, program_path: str, stage: int) -> tuple[dict[str, Any], dict[str, str]]:
        """Metrics and artifacts of ``program_path`` at ``stage`` (1: smoke,
        2: full)."""
        ev = self.evaluator
        try:
            bundle = load_program(program_path, ev.timeout_s, self.limits)
        except CandidateError as e:
            return _failed(f"invalid program: {e}")
        if stage == 1:
            outcomes = ev.evaluate_bundle(bundle, self.smoke_workloads, horizon_s=self.smoke_horizon_s, seeds=ev.seeds[:1])
        else:
            outcomes = ev.evaluate_bundle(bundle, self.workloads)
        return _metrics(outcomes, stage)

    def _result(self, program_path: str, stage: int):
        try:
            metrics, artifacts = self.run(program_path, stage)
        except Exception as e:  # a systemic failure (no binary, Ray down): a score of 0, not a crash
            metrics, artifacts = _failed(clip(f"evaluation failed: {type(e).__name__}: {e}"))
        if self.report is not None and "error" in artifacts:
            line = " ".join(artifacts["error"].split())
            print(f"blis-search: {os.path.basename(program_path)} (stage {stage}) scores 0: {clip(line, 300)}",
                  file=self.report, flush=True)
        if self.artifacts:
            from openevolve.evaluation_result import EvaluationResult

            return EvaluationResult(metrics=metrics, artifacts=artifacts)
        return metrics

    def evaluate_stage1(self, program_path: str):
        return self._result(program_path, 1)

    def evaluate_stage2(self, program_path: str):
        return self._result(program_path, 2)

    def evaluate(self, program_path: str):
        return self._result(program_path, 2)


def _failed(reason: str) -> tuple[dict[str, Any], dict[str, str]]:
    metrics: dict[str, Any] = {"combined_score": 0.0}
    if reason.startswith("timed out") or "timed out:" in reason:
        metrics["timeout"] = True
    return metrics, {"error": reason}


def _metrics(outcomes: Sequence[Outcome], stage: int) -> tuple[dict[str, Any], dict[str, str]]:
    failed = [o for o in outcomes if o.error]
    if failed:
        metrics, artifacts = _failed(clip("; ".join(f"{o.workload}: {o.error}" for o in failed), 4000))
        return metrics, artifacts
    n = len(outcomes)
    metrics = {"combined_score": sum(o.score for o in outcomes) / n,
               "slo_attainment": sum(o.metrics.get("slo_attainment", 0.0) for o in outcomes) / n}
    for o in outcomes:
        metrics[f"score_{o.workload}"] = o.score
    key = "smoke_feedback" if stage == 1 else "feedback"
    return metrics, {key: "\n\n".join(o.feedback() for o in outcomes)}
