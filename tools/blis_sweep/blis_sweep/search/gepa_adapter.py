"""A GEPA adapter (PyPI ``gepa``, requirements-search.lock): GEPA evolves a
policy bundle's sections as text, blis scores them.

* Candidate: ``{section: YAML text}`` for some of admission, priority,
  routing, scheduler, autoscale, disaggregation (docs/policies.md); the seed candidate is
  usually :func:`~blis_sweep.search.core.split_bundle` of a policy file.
* Batch items (GEPA's ``DataInst``): workloads, a built-in scenario name
  (``"mixed-slo"``), a workload spec file, or a mapping
  (:meth:`~blis_sweep.search.core.Workload.of`).
* Score: per workload, :class:`~blis_sweep.search.core.PolicyEvaluator`'s
  score (default: the share of arrived requests that met their SLO), in
  [0, 1], higher is better; an invalid candidate or a failed run scores 0
  and its error is the feedback. ``evaluate`` never raises for either.
* Reflective dataset: per component to update, one record per workload
  with the candidate's section, the metrics, and as feedback the score,
  the anomaly counters that fired and blis's Markdown summary of the run
  (``--summarize-trace``: outcome, key issues, worst decisions, suggested
  focus).

Runs go through the evaluator's backend: a local process pool or Ray.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Mapping, Sequence, TextIO

from gepa.core.adapter import EvaluationBatch

from .core import Outcome, PolicyEvaluator, Workload, clip


class BlisGEPAAdapter:
    """``gepa.optimize(..., adapter=BlisGEPAAdapter(PolicyEvaluator(...)))``.

    ``evaluate(batch, candidate, capture_traces)`` returns an
    ``EvaluationBatch`` whose ``outputs`` are per-workload dicts (score,
    metrics, error), ``scores`` the scores, ``objective_scores`` the score
    and SLO attainment, and, with ``capture_traces``, ``trajectories`` the
    :class:`~blis_sweep.search.core.Outcome` s (with the run's summary).
    """

    # GEPA's default proposer (the reflection LM with REFLECTION_PROMPT).
    propose_new_texts = None

    def __init__(self, evaluator: PolicyEvaluator, *, max_records: int = 8, section_help: Mapping[str, str] | None = None,
                 report: TextIO | None = None):
        self.evaluator = evaluator
        self.max_records = max_records
        # Per section, text shown to the reflection LM with each record
        # (e.g. that section's part of docs/policies.md: its templates and
        # parameters); blis's errors list the valid names either way.
        self.section_help = dict(section_help or {})
        # One line per candidate and workload that scores 0 with an error,
        # as it happens (the command line passes stderr).
        self.report = report
        # Candidates in the order first evaluated (the seed is 0), and how
        # many workload evaluations succeeded and failed: the command line
        # exits non-zero when none succeeded, with the first error.
        self.candidate_ids: dict[tuple, int] = {}
        self.ok = 0
        self.failed = 0
        self.first_error: str | None = None
        # blis is deterministic: a candidate on a workload is run once.
        self._cache: dict[tuple, Outcome] = {}

    def evaluate(self, batch: Sequence[Any], candidate: dict[str, str], capture_traces: bool = False) -> EvaluationBatch:
        key = tuple(sorted((str(k), str(v)) for k, v in candidate.items()))
        cid = self.candidate_ids.setdefault(key, len(self.candidate_ids))
        try:
            items = [Workload.of(item) for item in batch]
            todo = [w for w in dict.fromkeys(items) if (key, w) not in self._cache]
            fresh = dict(zip(todo, self.evaluator.evaluate(candidate, todo))) if todo else {}
        except Exception as e:  # a systemic failure (no binary, a dead Ray cluster): still no raise per GEPA's contract
            err = clip(f"evaluation failed: {type(e).__name__}: {e}")
            items = [w if isinstance(w, Workload) else Workload(_name(w), ()) for w in batch]
            fresh = {w: Outcome(w.name, 0.0, error=err) for w in dict.fromkeys(items)}
        for w, o in fresh.items():
            if o.error is None or not ("timed out" in o.error or o.error.startswith("evaluation failed")):
                self._cache[(key, w)] = o
            self._count(cid, o)
        outcomes = [fresh[w] if w in fresh else self._cache[(key, w)] for w in items]
        outputs = [{"workload": o.workload, "score": o.score, "metrics": dict(o.metrics), "error": o.error} for o in outcomes]
        scores = [float(o.score) for o in outcomes]
        objectives = [{"score": float(o.score), "slo_attainment": float(o.metrics.get("slo_attainment", 0.0))}
                      for o in outcomes]
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=outcomes if capture_traces else None,
                               objective_scores=objectives, num_metric_calls=len(batch))

    def _count(self, cid: int, o: Outcome) -> None:
        if o.error is None:
            self.ok += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = f"candidate {cid} on {o.workload}: {o.error}"
        if self.report is not None:
            line = " ".join(o.error.split())
            print(f"gepa: candidate {cid} on {o.workload} scores 0: {clip(line, 300)}", file=self.report, flush=True)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: EvaluationBatch,
                                components_to_update: list[str]) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        outcomes: list[Outcome] = list(eval_batch.trajectories or [])
        if not outcomes:  # evaluated without traces: rebuild what the outputs hold
            outcomes = [Outcome(o["workload"], o["score"], o.get("metrics") or {}, error=o.get("error"))
                        for o in eval_batch.outputs]
        # The lowest scores teach the most; ties keep the batch's order.
        ranked = sorted(range(len(outcomes)), key=lambda i: (outcomes[i].score, i))[: self.max_records]
        others = {k: v for k, v in candidate.items()}
        dataset: dict[str, list[dict[str, Any]]] = {}
        for comp in components_to_update:
            records = []
            for i in ranked:
                o = outcomes[i]
                rec: dict[str, Any] = {
                    "Inputs": {
                        "workload": o.workload,
                        "section": comp,
                        "other sections": {k: v for k, v in others.items() if k != comp},
                    },
                    "Generated Outputs": {"policy section": candidate.get(comp, ""), "score": round(o.score, 6)},
                    "Feedback": o.feedback(),
                }
                if comp in self.section_help:
                    rec["Inputs"]["reference"] = self.section_help[comp]
                records.append(rec)
            dataset[comp] = records
        return dataset


def _name(item: Any) -> str:
    try:
        return Workload.of(item).name
    except Exception:
        return str(item)


# GEPA's reflection prompt for a policy section (<curr_param>: the section's
# YAML, <side_info>: make_reflective_dataset's records).
REFLECTION_PROMPT = """You are tuning one section of a policy bundle for blis, a simulator of a fleet of vLLM
instances behind a router. The section is YAML: {type: TEMPLATE, params: {...}} (docs/policies.md
lists the templates and parameters of admission, priority, routing, scheduler, autoscale and
disaggregation).

The current section:
```
<curr_param>
```

How the bundle did on some workloads (the score is in [0, 1], higher is better: by default the
share of arrived requests that met their SLO; the feedback has the run's metrics, anomaly counters
and summary, or the error that made the bundle invalid):
```
<side_info>
```

Propose a better value for this section. Reply with the new section's YAML only, inside one
``` block, e.g.
```
{type: weighted, params: {scorers: {queue-depth: 2, kv-utilization: 1}}}
```"""


def optimize_policy(seed_candidate: Mapping[str, str], workloads: Sequence[Any], evaluator: PolicyEvaluator,
                    reflection_lm: Any, *, max_metric_calls: int = 20, run_dir: str | None = None, seed: int = 0,
                    valset: Sequence[Any] | None = None, adapter: BlisGEPAAdapter | None = None, **gepa_kwargs: Any):
    """``gepa.optimize`` with a :class:`BlisGEPAAdapter` (``adapter``, or a
    new one on ``evaluator``): ``workloads`` are
    the train set (and the validation set unless ``valset`` is given),
    ``reflection_lm`` a callable ``prompt -> text`` (:func:`openai_lm` for
    an OpenAI-compatible server) or a LiteLLM model name. Returns GEPA's
    result (``best_candidate``, ``val_aggregate_scores``, ...)."""
    import gepa

    return gepa.optimize(seed_candidate=dict(seed_candidate), trainset=list(workloads),
                         valset=list(valset) if valset is not None else list(workloads),
                         adapter=adapter or BlisGEPAAdapter(evaluator), reflection_lm=reflection_lm,
                         max_metric_calls=max_metric_calls, run_dir=run_dir, seed=seed,
                         **{"reflection_prompt_template": REFLECTION_PROMPT, **gepa_kwargs})


def openai_lm(model: str, api_base: str | None = None, api_key: str | None = None, temperature: float | None = None):
    """A reflection LM on an OpenAI-compatible chat completions endpoint
    (OpenAI, vLLM, Ollama, LiteLLM's proxy...): ``prompt -> text``. The key
    is ``api_key`` or $OPENAI_API_KEY (any string for a local server)."""
    import os

    from openai import OpenAI  # installed with openevolve (requirements-search.lock)

    client = OpenAI(base_url=api_base, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none")

    def lm(prompt: Any) -> str:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None:
            kwargs["temperature"] = temperature
        resp = client.chat.completions.create(**kwargs)
        return resp.choices[0].message.content or ""

    return lm


class GuardedLM:
    """A reflection LM that cannot fail quietly: each failed call is one
    line on ``report`` (not a traceback), and :meth:`stop` (a GEPA stop
    callback) ends the search when the LM has never answered and failed
    once (an unreachable or misconfigured endpoint: the client has retried
    already) or has failed ``max_consecutive`` times in a row. ``stopped``
    then holds why."""

    def __init__(self, lm: Callable[[Any], str], *, where: str = "", report: TextIO | None = sys.stderr,
                 max_consecutive: int = 3):
        self.lm, self.where, self.report, self.max_consecutive = lm, where, report, max_consecutive
        self.calls = self.ok = self.consecutive = 0
        self.first_error: str | None = None
        self.stopped: str | None = None

    def __call__(self, prompt: Any) -> str:
        self.calls += 1
        try:
            out = self.lm(prompt)
        except Exception as e:
            self.consecutive += 1
            err = clip(" ".join(f"{type(e).__name__}: {e}".split()), 300)
            self.first_error = self.first_error or err
            if self.report is not None:
                print(f"gepa: the reflection LM{self.where} failed: {err}", file=self.report, flush=True)
            if self.ok == 0:
                self.stopped = f"the reflection LM{self.where} never answered: {self.first_error}"
            elif self.consecutive >= self.max_consecutive:
                self.stopped = f"the reflection LM{self.where} failed {self.consecutive} times in a row: {err}"
            raise
        self.ok += 1
        self.consecutive = 0
        return out

    def stop(self, state: Any = None) -> bool:
        return self.stopped is not None


class ConsoleLogger:
    """GEPA's log on ``stream`` without tracebacks (a failed LM call is one
    line; :class:`GuardedLM`), and whole in ``run_dir``/run_log.txt when
    given."""

    def __init__(self, stream: TextIO, run_dir: str | None = None):
        self.stream = stream
        self.file = None
        if run_dir:
            os.makedirs(run_dir, exist_ok=True)
            self.file = open(os.path.join(run_dir, "run_log.txt"), "a", encoding="utf-8")

    def log(self, *args: Any, **kwargs: Any) -> None:
        message = " ".join(str(a) for a in args)
        if self.file is not None:
            print(message, file=self.file, flush=True)
        if message.lstrip().startswith("Traceback (most recent call last)"):
            return
        print(message, file=self.stream, flush=True)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
