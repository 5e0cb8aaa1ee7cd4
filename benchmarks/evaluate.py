"""Evaluate the AudioCaps test split (975 clips x 5 references): time per metric, with METEOR
cold (first evaluation in the process: JVM start) and warm (the kept process), and the
human upper bound. Also times pycocoevalcap's own classes the way COCOEvalCap uses them
(new Meteor JVM per evaluation, tokenizer run twice) for comparison.

Predictions: each clip gets the first reference of the next clip in the file (a realistic
caption shape that is wrong for the clip), scored against all five references; the numbers
are not a system's quality, only the cost of computing them.

Usage: .venv/bin/python benchmarks/evaluate.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from corpus import evaluation, evaluation_java  # noqa: E402
from corpus.evaluation_files import read_references  # noqa: E402

TIMED = ("tokenize", "BLEU", "METEOR", "ROUGE-L", "CIDEr-D")


def direct_pycocoevalcap(predictions: dict[str, str], references: dict[str, list[str]]) -> float:
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    started = time.perf_counter()
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in references.items()})
    res = tokenizer.tokenize({k: [{"caption": predictions[k]}] for k in references})
    Bleu(4).compute_score(gts, res, verbose=0)
    meteor = Meteor()
    meteor.compute_score(gts, res)
    Rouge().compute_score(gts, res)
    Cider().compute_score(gts, res)
    elapsed = time.perf_counter() - started
    meteor.meteor_p.stdin.close()
    meteor.meteor_p.wait()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="warm evaluations to time")
    args = parser.parse_args()
    path = SHARED / "audiocaps" / "test.csv"
    started = time.perf_counter()
    references = read_references(path, fmt="audiocaps")
    read_seconds = time.perf_counter() - started
    keys = list(references)
    predictions = {key: references[keys[(i + 1) % len(keys)]][0] for i, key in enumerate(keys)}
    print(
        f"{path.name}: {len(references)} clips, {sum(map(len, references.values()))} "
        f"references, read in {read_seconds:.2f} s"
    )

    kit = evaluation_java.toolkit(Path(tempfile.mkdtemp(prefix="earmark-bench-")))
    meteor = evaluation_java.MeteorProcess(kit=kit)
    runs = []
    for run in range(args.runs + 1):
        started = time.perf_counter()
        result = evaluation.evaluate(
            predictions=predictions, references=references, kit=kit, meteor=meteor
        )
        total = time.perf_counter() - started
        runs.append((total, result))
        label = "cold (METEOR JVM starts)" if run == 0 else f"warm run {run}"
        parts = ", ".join(f"{name} {result.seconds[name]:.2f} s" for name in TIMED)
        print(f"{label}: BLEU..CIDEr-D {total:.2f} s ({parts})")
    warm = runs[1:]
    median = statistics.median(total for total, _ in warm)
    print(
        f"warm median BLEU..CIDEr-D: {median:.2f} s (target < 30 s); METEOR JVM starts: "
        f"{meteor.starts}"
    )
    for name in TIMED:
        print(f"  {name:<9} median {statistics.median(r.seconds[name] for _, r in warm):.2f} s")
    scores = runs[-1][1]
    print(evaluation.format_table(scores.scores, scores.unavailable))

    started = time.perf_counter()
    bound = evaluation.human_upper_bound(references=references, kit=kit, meteor=meteor)
    print(f"human upper bound (5 rounds, warm METEOR): {time.perf_counter() - started:.2f} s")
    print(evaluation.format_table(bound.scores, {}))
    meteor.close()

    print(
        f"pycocoevalcap direct, COCOEvalCap-style (new METEOR JVM each time): "
        f"{direct_pycocoevalcap(predictions, references):.2f} s"
    )


if __name__ == "__main__":
    main()
