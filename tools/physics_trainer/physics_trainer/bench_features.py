"""Throughput of the vectorized beta features on a Parquet step table.

Training reads millions of engine steps, so beta_features_batch must stay a
few vector passes over the columns. This times it on a table read with
pyarrow, as the trainer reads its step tables:

    python -m physics_trainer.bench_features --rows 1000000 --table /tmp/steps.parquet --write

--write first generates a deterministic synthetic table (seeded RNG) of
consistent step compositions. The configuration uses Go's DefaultVLLMKnobs
(256 sequences, 8192-token budget, 16-token blocks, chunked prefill on, no
offload) with total_kv_blocks_gpu derived from device memory, as Go does
when it is 0.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from physics_trainer.compute_features import (
    BETA_FLOAT_INPUT_KEYS,
    BETA_INPUT_KEYS,
    VLLMKnobs,
    beta_features_batch,
    load_hardware,
    load_model,
    new_physics_config,
)

SEED = 3


def synthetic_steps(n: int, knobs: VLLMKnobs, seed: int = SEED) -> pa.Table:
    """n engine steps: decode-heavy batches, a prefill chunk in some, all within the token and sequence budgets."""
    rng = np.random.default_rng(seed)
    num_decode = rng.integers(0, knobs.max_num_seqs, n)
    num_prefill = np.where(rng.random(n) < 0.3, rng.integers(1, 5, n), 0)
    num_decode = np.minimum(num_decode, knobs.max_num_seqs - num_prefill)
    budget = knobs.max_batched_tokens - num_decode
    prefill = np.where(num_prefill > 0, np.minimum(rng.integers(1, 4096, n) * num_prefill, budget), 0)
    num_prefill = np.minimum(num_prefill, prefill)
    context = rng.integers(32, 8192, n)  # mean decode context of the step
    computed = rng.integers(0, 8192, n)  # tokens already computed before each prefill chunk
    chunk = prefill / np.maximum(num_prefill, 1)
    decode_context = num_decode * context
    cols = {
        "prefill_tokens": prefill,
        "decode_tokens": num_decode,
        "scheduled_tokens": prefill + num_decode,
        "num_prefill_reqs": num_prefill,
        "num_decode_reqs": num_decode,
        "running_depth": num_prefill + num_decode + rng.integers(0, 8, n),
        "sum_prefill_attn_work": (computed + chunk) * prefill,  # Σ (computed + chunk) × chunk, equal chunks
        "decode_context_tokens": decode_context,
        "sum_decode_kv_blocks": (decode_context + 15 * num_decode) // knobs.block_size_tokens,
        "preemption_ema": np.where(rng.random(n) < 0.05, rng.exponential(0.02, n), 0.0),
        "transfer_blocks": np.where(rng.random(n) < 0.1, rng.integers(1, 512, n), 0),
        "cpu_resident_read_blocks": np.where(rng.random(n) < 0.1, rng.integers(1, 512, n), 0),
    }
    return pa.table({k: np.asarray(cols[k], dtype=np.float64 if k in BETA_FLOAT_INPUT_KEYS else np.int64)
                     for k in BETA_INPUT_KEYS})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m physics_trainer.bench_features", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows to generate with --write")
    p.add_argument("--table", required=True, help="Parquet file of BETA_INPUT_KEYS columns")
    p.add_argument("--write", action="store_true", help="generate the table first")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--hardware", default="h100-sxm")
    p.add_argument("--tp", type=int, default=1)
    a = p.parse_args(argv)

    cfg = new_physics_config(load_model(a.model), load_hardware(a.hardware), a.tp, VLLMKnobs())
    if a.write:
        pq.write_table(synthetic_steps(a.rows, cfg.knobs), a.table)
    table = pq.read_table(a.table)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        beta_features_batch(cfg, table)
        best = min(best, time.perf_counter() - t0)
    print(f"config: {cfg.model.name} on {cfg.hardware.name} tp={cfg.tp}, "
          f"total_kv_blocks_gpu={cfg.knobs.total_kv_blocks_gpu} (derived)")
    print(f"rows: {table.num_rows}")
    print(f"seconds: {best:.4f} (best of 3)")
    print(f"rows/s: {table.num_rows / best:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
