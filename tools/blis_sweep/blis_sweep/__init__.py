"""blis-sweep: blis sweeps (and any blis command) on a local process pool or
on Ray, with tables equal byte for byte to a run of blis on one machine.

``backends`` has the one interface (``Job`` in, ``JobResult`` out) and its two
backends, ``LocalBackend`` and ``RayBackend``; ``sweep.run_sweep`` shards a
``blis sweep`` over a backend and merges the shards in index order. The Go
binary does every simulation; this package only places them. See
docs/sweeps.md. ``blis_sweep.search`` evaluates policy bundles for LLM-driven
policy search on the same backends: a GEPA adapter and an OpenEvolve
evaluator (docs/policy-search.md; requirements-search.lock).
"""

from .backends import Backend, Job, JobResult, LocalBackend, RayBackend, execute, find_blis
from .sweep import SweepError, SweepResult, check_outputs, merge, plan, prepare, run_sweep

__version__ = "0.1.0"

__all__ = ["Backend", "Job", "JobResult", "LocalBackend", "RayBackend", "SweepError", "SweepResult",
           "check_outputs", "execute", "find_blis", "merge", "plan", "prepare", "run_sweep"]
