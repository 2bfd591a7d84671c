"""physics-trainer: the Python side of blis's physics-normalized latency model.

It computes the same alpha and beta features as the Go code (features/,
physics/) from vLLM traces, so that their coefficients can be fitted in
Python and exported for the simulator. compute_features is the twin of the
Go formulas; testdata/physics_features_golden.json holds the two to 1e-10.
"""

__version__ = "0.1.0"
