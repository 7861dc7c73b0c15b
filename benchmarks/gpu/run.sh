#!/usr/bin/env bash
# camserve's GPU checks and benchmarks in one call of a lent GPU machine (docs/benchmarks.md,
# "GPU run"): installs the wheels carried in .whl/ (benchmarks/gpu/fetch_wheels.sh) next to the
# machine's own torch, then runs benchmarks/gpu/run.py, which writes summary.md, results.json
# and junit.xml under $OUT; everything printed also goes to $OUT/log.txt. Bounded: the install
# by 60 s, the parts by their budget (440 s), the program that runs them by 460 s.
#
#   benchmarks/gpu/run.sh                                  # on the GPU machine, from anywhere
#   OUT=out/gpu WHEELS= benchmarks/gpu/run.sh --device cpu --size tiny --budget-s 240  # dry run
#
# WHEELS: the folder of wheels to install (default .whl; empty: install nothing, as on a
# machine that has camserve's packages already). Options go to benchmarks/gpu/run.py.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$root/out/gpu}
wheels=${WHEELS-.whl}
python=${PYTHON:-python3}
mkdir -p "$OUT"
{
  echo "camserve GPU run, $(date -u +%FT%TZ), $(uname -srm)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader
  site=
  if [ -n "$wheels" ] && compgen -G "$wheels/*.whl" >/dev/null; then
    site=$(mktemp -d /tmp/camserve-site.XXXXXX)
    timeout 60 "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$site" "$wheels"/*.whl && echo "installed $(ls "$wheels"/*.whl | wc -l) wheels into $site"
  fi
  export PYTHONPATH="${site:+$site:}$root:$root/app:$root/client${PYTHONPATH:+:$PYTHONPATH}"
  timeout --kill-after=10 460 "$python" -m benchmarks.gpu.run --out "$OUT" "$@"
  echo "exit: $?"
} 2>&1 | tee -a "$OUT/log.txt"
