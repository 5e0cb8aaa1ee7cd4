#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): one command on a bare GPU machine, from the
# repository root or anywhere. Needs only python3 with torch, numpy and torchaudio.
#   benchmarks/gpu_check.sh            # on the GPU: 50,000 clips, 16 workers; table to $OUT
#   benchmarks/gpu_check.sh --dry-run  # the same path on CPU at tiny sizes (CI)
# PYTHON picks another interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
