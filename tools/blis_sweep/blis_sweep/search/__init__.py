"""Policy search over blis: a GEPA adapter and an OpenEvolve evaluator
(docs/policy-search.md), evaluating candidates' policy bundles with blis run
on the same backends as sweeps (a local process pool or Ray).

``core`` needs only PyYAML; ``gepa_adapter`` imports gepa and is loaded on
first use of :class:`BlisGEPAAdapter`, so the evaluator and the OpenEvolve
cascade work without it.
"""

from .core import SECTIONS, CandidateError, Outcome, PolicyEvaluator, Workload, assemble_bundle, split_bundle
from .openevolve_eval import OpenEvolveEvaluator, load_program

__all__ = ["SECTIONS", "BlisGEPAAdapter", "CandidateError", "OpenEvolveEvaluator", "Outcome", "PolicyEvaluator",
           "Workload", "assemble_bundle", "load_program", "split_bundle"]


def __getattr__(name):
    if name == "BlisGEPAAdapter":
        from .gepa_adapter import BlisGEPAAdapter

        return BlisGEPAAdapter
    raise AttributeError(name)
