"""Evaluate a policy bundle on workloads with the blis binary: the part the
GEPA adapter and the OpenEvolve evaluator share.

A *candidate* is a policy bundle given as its sections' YAML text
(``{"routing": "type: weighted\\nparams: {scorers: {queue-depth: 1}}", ...}``;
docs/policies.md). :func:`assemble_bundle` checks each section locally (YAML
syntax, a known section, a mapping or a template name) and writes the
bundle; blis checks the rest (templates, parameters, ranges) when it runs.
A *workload* is a built-in scenario name or a workload spec file
(:class:`Workload`). :class:`PolicyEvaluator` runs one ``blis run`` per
workload and seed as :class:`~blis_sweep.backends.Job` s on a backend (the
local process pool or Ray) and turns each report into an :class:`Outcome`:
a score, the metrics it came from, the run's Markdown summary
(``--summarize-trace``) and its anomaly counters. Nothing here raises for a
bad candidate or a failed run: the outcome scores 0 and says why.

The score (higher is better, in [0, 1]):

* ``objective="slo"`` (the default): the share of the arrived requests
  that finished within their SLO class's targets,
  ``metrics.slo.met / metrics.requests.arrived``. Rejected, timed-out,
  dropped and unfinished requests (still queued or running at the horizon)
  all count as misses, so a policy cannot win by refusing work. It is
  the goodput share: goodput_rps × duration / arrived.
* ``objective="fitness"``: blis run's own fitness score for
  ``fitness_weights`` (``--fitness-weights``, e.g.
  ``"throughput:0.5,p99_ttft:0.5"``; docs/cluster.md gives the
  normalization), for workloads without SLO targets.

A candidate's score on a workload is the mean over the evaluator's seeds.
The same candidate, workloads, seeds and binary give the same score and the
same feedback (blis is deterministic for a seed; nothing here depends on
time, paths or completion order).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..backends import Backend, Job, JobResult, LocalBackend

# A policy file's sections (docs/policies.md), in the order written. A
# candidate's other keys are passed on for blis to judge (its error lists
# the valid sections), so a section blis adds later works before it is
# listed here.
SECTIONS = ("admission", "priority", "routing", "scheduler", "autoscale", "disaggregation")
OBJECTIVES = ("slo", "fitness")
# A policy bundle is a few hundred characters; a candidate's sections (or a
# program's policy file) past this are refused before YAML parses them
# (PyYAML takes about 1 s per 64 KB).
MAX_CANDIDATE_CHARS = 16 << 10
# The longest timeout a run may have (about 11.6 days): above it Python's
# waits overflow (1e300 s raised OverflowError in a worker thread).
MAX_TIMEOUT_S = 1e6


class CandidateError(ValueError):
    """A candidate that is not a policy bundle (its message is the feedback)."""


class SetupError(ValueError):
    """A search that cannot work whatever the candidate: blis refuses the
    experiment, the workloads or the flags (its message names the fix)."""


def assemble_bundle(candidate: Mapping[str, str]) -> str:
    """The policy file (``blis run --policy-config``) for ``candidate``:
    each section's text parsed as YAML and written under its key, in the
    order of :data:`SECTIONS`. A section's text is its mapping
    (``{type: least-loaded}`` or block style), a bare template name
    (``least-loaded``), or the mapping under its own key
    (``routing: {type: least-loaded}``); an empty text leaves the section
    to the experiment (or its default). Raises :class:`CandidateError`
    naming the section for text that is none of these."""
    import yaml  # PyYAML: requirements-search.lock (and requirements-ray.lock)

    bad = sorted(repr(k) for k in candidate if not isinstance(k, str) or k == "version" or not re.fullmatch(r"[a-z_]+", k))
    if bad:
        raise CandidateError(f"component(s) {', '.join(bad)}: a component is a policy section, "
                             f"one of {', '.join(SECTIONS)}")
    sizes = {k: len(str(v)) for k, v in candidate.items() if v is not None}
    if sum(sizes.values()) > MAX_CANDIDATE_CHARS:
        big = max(sizes, key=sizes.__getitem__)
        raise CandidateError(f"{big}: {sizes[big]} characters; a candidate is at most {MAX_CANDIDATE_CHARS}")
    bundle: dict[str, Any] = {}
    for name in list(SECTIONS) + sorted(set(candidate) - set(SECTIONS)):
        text = candidate.get(name)
        if text is None or not str(text).strip():
            continue
        try:
            value = yaml.safe_load(_strip_fences(str(text)))
        except yaml.YAMLError as e:
            raise CandidateError(f"{name}: not valid YAML: {_one_line(str(e))}") from None
        if isinstance(value, Mapping) and set(value) == {name}:
            value = value[name]
        if isinstance(value, str):
            value = {"type": value}
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise CandidateError(
                f"{name}: must be a mapping such as {{type: TEMPLATE, params: {{...}}}} or a template name, "
                f"got {type(value).__name__} {_one_line(str(value))[:80]!r}")
        bundle[name] = dict(value)
    return yaml.safe_dump(bundle, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _strip_fences(text: str) -> str:
    """An LLM often wraps YAML in a Markdown code fence: drop it."""
    m = re.fullmatch(r"\s*```[A-Za-z]*\n(.*?)\n?```\s*", text, re.S)
    return m.group(1) if m else text


def _one_line(s: str) -> str:
    return " ".join(s.split())


@dataclass(frozen=True)
class Workload:
    """One workload a candidate is evaluated on: ``args`` select it on blis
    run's command line (``--scenario NAME``, ``--workload-spec FILE``, or
    any flags and ``--set KEY=VALUE``), ``name`` labels it in the feedback.
    """

    name: str
    args: tuple[str, ...]

    @staticmethod
    def of(item: "Workload | str | Mapping[str, Any]") -> "Workload":
        """A batch item as a workload: a :class:`Workload`; a string, a
        workload spec file when it ends in ``.yaml``/``.yml`` or names a
        path, else a built-in scenario (``mixed-slo``); a mapping with
        ``scenario`` or ``workload_spec`` and optional ``name`` and ``args``
        (more blis run flags)."""
        if isinstance(item, Workload):
            return item
        if isinstance(item, str):
            if item.endswith((".yaml", ".yml")) or os.sep in item:
                return Workload(os.path.basename(item), ("--workload-spec", item))
            return Workload(item, ("--scenario", item))
        if isinstance(item, Mapping):
            extra = tuple(str(a) for a in item.get("args", ()))
            if "scenario" in item:
                base = Workload(str(item["scenario"]), ("--scenario", str(item["scenario"])))
            elif "workload_spec" in item:
                base = Workload(os.path.basename(str(item["workload_spec"])), ("--workload-spec", str(item["workload_spec"])))
            else:
                base = Workload("experiment", ())
            return Workload(str(item.get("name", base.name)), base.args + extra)
        raise TypeError(f"a workload is a scenario name, a workload spec file or a mapping, not {type(item).__name__}")


@dataclass
class Outcome:
    """What one candidate did on one workload (all its seeds): ``score``
    (mean over the seeds, 0 for a failed run), ``metrics`` (the headline
    numbers, per seed averaged), ``summary`` (the first seed's Markdown
    summary of the run), ``anomalies`` (counter name → count, summed over
    the seeds), ``error`` (why it scored 0: the candidate's parse error,
    blis's message, a timeout), and ``per_seed`` scores."""

    workload: str
    score: float
    metrics: dict[str, float] = field(default_factory=dict)
    summary: str = ""
    anomalies: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    per_seed: list[float] = field(default_factory=list)

    def feedback(self) -> str:
        """The text an LLM reflects on: the error, or the score, the
        metrics, the anomaly counters that fired and the run's summary."""
        if self.error:
            return f"Score 0 on workload {self.workload}: {self.error}"
        lines = [f"Score {self.score:.4f} on workload {self.workload} (higher is better, at most 1)."]
        if self.metrics:
            lines.append("Metrics: " + ", ".join(f"{k} {_fmt(v)}" for k, v in self.metrics.items()) + ".")
        fired = {k: v for k, v in self.anomalies.items() if v}
        if fired:
            lines.append("Anomaly counters: " + ", ".join(f"{k} {v}" for k, v in fired.items()) + ".")
        elif self.anomalies:
            lines.append("Anomaly counters: none fired.")
        if self.summary:
            lines += ["", self.summary.strip()]
        return "\n".join(lines)


def _fmt(v: float) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class PolicyEvaluator:
    """Runs candidates on workloads with blis run, through a backend.

    * ``experiment``: an experiment file (``--config``): the deployment,
      run options and the policies a candidate leaves out; None for blis
      run's defaults.
    * ``args``: more blis run flags for every run (``--num-instances 4``).
    * ``seeds``: each workload runs once per seed; its score is the mean.
    * ``horizon_s``: ``--horizon`` (None: the experiment's).
    * ``objective``/``fitness_weights``: the score (module docstring).
    * ``summary_max_tokens``: the summary's budget (``--summary-max-tokens``);
      ``counterfactual_sample``: ``--counterfactual-sample`` (e.g.
      ``every:20``) so the summary ranks routing decisions by regret.
    * ``timeout_s``: a run still going after it is killed and scores 0.
    * ``backend``: a :class:`~blis_sweep.backends.Backend` (default: a local
      process pool on ``blis``).
    """

    def __init__(self, experiment: str | None = None, *, args: Sequence[str] = (), seeds: Sequence[int] = (42,),
                 horizon_s: float | None = None, objective: str = "slo", fitness_weights: str | None = None,
                 summary_max_tokens: int | None = 800, counterfactual_sample: str | None = None,
                 timeout_s: float | None = 300, backend: Backend | None = None, blis: str | None = None):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective {objective!r}: use one of {', '.join(OBJECTIVES)}")
        if objective == "fitness" and not fitness_weights:
            raise ValueError('objective "fitness" needs fitness_weights (blis run --fitness-weights)')
        if not seeds:
            raise ValueError("seeds: at least one")
        if timeout_s is not None and not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"timeout_s {timeout_s!r}: seconds in (0, {MAX_TIMEOUT_S:g}], or None for none")
        self.experiment = experiment
        self.args = tuple(args)
        self.seeds = tuple(int(s) for s in seeds)
        self.horizon_s = horizon_s
        self.objective = objective
        self.fitness_weights = fitness_weights
        self.summary_max_tokens = summary_max_tokens
        self.counterfactual_sample = counterfactual_sample
        self.timeout_s = timeout_s
        self._backend = backend
        self._blis = blis

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = LocalBackend(self._blis)
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def _run_args(self, workload: Workload, horizon_s: float | None = None) -> list[str]:
        args: list[str] = ["run", "--quiet"]
        if self.experiment:
            args += ["--config", self.experiment]
        args += list(self.args) + list(workload.args)
        horizon = horizon_s if horizon_s is not None else self.horizon_s
        if horizon is not None:
            args += ["--horizon", repr(float(horizon))]
        if self.fitness_weights:
            args += ["--fitness-weights", self.fitness_weights]
        return args

    def check(self, workloads: Iterable[Workload | str | Mapping[str, Any]]) -> None:
        """Raise :class:`SetupError` when blis refuses the experiment, flags
        and a workload before any candidate runs: each workload's run is
        resolved once (``blis run ... --print-config``, no simulation, a few
        milliseconds), so a mistake that would fail every candidate is found
        before the search spends its budget. The message is blis's error
        (the first workload that fails), with the fix when it is an
        experiment file that has a workload of its own."""
        loads = [Workload.of(w) for w in workloads]
        jobs = [Job(args=tuple(self._run_args(w) + ["--print-config"]), timeout_s=self.timeout_s) for w in loads]
        results = dict(self.backend.map(jobs)) if jobs else {}
        for i, w in enumerate(loads):
            res = results[i]
            if res.returncode == 0 and not res.timed_out:
                continue
            err = _clean_error(res.stderr) or f"blis run exited with status {res.returncode}"
            msg = f"workload {w.name}: {err}"
            fix = _workload_conflict_fix(self.experiment, err, w)
            raise SetupError(msg + (f"\n{fix}" if fix else ""))

    def jobs(self, bundle: str, workload: Workload, horizon_s: float | None = None,
             seeds: Sequence[int] | None = None) -> list[Job]:
        """The blis runs of ``bundle`` on ``workload``, one per seed."""
        base = self._run_args(workload, horizon_s) + ["--policy-config", "{tmp}/candidate.yaml"]
        outputs: tuple[str, ...] = ()
        if self.summary_max_tokens:
            base += ["--summarize-trace", "{tmp}/summary.md", "--summary-max-tokens", str(self.summary_max_tokens)]
            outputs = ("summary.md",)
        if self.counterfactual_sample:
            base += ["--counterfactual-sample", self.counterfactual_sample]
        files = {"candidate.yaml": bundle.encode()}
        return [Job(args=tuple(base + ["--seed", str(seed)]), files=files, outputs=outputs, timeout_s=self.timeout_s)
                for seed in (seeds or self.seeds)]

    def evaluate(self, candidate: Mapping[str, str], workloads: Iterable[Workload | str | Mapping[str, Any]],
                 horizon_s: float | None = None) -> list[Outcome]:
        """One :class:`Outcome` per workload, in their order; every run
        of every workload goes to the backend at once."""
        loads = [Workload.of(w) for w in workloads]
        try:
            bundle = assemble_bundle(candidate)
        except CandidateError as e:
            return [Outcome(w.name, 0.0, error=clip(f"invalid candidate: {e}")) for w in loads]
        return self.evaluate_bundle(bundle, loads, horizon_s)

    def evaluate_bundle(self, bundle: str, workloads: Sequence[Workload], horizon_s: float | None = None,
                        seeds: Sequence[int] | None = None) -> list[Outcome]:
        """As :meth:`evaluate`, for a policy file's text (``horizon_s`` and
        ``seeds`` replace the evaluator's for these runs)."""
        seeds = tuple(seeds or self.seeds)
        jobs: list[Job] = []
        for w in workloads:
            jobs += self.jobs(bundle, w, horizon_s, seeds)
        results: dict[int, JobResult] = dict(self.backend.map(jobs)) if jobs else {}
        n = len(seeds)
        return [self._outcome(w, seeds, [results[i * n + k] for k in range(n)]) for i, w in enumerate(workloads)]

    def _outcome(self, workload: Workload, seeds: Sequence[int], results: Sequence[JobResult]) -> Outcome:
        scores: list[float] = []
        metrics_sum: dict[str, float] = {}
        anomalies: dict[str, int] = {}
        summary = ""
        for seed, res in zip(seeds, results):
            err, report = _report(res, self.timeout_s)
            if err is None:
                try:
                    score, metrics = self.score(report)
                except (KeyError, TypeError, ValueError) as e:
                    err = f"blis run's report lacks what the score needs ({type(e).__name__}: {e})"
            if err is not None:
                return Outcome(workload.name, 0.0, error=f"seed {seed}: {err}" if len(seeds) > 1 else err,
                               per_seed=[0.0] * len(seeds))
            scores.append(score)
            for k, v in metrics.items():
                metrics_sum[k] = metrics_sum.get(k, 0.0) + v
            for k, v in _anomaly_counts(report).items():
                anomalies[k] = anomalies.get(k, 0) + v
            if not summary:
                summary = res.outputs.get("summary.md", b"").decode("utf-8", "replace")
        n = len(scores)
        return Outcome(workload.name, sum(scores) / n, {k: v / n for k, v in metrics_sum.items()}, summary, anomalies,
                       None, scores)

    def score(self, report: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        """The score of one blis run report and the headline metrics shown
        with it (module docstring)."""
        m = report["metrics"]
        req = m["requests"]
        arrived = float(req.get("arrived", 0))
        metrics: dict[str, float] = {"arrived": arrived, "completed": float(req.get("completed", 0)),
                                     "rejected": float(req.get("rejected", 0))}
        slo = m.get("slo")
        if slo:
            metrics["slo_met"] = float(slo.get("met", 0))
            metrics["slo_attainment"] = float(slo.get("attainment", 0))
            metrics["goodput_rps"] = float(slo.get("goodput_rps", 0))
        for cls in m.get("per_slo_class") or ():
            s = cls.get("slo") or {}
            if "attainment" in s:
                metrics[f"attainment_{cls.get('slo_class')}"] = float(s["attainment"])
        ttft = m.get("ttft_ms") or {}
        if "p99" in ttft:
            metrics["ttft_p99_ms"] = float(ttft["p99"])
        fleet = m.get("fleet") or {}
        if "cost" in fleet:
            metrics["cost"] = float(fleet["cost"])
        if self.objective == "fitness":
            score = float(report["fitness"]["score"])
        else:
            if not slo:
                raise ValueError('the workload has no SLO targets: use objective="fitness" with fitness_weights')
            score = float(slo.get("met", 0)) / arrived if arrived > 0 else 0.0
        score = min(1.0, max(0.0, score))
        metrics["score"] = score
        return score, metrics


def _report(res: JobResult, timeout_s: float | None) -> tuple[str | None, dict]:
    if res.timed_out:
        return f"timed out: blis run took longer than {timeout_s:g} s and was killed", {}
    if res.returncode != 0:
        msg = _clean_error(res.stderr) or f"blis run exited with status {res.returncode}"
        return msg, {}
    try:
        return None, json.loads(res.stdout)
    except ValueError as e:
        return f"blis run printed no JSON report ({clip(str(e), 200)})", {}


# A job's scratch directory in a message, up to its closing slash. It may
# start only where a whitespace-separated word starts, so the search is
# linear: an unanchored ``\S*`` before it re-scanned each long word from
# every position (100 KB of stderr took 10 s, 1 MB minutes).
_JOB_DIR = re.compile(r"(?<!\S)\S*?blis-job-[A-Za-z0-9_]+/")

# A line of a failed run's stderr is read up to this many characters at
# its head and at its tail (blis prints its error last, and a message that
# quotes a huge input is one long line); an error text fed to the LLM is
# at most ERROR_MAX_CHARS.
STDERR_LINE_CHARS = 64 << 10
ERROR_MAX_CHARS = 1200


def clip(text: str, limit: int = ERROR_MAX_CHARS) -> str:
    """``text`` of at most ``limit`` characters: its head and tail around a
    note of how much was left out (the way blis clips quoted input)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3:]
    return f"{head} ...[{len(text) - len(head) - len(tail)} characters clipped]... {tail}"


def _clean_error(stderr: str | bytes) -> str:
    """blis's error, without the job's scratch directory (so the same
    candidate gives the same message) and the generated file's line: its
    last lines, clipped to :data:`ERROR_MAX_CHARS`. Linear in its input."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    # The last 5 non-empty lines, each clipped to its head and tail, with the
    # scratch directory removed before the final clip (so the text is the
    # same for the same candidate); every step is linear.
    lines = [ln for ln in stderr.rstrip().rsplit("\n", 8)[-8:] if ln.strip()][-5:]
    out = []
    for ln in lines:
        if len(ln) > 2 * STDERR_LINE_CHARS:
            ln = clip(ln, 2 * STDERR_LINE_CHARS)
        ln = _JOB_DIR.sub("", ln)
        ln = re.sub(r"candidate\.yaml:\d+: ", "candidate: ", ln)
        out.append(clip(ln, ERROR_MAX_CHARS // 2))
    text = "\n".join(out)
    return clip(text)


_CONFLICT = re.compile(r"\b(workload\.(synthetic|spec_file|spec|scenario|replay)) cannot be combined with (--[a-z-]+)")


def _workload_conflict_fix(experiment: str | None, err: str, workload: Workload) -> str | None:
    """The fix for blis's "workload.synthetic cannot be combined with
    --scenario": the experiment file has a workload of its own (as ``blis run
    --print-config`` writes it) and the search's workload is another; an
    experiment has one. Names the lines to delete."""
    m = _CONFLICT.search(err)
    if not m or not experiment:
        return None
    key, sub, flag = m.group(1), m.group(2), m.group(3)
    where = ""
    lines = _key_lines(experiment, ("workload", sub))
    if lines:
        where = f" (lines {lines[0]}-{lines[1]})" if lines[1] > lines[0] else f" (line {lines[0]})"
    return (f"fix: {experiment} has a workload of its own, {key}{where}, as `blis run --print-config` writes it, "
            f"and workload {workload.name} ({flag}) is another; an experiment has one workload. Delete {key}{where} "
            f"from {experiment} to search on the workloads given, or give no workload to search on the "
            f"experiment's own.")


def _key_lines(path: str, keys: Sequence[str]) -> tuple[int, int] | None:
    """The first and last line (1-based) of ``keys``' entry in a YAML file,
    or None."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            node = yaml.compose(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    key_node = None
    for k in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        for kn, vn in node.value:
            if isinstance(kn, yaml.ScalarNode) and kn.value == k:
                key_node, node = kn, vn
                break
        else:
            return None
    end = node.end_mark
    last = end.line + 1 if end.column > 0 else end.line  # a block ends at the start of the next line
    return key_node.start_mark.line + 1, max(last, key_node.start_mark.line + 1)


def _anomaly_counts(report: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, v in sorted(((report.get("metrics") or {}).get("anomalies") or {}).items()):
        if isinstance(v, Mapping) and isinstance(v.get("count"), (int, float)):
            out[name] = int(v["count"])
    return out


def split_bundle(text: str) -> dict[str, str]:
    """A policy file's text as a candidate: each section present, as YAML
    text in flow style (``{type: weighted, params: {...}}``)."""
    import yaml

    data = yaml.safe_load(text) or {}
    if not isinstance(data, Mapping):
        raise CandidateError("a policy file is a mapping of sections")
    data = {str(k): v for k, v in data.items() if k != "version"}
    order = [k for k in SECTIONS if k in data] + sorted(set(data) - set(SECTIONS))
    return {k: yaml.safe_dump(data[k], default_flow_style=True, sort_keys=False, width=1 << 20).strip() for k in order}
