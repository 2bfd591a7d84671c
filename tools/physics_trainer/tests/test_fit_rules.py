"""Sample rules, ridge and selection of fit_coefficients on small hand-built cases.

Every expected value is worked out from the rule as docs/fit.md states it
(and fit/*.go implements it), not taken from the code's output.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from physics_trainer import compute_features as cf
from physics_trainer import fit_coefficients as fc
from physics_trainer.extract_traces import Trace

MS = 1_000_000  # ns
LAST = fc.SKIP_LAST_STEP


def phys(**knobs):
    k = cf.VLLMKnobs(**{"total_kv_blocks_gpu": 1000, **knobs})
    return cf.new_physics_config(cf.load_model("llama-3.1-8b"), cf.load_hardware("h100-sxm"), 1, k)


STEP_DEFAULTS = dict(running=4, waiting=1, num_prefill=0, num_decode=4, scheduled=4, prefill_tok=0, decode_tok=4,
                     num_finished=0, num_preempted=0, kv_total=1000, kv_free=500, kv_usage=0.5, rich=False)


def trace(steps, snapshots=(), requests=(), scheduled=(), kv=()):
    """A Trace from lists of dicts; steps need id and ts (ns)."""
    st = {k: [] for k in ["id", "ts_start_ns", *STEP_DEFAULTS]}
    for s in steps:
        s = {**STEP_DEFAULTS, **s}
        st["id"].append(s["id"])
        st["ts_start_ns"].append(s["ts"])
        for k in STEP_DEFAULTS:
            st[k].append(s[k])
    steps_ = {k: np.asarray(v, dtype=np.float64 if k == "kv_usage" else bool if k == "rich" else np.int64)
              for k, v in st.items()}
    sn = {"step_id": [], "request": [], "prefill": [], "prompt": [], "computed": [], "scheduled": [],
          "blocks_allocated": [], "blocks_cached": []}
    for s in snapshots:
        for k in sn:
            sn[k].append(s.get(k, 0))
    snaps = {k: np.asarray(v, dtype=object if k == "request" else bool if k == "prefill" else np.int64)
             for k, v in sn.items()}
    rq = {"engine_id": [], "prompt": [], "output": [], "queued_ns": [], "first_scheduled_ns": [], "arrived_s": [],
          "queued_s": [], "finished_s": [], "departed_s": [], "first_scheduled_s": []}
    for r in requests:
        r = {"engine_id": "", "prompt": 100, "output": 10, "queued_ns": -1, "first_scheduled_ns": -1,
             "arrived_s": math.nan, "queued_s": math.nan, "finished_s": math.nan, "departed_s": math.nan,
             "first_scheduled_s": math.nan, **r}
        for k in rq:
            rq[k].append(r[k])
    reqs = {k: np.asarray(v, dtype=object if k == "engine_id" else np.float64 if k.endswith("_s") else np.int64)
            for k, v in rq.items()}
    sched = {"step": np.asarray([s for s, _ in scheduled], dtype=np.int64),
             "ts_ns": np.asarray([t for _, t in scheduled], dtype=np.int64)}
    kvd = {"type": np.asarray([e[0] for e in kv], dtype=object),
           "medium": np.asarray([e[1] for e in kv], dtype=object),
           "blocks": np.asarray([e[2] for e in kv], dtype=np.int64),
           "step": np.asarray([e[3] for e in kv], dtype=np.int64),
           "success": np.asarray([e[4] for e in kv], dtype=bool)}
    return Trace(dir="t", steps=steps_, snapshots=snaps, requests=reqs, scheduled=sched, kv=kvd, has_kv=bool(kv))


def beta(tr, opt=None, cfg=None):
    # min_pairs=0: these tiny traces have fewer than the default 1000 adjacent
    # pairs, which would switch --beta-target auto to journey targets.
    opt = opt or fc.Options(min_pairs=0)
    cfg = cfg or phys()
    bb = fc.BetaBuilder(cfg, opt)
    bb.add(0, tr, fc.step_index(tr, opt.gammas, []))
    return bb


def skipped(b):
    return dict(map(tuple, b.skipped))


# ---------------------------------------------------------------------------
# beta targets and exclusions


def test_warmup_and_pairs():
    # ids 9..13, every step sampled; ts in ms with growing gaps
    tr = trace([{"id": i, "ts": t * MS} for i, t in [(9, 0), (10, 5), (11, 11), (12, 18), (13, 26)]])
    b = beta(tr)
    # 9 and 10 are the warm-up (id <= 10); 13, the last, has nothing after it to end it.
    assert b.out.extra["step_id"].tolist() == [11, 12]
    assert b.out.y.tolist() == [0.007, 0.008]  # (18 - 11) ms, (26 - 18) ms
    assert skipped(b) == {"warm-up step": 2, LAST: 1}
    assert b.out.source.tolist() == [0, 0]


def test_join_off_by_one_needs_the_next_id():
    # 12 -> 14 is not a pair (13 not sampled): 12 is skipped, not paired with 14.
    tr = trace([{"id": 11, "ts": 0}, {"id": 12, "ts": 3 * MS}, {"id": 14, "ts": 9 * MS}, {"id": 15, "ts": 10 * MS}])
    b = beta(tr)
    assert b.out.extra["step_id"].tolist() == [11, 14]
    assert b.out.y.tolist() == [0.003, 0.001]
    assert skipped(b) == {"next step not sampled": 1, LAST: 1}  # 12; 15, the last


def test_idle_exclusion():
    steps = [
        {"id": 11, "ts": 0, "waiting": 0, "num_finished": 2, "running": 2},  # idle: skipped
        {"id": 12, "ts": 1 * MS, "waiting": 0, "num_finished": 1, "running": 2},  # one still running: kept
        {"id": 13, "ts": 2 * MS, "waiting": 1, "num_finished": 2, "running": 2},  # a waiting request: kept
        {"id": 14, "ts": 3 * MS, "waiting": 0, "num_finished": 3, "running": 2},  # more finished than running: idle
        {"id": 15, "ts": 3 * MS},  # 14 -> 15 would be 0 anyway
        {"id": 16, "ts": 3 * MS},  # 15 -> 16: non-positive cycle time
        {"id": 17, "ts": 5 * MS},
    ]
    b = beta(trace(steps))
    assert b.out.extra["step_id"].tolist() == [12, 13, 16]
    assert skipped(b) == {"engine idle after the step": 2, "non-positive cycle time": 1, LAST: 1}


def test_journey_target_takes_the_first_scheduled_of_the_next_step():
    steps = [{"id": 11, "ts": 0}, {"id": 12, "ts": 2 * MS}, {"id": 14, "ts": 7 * MS}]
    sched = [(12, 2 * MS + 900), (12, 2 * MS + 100), (15, 9 * MS)]  # two for step 12: the earlier counts
    tr = trace(steps, scheduled=sorted(sched))
    b = beta(tr, fc.Options(beta_target="journey"))
    # 11 -> first SCHEDULED of 12; 12 -> none of 13; 14 -> first SCHEDULED of 15.
    assert b.out.extra["step_id"].tolist() == [11, 14]
    assert b.out.y.tolist() == [(2 * MS + 100) / 1e9, 2 * MS / 1e9]
    assert b.out.source.tolist() == [1, 1]
    assert skipped(b) == {"no timestamp of the next step": 1}
    # auto with fewer adjacent pairs (1) than min_pairs: pairs first, journey for the rest.
    b = beta(tr, fc.Options(beta_target="auto", min_pairs=2))
    assert b.out.extra["step_id"].tolist() == [11, 14]
    assert b.out.y.tolist() == [0.002, 0.002]
    assert b.out.source.tolist() == [0, 1]
    # step_pairs: never journey; 14, the last, is named as such
    b = beta(tr, fc.Options(beta_target="step_pairs"))
    assert b.out.extra["step_id"].tolist() == [11]
    assert skipped(b) == {"next step not sampled": 1, LAST: 1}


def test_rich_sums_and_chunked_prefill():
    # step 11: one prefill chunk (50 tokens on 100 computed) and one decode (300 computed, 1 token)
    s11 = {"id": 11, "ts": 0, "running": 2, "num_prefill": 1, "num_decode": 1, "scheduled": 51, "prefill_tok": 50,
           "decode_tok": 1, "rich": True}
    snaps = [
        {"step_id": 11, "request": "p", "prefill": True, "prompt": 400, "computed": 100, "scheduled": 50,
         "blocks_allocated": 7, "blocks_cached": 3},
        {"step_id": 11, "request": "d", "prefill": False, "prompt": 200, "computed": 300, "scheduled": 1,
         "blocks_allocated": 20, "blocks_cached": 5},
    ]
    # step 12: a prefill step marked rich whose snapshots were partly lost (1 of 2)
    s12 = {**s11, "id": 12, "ts": 4 * MS}
    snaps.append({**snaps[0], "step_id": 12})
    # step 13: decode only, not rich: exact without snapshots
    s13 = {"id": 13, "ts": 6 * MS, "running": 2, "num_decode": 2, "scheduled": 2, "decode_tok": 2, "kv_free": 900,
           "kv_usage": 0.1}
    b = beta(trace([s11, s12, s13, {"id": 14, "ts": 8 * MS}], snapshots=snaps))
    assert b.out.extra["step_id"].tolist() == [11, 13]
    assert b.rich == 1 and b.chunked_prefill_steps == 2 and b.chunked_rich == 1
    assert skipped(b) == {"prefill step without complete snapshots (chunked prefill on)": 1, LAST: 1}
    inp = b.out.inputs
    assert inp["sum_prefill_attn_work"][0] == (100 + 50) * 50
    assert inp["decode_context_tokens"][0] == 301
    assert inp["sum_decode_kv_blocks"][0] == 25  # allocated + cached of the decode (E28)
    # step 13 fallback: context = usage × total × block × decode share; blocks = used × share
    assert inp["decode_context_tokens"][1] == round(0.1 * 1000 * 16 * 1.0)
    assert inp["sum_decode_kv_blocks"][1] == 100
    assert inp["sum_prefill_attn_work"][1] == 0
    assert b.out.regime.tolist() == [0, 1]  # 50 prefill >= 1 decode; decode only


def test_non_rich_prefill_without_chunked_prefill_uses_the_prompt_cv2():
    s = {"id": 11, "ts": 0, "running": 3, "num_prefill": 2, "num_decode": 1, "scheduled": 601, "prefill_tok": 600,
         "decode_tok": 1, "kv_usage": 0.25, "kv_free": 700}
    reqs = [{"prompt": 100}, {"prompt": 300}, {"prompt": 0}]  # prompt 0 is not a length
    b = beta(trace([s, {"id": 12, "ts": MS}], requests=reqs), cfg=phys(chunked_prefill_enabled=False))
    # lengths 100, 300: mean 200, variance 10000, cv² = 0.25; Σp² ≈ 600² / 2 × 1.25
    assert b.out.inputs["sum_prefill_attn_work"][0] == 600 * 600 / 2 * 1.25
    # decode share 1/3: context round(0.25 × 1000 × 16 / 3) = round(1333.33) = 1333; blocks round(300 / 3) = 100
    assert b.out.inputs["decode_context_tokens"][0] == 1333
    assert b.out.inputs["sum_decode_kv_blocks"][0] == 100


def test_transfer_blocks_per_step():
    steps = [{"id": 11, "ts": 0}, {"id": 12, "ts": MS}]
    kv = [("TransferCompleted", "", 4, 11, True), ("TransferCompleted", "", 8, 11, False),
          ("TransferCompleted", "", 2, 11, True), ("CacheLoadCommitted", "CPU", 5, 11, False),
          ("CacheLoadCommitted", "GPU", 9, 11, False), ("TransferCompleted", "", 1, 12, True)]
    b = beta(trace(steps, kv=kv))
    assert b.out.inputs["transfer_blocks"].tolist() == [6]  # successful transfers at step 11 only
    assert b.out.inputs["cpu_resident_read_blocks"].tolist() == [5]


def test_preemption_weight_and_ema():
    pre = [0, 2, 0, 0, 1]
    steps = [{"id": 11 + i, "ts": i * MS, "running": 2, "num_preempted": p} for i, p in enumerate(pre)]
    steps.append({"id": 16, "ts": 5 * MS})
    opt = fc.Options(gammas=[0.5, 1.0], min_pairs=0)
    b = beta(trace(steps), opt)
    # shares 0, 1, 0, 0, 0.5: γ=0.5 EMA 0, 0.5, 0.25, 0.125, 0.3125; γ=1 the share itself
    assert b.out.ema[:, 0].tolist() == [0, 0.5, 0.25, 0.125, 0.3125]
    assert b.out.ema[:, 1].tolist() == [0, 1, 0, 0, 0.5]
    # more than half preempted (2 of 2) -> weight 0.5; exactly half (1 of 2) is not more
    assert b.out.w.tolist() == [1, 0.5, 1, 1, 1]


def test_the_last_step_is_named_when_nothing_ends_it():
    """Go's TestLastStepSkipReason: a trace records no step end, so its last step is a sample only when a journey
    SCHEDULED of the next step id ends it; otherwise it is counted under its own reason."""
    steps = [{"id": 11, "ts": 0}, {"id": 12, "ts": 3 * MS}, {"id": 14, "ts": 9 * MS}, {"id": 15, "ts": 10 * MS}]
    for target, sched, kept, want in [
        ("step_pairs", [], [11, 14], {"next step not sampled": 1, LAST: 1}),
        ("journey", [(12, 3 * MS), (15, 10 * MS)], [11, 14], {"no timestamp of the next step": 1, LAST: 1}),
        ("journey", [(12, 3 * MS), (15, 10 * MS), (16, 12 * MS)], [11, 14, 15], {"no timestamp of the next step": 1}),
    ]:
        b = beta(trace(steps, scheduled=sched), fc.Options(beta_target=target))
        assert b.out.extra["step_id"].tolist() == kept, target
        assert skipped(b) == want, target


def test_duplicate_and_invalid_steps_are_left_out_before_the_ema():
    steps = [{"id": 11, "ts": 0}, {"id": 12, "ts": MS, "num_preempted": 4, "running": 4},
             {"id": 12, "ts": 2 * MS}, {"id": 13, "ts": 3 * MS, "kv_usage": 1.5}, {"id": 14, "ts": 4 * MS}]
    dropped = []
    x = fc.step_index(trace(steps), [0.5], dropped)
    assert x.steps["id"].tolist() == [11, 12, 14]
    assert x.steps["ts_start_ns"].tolist() == [0, MS, 4 * MS]  # the first of the duplicates
    assert dict(map(tuple, dropped)) == {"duplicate step id (first kept)": 1,
                                         "step with a negative count or a KV usage outside [0,1]": 1}
    assert x.ema[:, 0].tolist() == [0, 0.5, 0.25]


def _outlier_trace(tokens, ms):
    """Go's outlierTrace: steps of the given scheduled tokens (a prefill when >= 1000) and cycle times (ms)."""
    steps, t = [], 0
    for i, (n, y) in enumerate(zip(tokens, ms)):
        if n >= 1000:
            steps.append({"id": 11 + i, "ts": t, "num_decode": 0, "decode_tok": 0, "num_prefill": 1, "prefill_tok": n,
                          "scheduled": n, "running": 1})
        else:
            steps.append({"id": 11 + i, "ts": t, "num_decode": n, "decode_tok": n, "scheduled": n, "running": n})
        t += int(y * MS)
    steps.append({"id": 11 + len(tokens), "ts": t})
    return beta(trace(steps), cfg=phys(chunked_prefill_enabled=False))


