"""aac-metrics, an independent implementation of the audio-captioning metrics, as a second
opinion on corpus.evaluation. Used by test_evaluation_crosscheck.py and
benchmarks/metrics_crosscheck.py.

aac-metrics (Labbé) re-implements BLEU, ROUGE-L and CIDEr-D in PyTorch and drives the PTB
tokenizer and METEOR 1.5 with Python of its own; only the Java programs are shared with
pycocoevalcap. How it runs here, and why:

- bin/earmark installs it with `pip --no-deps` (requirements/dev-no-deps.txt): it declares
  msclap 1.3, which needs numpy < 2 and torchvision < 0.17, so pip cannot install it beside
  our pins.
- Its package `__init__` modules import every metric, the model-based ones too (CLAP, FENSE,
  BERTScore: msclap, sentence-transformers, transformers, torchmetrics), none of which is
  installed. The scorers compared here need only torch, numpy, packaging and
  typing_extensions, so the child imports their modules with those `__init__`s left unrun.
- It refuses Java > 13 in checks that run only under `__debug__`; this machine has Java 17,
  on which Earmark runs the same jars. The child runs under `python -O`, which skips them.
- Its cache folder, which `aac-metrics-download` fills from the internet, is laid out with
  links to pycocoevalcap's jars (the tokenizer, METEOR 1.5 and its paraphrase table).

The scores come from a child process (`python -O this_file.py request.json result.json`);
`AacMetricsRun` starts it at once so the caller can compute Earmark's scores meanwhile.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from corpus.evaluation_java import Toolkit

# aac-metrics' result names -> corpus.evaluation's
NAMES = {
    "bleu_1": "BLEU-1",
    "bleu_2": "BLEU-2",
    "bleu_3": "BLEU-3",
    "bleu_4": "BLEU-4",
    "meteor": "METEOR",
    "rouge_l": "ROUGE-L",
    "cider_d": "CIDEr-D",
}
COMPARED = tuple(NAMES.values())
# (aac-metrics' cache path, pycocoevalcap's file) for every jar and data file the scorers read
CACHE_LAYOUT = (
    ("aac-metrics/stanford_nlp/stanford-corenlp-3.4.1.jar", "tokenizer/stanford-corenlp-3.4.1.jar"),
    ("aac-metrics/meteor/meteor-1.5.jar", "meteor/meteor-1.5.jar"),
    ("aac-metrics/meteor/data/paraphrase-en.gz", "meteor/data/paraphrase-en.gz"),
)


class Job(TypedDict):
    """One scoring: candidates[i] against references[i], as raw (untokenized) captions."""

    candidates: list[str]
    references: list[list[str]]


class JobScores(TypedDict):
    corpus: dict[str, float]  # by corpus.evaluation's metric names
    per_clip: dict[str, list[float]]  # the same names, one score per candidate
    seconds: float


def unavailable(java: str = "java") -> str:
    """Why aac-metrics cannot run here, or "" when it can."""
    if importlib.util.find_spec("aac_metrics") is None:
        return (
            "aac-metrics is not installed (bin/earmark setup test installs it from "
            "requirements/dev-no-deps.txt)"
        )
    if shutil.which(java) is None:
        return f"no Java ({java!r} is not on PATH); aac-metrics runs the PTB tokenizer and METEOR"
    return ""


def version() -> str:
    return metadata.version("aac-metrics")


def human_rounds(references: Mapping[str, Sequence[str]]) -> list[Job]:
    """The human bound's rounds, restated: in round i every clip's reference i (i mod its
    count) is the candidate and the clip's other references are its references."""
    count = max(len(refs) for refs in references.values())
    jobs: list[Job] = []
    for i in range(count):
        job: Job = {"candidates": [], "references": []}
        for refs in references.values():
            pick = i % len(refs)
            job["candidates"].append(refs[pick])
            job["references"].append([*refs[:pick], *refs[pick + 1 :]])
        jobs.append(job)
    return jobs


