"""Post-process all AudioCaps train captions (49,838) and print captions per second.

    .venv/bin/python benchmarks/postprocess.py [--limit N] [--db]

1. the pipeline without grammar correction (normalise, final period, numbers, spaCy
   tokens, training text), in-process, one core;
2. the same with grammar correction against a local fake LanguageTool /v2/check server
   (tests/postprocessing/lt_server.py, three rules, in a thread of this process): this
   measures the client (batching, HTTP, offset conversion), not LanguageTool's checking,
   which on a real server costs far more;
3. with --db: the service as the job runs it, writing ProcessedCaption rows (fresh SQLite
   unless DATABASE_URL is set), without grammar correction.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._django import SHARED, setup


def _captions(limit: int | None) -> list[str]:
    path = SHARED / "audiocaps" / "train.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row["caption"] for row in csv.DictReader(handle)]
    return rows[:limit] if limit else rows


def _report(label: str, n: int, seconds: float) -> None:
    print(f"{label}: {n} captions in {seconds:.2f} s = {n / seconds:,.0f} captions/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--db", action="store_true", help="also run the service into the DB")
    args = parser.parse_args()
    setup()

    from postprocessing import nlp
    from postprocessing.languagetool import Config, LanguageToolClient
    from postprocessing.pipeline import process_many
    from tests.postprocessing.lt_server import fake_languagetool

    texts = _captions(args.limit)
    nlp.tokenize("warm up the tokenizer")

    start = time.perf_counter()
    results = process_many(texts, grammar=None, grammar_unavailable="benchmark: off")
    _report("pipeline, no grammar", len(texts), time.perf_counter() - start)
    changed = sum(1 for r in results if r.steps[2]["status"] == "applied")
    print(f"  numbers_to_words changed {changed} captions")

    with fake_languagetool() as server:
        client = LanguageToolClient(Config(url=server.url))
        start = time.perf_counter()
        results = process_many(texts, grammar=client)
        _report("pipeline + grammar (fake /v2/check)", len(texts), time.perf_counter() - start)
        applied = sum(1 for r in results if r.grammar["status"] == "applied")
        print(f"  {client.requests_sent} requests, {applied} captions corrected")

    if args.db:
        _db_run(texts)


def _db_run(texts: list[str]) -> None:
    from django.db import connection

    from annotation.models import Caption
    from core.models import Project
    from curation.models import Clip, Split, Subset, SubsetClip
    from postprocessing.languagetool import Correction, LanguageToolUnavailable
    from postprocessing.services import captions_postprocess

    user_project = Project.objects.create(name="bench", slug="bench-postprocess")
    subset = Subset.objects.create(project=user_project, name="corpus", slug="corpus")
    clips = Clip.objects.bulk_create(
        [
            Clip(source=Clip.Source.LOCAL, project=user_project, original_name=f"c{i}.wav")
            for i in range(len(texts))
        ],
        batch_size=5000,
    )
    SubsetClip.objects.bulk_create(
        [SubsetClip(subset=subset, clip=c, split=Split.TRAIN) for c in clips], batch_size=5000
    )
    captions = Caption.objects.bulk_create(
        [
            Caption(
                provenance=Caption.Provenance.IMPORTED,
                imported_into=user_project,
                clip=c,
                text=t,
                external_id=str(i),
            )
            for i, (c, t) in enumerate(zip(clips, texts, strict=True))
        ],
        batch_size=5000,
    )
    ids = [c.pk for c in captions]

    class Off:
        failure = "benchmark: off"

        def correct_many(self, batch: Sequence[str]) -> list[Correction]:
            raise LanguageToolUnavailable(self.failure)

    start = time.perf_counter()
    captions_postprocess(caption_ids=ids, grammar=Off())
    _report(f"service into {connection.vendor}, no grammar", len(ids), time.perf_counter() - start)


if __name__ == "__main__":
    main()