def test_outlier_rule_keeps_every_regime():
    # Go's TestOutlierRuleKeepsEveryRegime (docs/fit.md, cleaning: outliers): 40 decode steps of 4 tokens at 10 ms; one at 60 ms
    # (> 5 x 10: out), one at 45 ms (kept); three large prefills (buckets of fewer than 20 steps: not judged, kept
    # however much slower than the decode steps); 8000 tokens of an 8B model in 1 ms (below the lower bound: out).
    tokens = [4] * 40 + [4, 4, 4000, 4000, 6000, 8000]
    ms = [10] * 40 + [60, 45, 300, 310, 450, 1]
    b = _outlier_trace(tokens, ms)
    median, summary = b.drop_outliers(5.0)
    assert median == 0.010
    assert np.allclose(b.out.y * 1e3, [10] * 40 + [45, 300, 310, 450])
    assert summary["steps_in_small_buckets_not_judged"] == 4
    slow, fast = summary["removed"]
    assert (slow["reason"], slow["step_id"], slow["trace"]) == (fc.OUTLIER_TOO_SLOW, 51, "t")
    assert slow["cycle_ms"] == pytest.approx(60) and slow["limit_ms"] == pytest.approx(50)
    assert (fast["reason"], fast["scheduled_tokens"]) == (fc.OUTLIER_TOO_FAST, 8000)
    assert fast["limit_ms"] > 100
    assert skipped(b) == {fc.OUTLIER_TOO_SLOW: 1, fc.OUTLIER_TOO_FAST: 1, LAST: 1}
    b = _outlier_trace(tokens, ms)
    _, summary = b.drop_outliers(0.0)
    assert len(b.out) == len(tokens) and summary["removed"] == []


