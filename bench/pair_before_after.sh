#!/bin/bash
# Run a pipeline bench alternately on an older checkout and on this one, N times each, with
# the load average before each pair (one venv: each run imports its own checkout's code).
#   bench/pair_before_after.sh mariadb|postgres N BEFORE_CHECKOUT
#   e.g. git worktree add --detach /tmp/before b1b485b && bench/pair_before_after.sh mariadb 2 /tmp/before
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench=bench.bench_mariadb_pipeline args="--rows 50000 --snapshot-rows 0"
if [ "$1" = postgres ]; then bench=bench.bench_postgres_pipeline args="--rows 50000"; fi
for _ in $(seq "$2"); do
  uptime
  for side in "$3" "$here"; do
    echo "$side:"
    (cd "$side" && "$here/.venv/bin/python" -W ignore -m $bench $args 2>&1 | grep -i pipeline)
  done
done