def prediction_job(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> Job:
    return {
        "candidates": [predictions[key] for key in references],
        "references": [list(refs) for refs in references.values()],
    }


def lay_out_cache(folder: Path, kit: Toolkit) -> Path:
    """aac-metrics' cache folder under `folder`, its files linked to the toolkit's jars."""
    cache = folder / "aac-metrics-cache"
    for name, source in CACHE_LAYOUT:
        link = cache / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(kit.source / source)
    return cache


class AacMetricsRun:
    """aac-metrics scoring `jobs` in a child `python -O`, started by the constructor;
    `result()` waits for it. The jobs' METEOR JVMs start `workers` at a time."""

    def __init__(
        self, jobs: Sequence[Job], *, kit: Toolkit, folder: Path, workers: int = 2
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.request = folder / "aac-metrics-request.json"
        self.output = folder / "aac-metrics-result.json"
        tmp = folder / "aac-metrics-tmp"
        tmp.mkdir(exist_ok=True)
        self.request.write_text(
            json.dumps(
                {
                    "jobs": list(jobs),
                    "cache": str(lay_out_cache(folder, kit)),
                    "tmp": str(tmp),
                    "java": kit.java,
                    "workers": workers,
                }
            )
        )
        self.output.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-O", __file__, str(self.request), str(self.output)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def result(self) -> list[JobScores]:
        out, _ = self.process.communicate()
        if self.process.returncode != 0:
            tail = out.decode(errors="replace")[-3000:]
            raise RuntimeError(f"aac-metrics failed (exit {self.process.returncode}):\n{tail}")
        scores: list[JobScores] = json.loads(self.output.read_text())
        return scores


# The child: runs under python -O with only aac-metrics' scorer modules imported ---------


def _scorers() -> dict[str, Any]:
    for name in ("aac_metrics", "aac_metrics.functional"):
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        # the package object without running its __init__ (see the module docstring)
        sys.modules[name] = importlib.util.module_from_spec(spec)
    from aac_metrics.functional.bleu import bleu
    from aac_metrics.functional.cider_d import cider_d
    from aac_metrics.functional.meteor import meteor
    from aac_metrics.functional.rouge_l import rouge_l
    from aac_metrics.utils.tokenization import preprocess_mono_sents

    return {
        "bleu": bleu,
        "cider_d": cider_d,
        "meteor": meteor,
        "rouge_l": rouge_l,
        "tokenize": preprocess_mono_sents,
    }


def _score(job: Job, scorers: dict[str, Any], *, cache: str, java: str) -> JobScores:
    started = time.perf_counter()
    candidates, references = job["candidates"], job["references"]
    corpus: dict[str, Any] = {}
    sents: dict[str, Any] = {}
    bleu_corpus, bleu_sents = scorers["bleu"](candidates, references, n=4, return_1_to_n=True)
    for n in range(4):
        corpus[f"bleu_{n + 1}"] = bleu_corpus["bleu_1_to_4"][n]
        sents[f"bleu_{n + 1}"] = bleu_sents["bleu_1_to_4"][n]
    for name, kwargs in (
        ("meteor", {"cache_path": cache, "java_path": java}),
        ("rouge_l", {}),
        ("cider_d", {}),
    ):
        job_corpus, job_sents = scorers[name](candidates, references, **kwargs)
        corpus[name], sents[name] = job_corpus[name], job_sents[name]
    return {
        "corpus": {NAMES[name]: float(value) for name, value in corpus.items()},
        "per_clip": {NAMES[name]: [float(v) for v in value] for name, value in sents.items()},
        "seconds": round(time.perf_counter() - started, 3),
    }


def main(request_path: str, result_path: str) -> None:
    if __debug__:
        sys.exit("run under python -O: aac-metrics' debug checks refuse Java > 13")
    request = json.loads(Path(request_path).read_text())
    jobs: list[Job] = request["jobs"]
    scorers = _scorers()
    # aac-metrics' evaluate() tokenizes with one Java call per caption list; every line is
    # tokenized on its own, so all jobs share one call here
    lines = [
        text
        for job in jobs
        for text in (*job["candidates"], *(r for refs in job["references"] for r in refs))
    ]
    tokens = iter(
        scorers["tokenize"](
            lines, cache_path=request["cache"], java_path=request["java"], tmp_path=request["tmp"]
        )
    )
    tokenized: list[Job] = [
        {
            "candidates": [next(tokens) for _ in job["candidates"]],
            "references": [[next(tokens) for _ in refs] for refs in job["references"]],
        }
        for job in jobs
    ]
    workers = max(1, min(int(request["workers"]), len(jobs)))
    with ThreadPoolExecutor(workers) as pool:  # each job's METEOR is a JVM of its own
        results = list(
            pool.map(
                lambda job: _score(job, scorers, cache=request["cache"], java=request["java"]),
                tokenized,
            )
        )
    Path(result_path).write_text(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