def test_lower_bound_matches_go_formula():
    # features.LowerBoundSeconds: max(FLOPs / peak FLOP/s, bytes / peak bandwidth), 0 without scheduled tokens.
    c = phys()
    cols = {k: np.zeros(3) for k in cf.BETA_INPUT_KEYS}
    cols["scheduled_tokens"][:] = [0, 4, 8000]
    cols["prefill_tokens"][2], cols["num_prefill_reqs"][2], cols["sum_prefill_attn_work"][2] = 8000, 1, 8000 * 8000
    cols["decode_context_tokens"][1] = 2000
    lb = cf.lower_bound_seconds_batch(c, cols)
    assert lb[0] == 0
    assert lb[1] == max((4 * c.flops_linear_per_token + 4000 * c.attn_flops_per_work_unit) / c.hw_peak_flops,
                        (c.weight_bytes_total + 2000 * c.kv_bytes_per_token) / c.hw_peak_bandwidth)
    assert lb[2] == (8000 * c.flops_linear_per_token + 64e6 * c.attn_flops_per_work_unit) / c.hw_peak_flops


# ---------------------------------------------------------------------------
# alpha


def alpha(tr, opt=None, cfg=None):
    opt = opt or fc.Options()
    ab = fc.AlphaBuilder(cfg or phys(), opt)
    ab.add(0, tr, fc.step_index(tr, opt.gammas, []))
    return ab


