#!/usr/bin/env bash
# go vet ./..., a few packages at a time, saying how far it is: on an
# empty build cache vet compiles every package it analyzes, which takes
# minutes on a shared 2-core machine and printed nothing. Run after go
# test (scripts/test.sh does), it finds them compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t pkgs < <(go list ./...)
n=${#pkgs[@]}
step=${VET_CHUNK:-12}
start=$SECONDS
for ((i = 0; i < n; i += step)); do
  chunk=("${pkgs[@]:i:step}")
  go vet "${chunk[@]}"
  done_n=$((i + ${#chunk[@]}))
  echo "   vet: $done_n of $n packages ($((SECONDS - start)) s)"
done
