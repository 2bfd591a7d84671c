"""An OpenEvolve evaluator (PyPI ``openevolve``, requirements-search.lock):
OpenEvolve evolves a policy bundle file, blis scores it.

The program OpenEvolve evolves is the policy file itself
(``blis run --policy-config``; docs/policies.md), YAML whose evolvable part
lies between ``# EVOLVE-BLOCK-START`` and ``# EVOLVE-BLOCK-END`` comment
lines (OpenEvolve's markers; in YAML they are comments), with
``language: yaml`` and ``file_suffix: .yaml`` in OpenEvolve's config. A
Python program (``.py``) is accepted too: it is run (with the same timeout)
and must print the policy file on stdout.

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
import subprocess
import sys
from typing import Any, Mapping, Sequence

from ..backends import Backend
from .core import CandidateError, Outcome, PolicyEvaluator, Workload, assemble_bundle, split_bundle


def load_program(program_path: str, timeout_s: float | None = None) -> str:
    """The policy file a program yields (validated locally; blis checks the
    rest): the file itself, or a Python program's stdout. Raises
    :class:`CandidateError` with the reason."""
    if program_path.endswith(".py"):
        try:
            p = subprocess.run([sys.executable, program_path], capture_output=True, timeout=timeout_s,
                               stdin=subprocess.DEVNULL, cwd=os.path.dirname(os.path.abspath(program_path)))
        except subprocess.TimeoutExpired:
            raise CandidateError(f"timed out: the program ran longer than {timeout_s:g} s and was killed") from None
        if p.returncode != 0:
            tail = "\n".join(p.stderr.decode("utf-8", "replace").strip().splitlines()[-5:])
            raise CandidateError(f"the program exited with status {p.returncode}: {tail}")
        text = p.stdout.decode("utf-8", "replace")
    else:
        try:
            with open(program_path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise CandidateError(f"cannot read the program: {e}") from None
    try:
        return assemble_bundle(split_bundle(text))
    except CandidateError:
        raise
    except Exception as e:  # yaml.YAMLError and the like
        raise CandidateError(f"not a policy file: {' '.join(str(e).split())}") from None


class OpenEvolveEvaluator:
    """The cascade for OpenEvolve over a :class:`PolicyEvaluator`.

    ``workloads``: the full evaluation's (scenario names, spec files or
    mappings; :meth:`Workload.of`); ``smoke_workloads`` and
    ``smoke_horizon_s``: stage 1's. The other keyword arguments
    (experiment, args, seeds, horizon_s, objective, fitness_weights,
    summary_max_tokens, counterfactual_sample, timeout_s, backend, blis) are
    :class:`PolicyEvaluator` 's. ``backend="ray"`` runs on Ray
    (``ray_address``: ``"auto"`` inside a cluster, None for a local one),
    created on first use in each OpenEvolve worker process.
    """

    def __init__(self, workloads: Sequence[Any], *, smoke_workloads: Sequence[Any] | None = None,
                 smoke_horizon_s: float = 30.0, artifacts: bool | None = None,
                 backend: Backend | str | None = None, ray_address: str | None = None, **evaluator_kwargs: Any):
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
            bundle = load_program(program_path, ev.timeout_s)
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
            metrics, artifacts = _failed(f"evaluation failed: {type(e).__name__}: {e}")
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
        metrics, artifacts = _failed("; ".join(f"{o.workload}: {o.error}" for o in failed))
        return metrics, artifacts
    n = len(outcomes)
    metrics = {"combined_score": sum(o.score for o in outcomes) / n,
               "slo_attainment": sum(o.metrics.get("slo_attainment", 0.0) for o in outcomes) / n}
    for o in outcomes:
        metrics[f"score_{o.workload}"] = o.score
    key = "smoke_feedback" if stage == 1 else "feedback"
    return metrics, {key: "\n\n".join(o.feedback() for o in outcomes)}