def test_reference_step_join_boundaries():
    steps = [{"id": 10, "ts": 50}, {"id": 11, "ts": 100, "waiting": 5}, {"id": 12, "ts": 200, "waiting": 7},
             {"id": 13, "ts": 300, "waiting": 9}]
    reqs = [
        {"engine_id": "eq", "queued_ns": 200, "first_scheduled_ns": 1200},  # same ns as step 12: step 12
        {"engine_id": "before", "queued_ns": 199, "first_scheduled_ns": 1199},  # one ns before: step 11
        {"engine_id": "after", "queued_ns": 201, "first_scheduled_ns": 1201},  # one ns after: step 12
        {"engine_id": "first", "queued_ns": 49, "first_scheduled_ns": 60},  # before every step
        {"engine_id": "warm", "queued_ns": 60, "first_scheduled_ns": 70},  # step 10 is warm-up
        {"engine_id": "late", "queued_ns": 5000, "first_scheduled_ns": 4000},  # scheduled before queued
    ]
    a = alpha(trace(steps, requests=reqs))
    # sorted by QUEUED time: before (199), eq (200), after (201)
    assert a.out.inputs["waiting_depth"].tolist() == [5, 7, 7]
    assert a.out.extra["ref_step_id"].tolist() == [11, 12, 12]
    assert a.out.y.tolist() == [1e-6, 1e-6, 1e-6]
    assert a.lag.tolist() == [99e-9, 0.0, 1e-9]
    assert dict(map(tuple, a.skipped)) == {"QUEUED before the first sampled step": 1,
                                           "reference step in the warm-up": 1, "SCHEDULED before QUEUED": 1}


