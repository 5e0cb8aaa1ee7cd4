"""Pools the runs of several active_learning.py --json outputs (same settings, different
--seeds) into one summary: the mean curve over all their seeds and the captions each
strategy needs to reach random's mean final, as active_learning.py prints it.

Usage: .venv/bin/python benchmarks/active_learning_combine.py A.json B.json [...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.active_learning import reach_at


def main() -> None:
    loaded = [json.loads(Path(p).read_text()) for p in sys.argv[1:]]
    seeds = [int(s) for d in loaded for s in d["args"]["seeds"].split(",")]
    strategies = list(loaded[0]["runs"])
    runs: dict[str, list[list[dict[str, Any]]]] = {
        s: [c for d in loaded for c in d["runs"][s]] for s in strategies
    }
    curves = {
        s: [
            {"captions": p["captions"], "values": [c[n]["value"] for c in runs[s]],
             "value": sum(c[n]["value"] for c in runs[s]) / len(runs[s])}
            for n, p in enumerate(runs[s][0])
        ]
        for s in strategies
    }  # fmt: skip
    print(f"val CIDEr-D by captions revealed (mean of seeds {seeds}; per seed in brackets)")
    print(f"{'strategy':12}" + "".join(f"{p['captions']:>30}" for p in curves["random"]))
    for s in strategies:
        cells = "".join(
            f"{p['value']:>8.3f} ({' '.join(f'{v:.3f}' for v in p['values'])})".rjust(30)
            for p in curves[s]
        )
        print(f"{s:12}{cells}")
    target = curves["random"][-1]["value"]
    final = curves["random"][-1]["captions"]
    print(f"\nrandom's final val CIDEr-D {target:.4f} (mean) with {final} captions; captions "
          "each strategy needs to reach it (first round at or above it):")  # fmt: skip
    for s in strategies:
        reach = reach_at(curves[s], target)
        share = f"{100 * reach / final:.0f}%" if reach else "not reached"
        own = [
            f"seed {seed}: {reach_at(runs[s][k], runs['random'][k][-1]['value']) or '-'}"
            for k, seed in enumerate(seeds)
        ]
        print(f"  {s:12} {reach or '-'} captions ({share}); against each seed's own "
              f"random final: {', '.join(own)}")  # fmt: skip


if __name__ == "__main__":
    main()
