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

from typing import Any, Mapping, Sequence

from gepa.core.adapter import EvaluationBatch

from .core import Outcome, PolicyEvaluator, Workload


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

    def __init__(self, evaluator: PolicyEvaluator, *, max_records: int = 8, section_help: Mapping[str, str] | None = None):
        self.evaluator = evaluator
        self.max_records = max_records
        # Per section, text shown to the reflection LM with each record
        # (e.g. that section's part of docs/policies.md: its templates and
        # parameters); blis's errors list the valid names either way.
        self.section_help = dict(section_help or {})

    def evaluate(self, batch: Sequence[Any], candidate: dict[str, str], capture_traces: bool = False) -> EvaluationBatch:
        try:
            outcomes = self.evaluator.evaluate(candidate, batch)
        except Exception as e:  # a systemic failure (no binary, a dead Ray cluster): still no raise per GEPA's contract
            outcomes = [Outcome(_name(item), 0.0, error=f"evaluation failed: {type(e).__name__}: {e}") for item in batch]
        outputs = [{"workload": o.workload, "score": o.score, "metrics": dict(o.metrics), "error": o.error} for o in outcomes]
        scores = [float(o.score) for o in outcomes]
        objectives = [{"score": float(o.score), "slo_attainment": float(o.metrics.get("slo_attainment", 0.0))}
                      for o in outcomes]
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=outcomes if capture_traces else None,
                               objective_scores=objectives, num_metric_calls=len(batch))

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
                    valset: Sequence[Any] | None = None, **gepa_kwargs: Any):
    """``gepa.optimize`` with a :class:`BlisGEPAAdapter`: ``workloads`` are
    the train set (and the validation set unless ``valset`` is given),
    ``reflection_lm`` a callable ``prompt -> text`` (:func:`openai_lm` for
    an OpenAI-compatible server) or a LiteLLM model name. Returns GEPA's
    result (``best_candidate``, ``val_aggregate_scores``, ...)."""
    import gepa

    return gepa.optimize(seed_candidate=dict(seed_candidate), trainset=list(workloads),
                         valset=list(valset) if valset is not None else list(workloads),
                         adapter=BlisGEPAAdapter(evaluator), reflection_lm=reflection_lm,
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