def test_alpha_targets_fallbacks_and_inputs():
    steps = [{"id": 11, "ts": 0, "waiting": 0, "running": 3, "kv_free": 10, "kv_usage": 0.99},
             {"id": 12, "ts": 2_000_000_000, "waiting": 0, "running": 256, "num_preempted": 200}]
    snaps = [  # first snapshot of "a" is at step 4 (cached 3 of 4 blocks), not the later one
        {"step_id": 9, "request": "a", "blocks_allocated": 1, "blocks_cached": 1},
        {"step_id": 4, "request": "a", "blocks_allocated": 1, "blocks_cached": 3},
    ]
    reqs = [
        # ns columns null: the seconds columns, in ns
        {"engine_id": "a", "prompt": 64, "queued_s": 1.25, "first_scheduled_s": 1.5},
        {"engine_id": "b", "prompt": 0, "queued_ns": 10, "first_scheduled_ns": 20},  # no prompt
        {"engine_id": "c", "prompt": 8, "queued_ns": 2_000_000_000, "first_scheduled_ns": 2_000_000_000},
        {"engine_id": "d", "prompt": 8},  # no QUEUED / SCHEDULED
    ]
    cfg = phys()
    a = alpha(trace(steps, snapshots=snaps, requests=reqs), cfg=cfg)
    assert a.out.y.tolist() == [0.25, 0.0]
    assert a.out.inputs["prefix_hit_ratio"].tolist() == [0.75, 0.0]
    assert a.out.inputs["kv_free_bytes"][0] == 10 * cfg.block_size_bytes
    # step 11: no waiting request and a free slot -> unqueued; step 12: full (256 = max_num_seqs) -> queued
    assert a.out.regime.tolist() == [1, 0]
    assert a.out.w.tolist() == [1.0, 0.5]  # 200 of 256 preempted
    assert dict(map(tuple, a.skipped)) == {"request without prompt tokens": 1,
                                           "request without journey.QUEUED or journey.SCHEDULED": 1}
    # prefix caching off: no hit ratio
    a = alpha(trace(steps, snapshots=snaps, requests=reqs), cfg=phys(prefix_caching_enabled=False))
    assert a.out.inputs["prefix_hit_ratio"].tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------
# parts, overhead lines, numeric helpers


def test_assign_parts_is_temporal_per_trace():
    trace_ids = np.array([0] * 10 + [1] * 3)
    # trace 0: ceil(0.2 × 10) = 2 held out, 8 in 2 folds of 4; trace 1: ceil(0.6) = 1 held out, 2 in folds 0, 1
    assert fc.assign_parts(trace_ids, 2, 0.2).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2] + [0, 1, 2]
    # a hold-out share that would take everything leaves one training sample
    assert fc.assign_parts(np.zeros(2, dtype=int), 5, 0.9).tolist() == [0, 5]
    assert fc.assign_parts(np.zeros(5, dtype=int), 5, 0.0).tolist() == [0, 1, 2, 3, 4]


