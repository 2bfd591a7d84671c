#!/usr/bin/env bash
# Regenerates every figure and table the README and docs/ quote that a
# test computes, from the code as it is: each test below rewrites its
# blocks (between <!-- name --> and <!-- /name --> lines) or its generated
# page, and fails without -update when they are stale. Run it after a
# change that moves results, review the diff, commit it.
#
#   scripts/regen-docs.sh        # everything (a few minutes)
#
# Figures no test can compute (wall times, memory, benchmarks) carry the
# date and the machine's load they were measured at; docs/development.md
# lists the commands that measure them.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { echo "== go test $*"; go test -count=1 "$@"; }
run ./policy -update                                          # docs/policies.md
run ./otlpingest -run 'TestTablesDocUpToDate|TestTracingDocUpToDate' -update   # docs/ingest-tables.md, docs/vllm-tracing.md
run ./physics -run 'TestKernelConstantsFitTheProfiles|TestCollectivesAgainstVidurNCCL' -update   # docs/physics-spec.md, docs/validation.md
run ./cluster -run 'PDBackpressureDocs' -update               # docs/anomalies.md
run ./experiment -run 'Docs' -update -timeout 30m            # autoscaling, P/D, KV tiers and anomaly tables, docs/img/diurnal-autoscale.png
run ./replay -run 'ValidationTable' -update -timeout 30m      # docs/guides/validating.md
run ./cmd/blis -run 'Docs' -update                           # the README's output fields, getting started and the guides' figures, the calibration tour
echo "== regenerated: review git diff, then go test ./... (internal/docs runs every command of the pages)"