def test_fit_line_keeps_coefficients_non_negative():
    f = fc.fit_line([1, 2, 3], [5, 7, 9])
    assert (f["base_us"], f["per_token_us"], f["method"]) == (3.0, 2.0, "ols")
    f = fc.fit_line([1, 2, 3], [9, 7, 5])  # falling: slope clamped, base = mean
    assert (f["base_us"], f["per_token_us"], f["method"]) == (7.0, 0.0, "ols, slope clamped to 0")
    f = fc.fit_line([1, 2, 3], [0, 2, 10])  # OLS base < 0: line through the origin, slope Σxy/Σx²
    assert f["method"] == "ols, base clamped to 0" and f["base_us"] == 0 and f["per_token_us"] == 34 / 14
    assert fc.fit_line([], [])["method"] == "none"


def test_go_round_and_median():
    assert fc.go_round([0.5, 1.5, 2.5, -0.5, 0.49999999999999994, 2.4999999]).tolist() == [1, 2, 3, -1, 0, 2]
    assert fc.median_of([3, 1, 2]) == 2 and fc.median_of([4, 1, 3, 2]) == 2.5 and math.isnan(fc.median_of([]))
    assert fc.bit_len(np.array([0, 1, 2, 3, 4, 8191, 8192])).tolist() == [0, 1, 2, 2, 3, 13, 14]


def test_empty_scores_are_none_never_zero():
    """Go's scorer.result and Errors' JSON (fit/errors_test.go): a score over no
    sample is None (JSON null) with a note, never 0, a perfect score; the checks
    on it fail and calibrate fit's summary says so."""
    from physics_trainer import validate as vd

    go_empty = json.loads('{"samples":0,"mape":null,"median_ape":null,"rmse_ms":null,"mae_ms":null,'
                          '"median_abs_error_ms":null,"max_abs_error_ms":null,"max_over_median_abs_error":null,'
                          '"note":"no samples: every score is null"}')
    cases = [
        ("no samples", [], [], {**go_empty, "targets_not_positive": 0}),
        ("no positive target", [0.001, 0.002], [0.0, 0.0],
         {"samples": 2, "mape": None, "median_ape": None, "rmse_ms": math.sqrt((1e-6 + 4e-6) / 2) * 1e3,
          "mae_ms": 1.5, "median_abs_error_ms": 1.5, "max_abs_error_ms": 2.0,
          "max_over_median_abs_error": 2.0 / 1.5, "targets_not_positive": 2,
          "note": "no positive target: mape and median_ape are null"}),
    ]
    for name, pred, y, want in cases:
        got = vd.Scorer.of(np.asarray(pred), np.asarray(y)).result()
        assert got.keys() == want.keys(), name
        for k, v in want.items():
            if isinstance(v, float):
                assert math.isclose(got[k], v, rel_tol=1e-12), (name, k, got[k], v)
            else:
                assert got[k] == v, (name, k, got[k], v)
        assert json.loads(json.dumps(got)) == got, "None is JSON null"
    assert vd.Scorer().result()["mape"] is None
    ok = vd.errors_dict([0.011, 0.018], [0.01, 0.02])
    assert "note" not in ok and math.isclose(ok["mape"], 0.1)

    empty = {"config": "a", **vd.Scorer().result()}
    v = {"holdout": [empty], "leave_one_config_out": [empty]}
    fc._checks(v, True, np.zeros(cf.NUM_BETA))
    mape, ratio, loco = v["checks"][:3]
    assert (mape["value"], mape["pass"], mape["note"]) == (None, False, vd.NOTE_NO_SAMPLES)
    assert (ratio["value"], ratio["pass"], ratio["note"]) == (None, False, vd.NOTE_NO_SAMPLES)
    assert (loco["value"], loco["pass"]) == (None, False)
    assert fc._cv_mape({"mape": None}) == 0.0
    report = {"beta": {"holdout": [empty]}, "alpha": {"holdout": [empty]}, "acceptance_pass": False}
    assert vd.summary(report).splitlines()[:2] == [
        "beta  a: hold-out MAPE none (no samples) over 0 steps",
        "alpha a: hold-out MAPE none (no samples) over 0 requests"]


# ---------------------------------------------------------------------------
# ridge and the CV choice


def test_ridge_recovers_exact_data_and_drops_zero_columns():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(0, 1e-3, 200), rng.uniform(0, 50, 200), np.zeros(200), np.ones(200)])
    beta = np.array([3.0, 0.02, 0.0, 0.005])
    s = fc.Stats.from_rows(X, X @ beta, np.ones(200))
    f = fc.solve(s, 1e-9, [False, False, False, True])
    assert f.method == "cholesky" and f.rank == 3 and f.dropped.tolist() == [False, False, True, False]
    assert np.allclose(f.coef, beta, rtol=1e-6, atol=0)


def test_ridge_penalty_is_scaled_and_spares_the_bias():
    rng = np.random.default_rng(2)
    x = rng.uniform(1, 2, 100)
    X = np.column_stack([x, np.ones(100)])
    y = 2 * x + 1
    s = fc.Stats.from_rows(X, y, np.ones(100))
    # an enormous λ shrinks the penalized slope to ~0; the unpenalized bias becomes the mean of y
    f = fc.solve(s, 1e12, [False, True])
    assert abs(f.coef[0]) < 1e-6 and math.isclose(f.coef[1], y.mean(), rel_tol=1e-6)
    # scaling: multiplying the feature by 1e6 divides its coefficient by 1e6 at any λ
    g1 = fc.solve(s, 10.0, [False, True])
    s2 = fc.Stats.from_rows(X * np.array([1e6, 1]), y, np.ones(100))
    g2 = fc.solve(s2, 10.0, [False, True])
    assert math.isclose(g2.coef[0] * 1e6, g1.coef[0], rel_tol=1e-9)
    assert math.isclose(g2.coef[1], g1.coef[1], rel_tol=1e-9)


def test_ridge_svd_fallback_splits_identical_columns():
    x = np.linspace(1, 2, 50)
    X = np.column_stack([x, x])
    s = fc.Stats.from_rows(X, 4 * x, np.ones(50))
    f = fc.solve(s, 0.0)
    # λ = 0 with two identical columns: not positive definite; the minimum-norm
    # solution shares the effect equally
    assert f.method == "svd" and f.rank == 1
    assert np.allclose(f.coef, [2.0, 2.0], rtol=1e-12)


def test_select_point_tie_rules():
    lambdas = [0.1, 1.0, 10.0]
    # a lower score wins
    assert fc.select_point([[3.0, 2.0, 2.5]], lambdas) == (0, 1)
    # a tie within 1e-12 relative goes to the larger λ of the same γ
    assert fc.select_point([[2.0, 2.0 * (1 + 1e-13), 3.0]], lambdas) == (0, 1)
    # 1e-11 worse is not a tie
    assert fc.select_point([[2.0, 2.0 * (1 + 1e-11), 3.0]], lambdas) == (0, 0)
    # an equal score at a later γ keeps the earlier γ, even with a larger λ
    assert fc.select_point([[2.0, 5.0, 5.0], [5.0, 5.0, 2.0]], lambdas) == (0, 0)
    # a strictly better later γ wins
    assert fc.select_point([[2.0, 5.0, 5.0], [5.0, 1.9, 5.0]], lambdas) == (1, 1)


def test_cross_validate_matches_direct_computation():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=60), np.ones(60)])
    y = X @ [1.5, 0.3] + rng.normal(scale=0.1, size=60)
    parts = np.arange(60) * 3 // 60
    folds = [fc.Stats.from_rows(X[parts == k], y[parts == k], np.ones(20)) for k in range(3)]
    mse = fc.cross_validate(folds, [0.0], [False, True])[0]
    sse = 0.0
    for k in range(3):
        tr = parts != k
        b = np.linalg.lstsq(X[tr], y[tr], rcond=None)[0]
        sse += np.sum((y[~tr] - X[~tr] @ b) ** 2)
    assert math.isclose(mse, sse / 60, rel_tol=1e-9)


def test_run_errors_on_too_few_samples():
    tr = trace([{"id": 11 + i, "ts": i * 10 * MS} for i in range(6)])  # 10 ms: above the 4-token step's lower bound
    with pytest.raises(fc.FitError, match=r"configuration c: 5 usable beta samples .* needs at least 10"):
        fc.run([fc.Config("c", phys(), [tr])])


def with_instances(tr, names, **inst):
    """tr with instance ids: names, and per table ("steps", ...) each row's index."""
    tr.instances = list(names)
    lengths = {"steps": len(tr.steps["id"]), "snapshots": len(tr.snapshots["step_id"]),
               "requests": len(tr.requests["prompt"]), "scheduled": len(tr.scheduled["step"])}
    tr.inst = {k: np.asarray(inst.get(k, [0] * n), dtype=np.int64) for k, n in lengths.items()}
    return tr


def test_trace_engines_split_by_instance_in_table_order():
    # Go's TestEngines: each engine's rows in table order; one instance: the trace itself.
    tr = with_instances(trace([{"id": 1, "ts": 10}, {"id": 1, "ts": 11}, {"id": 2, "ts": 20}, {"id": 2, "ts": 21}],
                              snapshots=[{"step_id": 2, "request": "r1"}],
                              requests=[{"engine_id": "r0"}, {"engine_id": "r1"}],
                              scheduled=[(1, 5), (1, 7)]),
                        ["a", "b"], steps=[1, 0, 1, 0], snapshots=[1], requests=[0, 1], scheduled=[0, 1])
    a, b = fc.trace_engines(tr)
    assert (a.instances, b.instances) == (["a"], ["b"])
    assert a.steps["ts_start_ns"].tolist() == [11, 21] and b.steps["ts_start_ns"].tolist() == [10, 20]
    assert len(a.snapshots["step_id"]) == 0 and b.snapshots["request"].tolist() == ["r1"]
    assert a.requests["engine_id"].tolist() == ["r0"] and b.requests["engine_id"].tolist() == ["r1"]
    assert a.scheduled["ts_ns"].tolist() == [5] and b.scheduled["ts_ns"].tolist() == [7]
    assert all(len(v) == 0 or not v.any() for v in b.inst.values())
    assert fc.engine_name(b) == 't (instance "b")'
    one = trace([{"id": 1, "ts": 1}])
    assert fc.trace_engines(one) == [one] and fc.engine_name(one) == "t"


def test_trace_engines_kv_events_name_no_engine():
    kv = [("TransferCompleted", "", 3, 2, True)]
    tr = with_instances(trace([{"id": 1, "ts": 1}, {"id": 1, "ts": 2}], kv=kv), ["a", "b"], steps=[0, 1])
    with pytest.raises(fc.FitError) as e:
        fc.trace_engines(tr)
    for s in ["t:", "2 engines", '"a", "b"', "KV events lines name no engine", "without its KV events"]:
        assert s in str(e.value)
    # One engine with steps; requests without an instance: the KV events are that engine's.
    tr = with_instances(trace([{"id": 1, "ts": 1}], requests=[{"engine_id": ""}, {"engine_id": "r0"}], kv=kv),
                        ["", "a"], steps=[1], requests=[0, 1])
    api_only, a = fc.trace_engines(tr)
    assert len(api_only.kv["type"]) == 0 and len(api_only.steps["id"]) == 0
    assert a.kv["blocks"].tolist() == [3] and a.requests["engine_id"].tolist() == ["r0"]


def test_engines_of_a_trace_fit_as_traces_of_their_own():
    # Two engines counting steps from 1 in one trace: the same samples as two traces.
    def engine(t0):
        return [{"id": i, "ts": t0 + i * 10 * MS, "running": 4 + i % 3, "decode_tok": 4 + i % 3,
                 "scheduled": 4 + i % 3, "num_decode": 4 + i % 3} for i in range(1, 80)]
    e0, e1 = engine(0), engine(5 * MS)
    merged = with_instances(trace(e0 + e1), ["x", "y"], steps=[0] * len(e0) + [1] * len(e1))
    opt = fc.Options(min_pairs=0)
    got = fc.BetaBuilder(phys(), opt)
    for t, eng in enumerate(fc.trace_engines(merged)):
        got.add(t, eng, fc.step_index(eng, opt.gammas, []))
    want = fc.BetaBuilder(phys(), opt)
    for t, tr in enumerate([trace(e0), trace(e1)]):
        want.add(t, tr, fc.step_index(tr, opt.gammas, []))
    assert got.out.y.tolist() == want.out.y.tolist() and got.out.trace.tolist() == want.out.trace.tolist()
    assert len(got.out) == 2 * (79 - 1 - 10)  # pairs within each engine, after the warm-up


def test_cross_check_and_duplicates():
    # Go's TestCrossCheckRefusesWhatTheTraceContradicts (docs/fit.md, cross-checks).
    from physics_trainer.extract_traces import InputFile
    steps = [{"id": 11 + i, "ts": i * 10 * MS, "running": 6, "scheduled": 6, "num_decode": 6, "decode_tok": 6}
             for i in range(80)]
    tr = trace(steps)
    tr.inputs = [InputFile(path="t/steps.parquet", sha256="ab" * 32, rows=80)]
    with pytest.raises(fc.FitError, match="configuration b, trace t has the same steps table as configuration a, trace t"):
        fc.run([fc.Config("a", phys(), [tr]), fc.Config("b", phys(), [tr])])
    with pytest.raises(fc.FitError, match="step 11 runs 6 requests at once, more than the configuration's max_num_seqs 5"):
        fc.run([fc.Config("a", phys(max_num_seqs=5), [tr])])
    with pytest.raises(fc.FitError, match="schedules 6 tokens, more than the configuration's max_batched_tokens 4"):
        fc.run([fc.Config("a", phys(max_batched_tokens=4), [tr])])
    chunked = trace(steps, snapshots=[{"step_id": 12, "request": "r", "prefill": True, "prompt": 100, "computed": 0,
                                       "scheduled": 40}])
    with pytest.raises(fc.FitError, match='step 12 schedules 40 of request "r"\'s 100 prompt tokens'):
        fc.run([fc.Config("a", phys(chunked_prefill_enabled=False), [chunked])])
