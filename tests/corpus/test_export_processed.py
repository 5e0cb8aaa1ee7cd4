"""Exports of post-processed text (postprocessing.models.ProcessedCaption)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Caption
from core.models import Project
from corpus.models import CorpusImport, Snapshot
from corpus.services import snapshot_build, snapshot_create, snapshot_file_chunks
from postprocessing.models import ProcessedCaption
from tests.corpus.conftest import crowd_caption


def process(caption: Caption, final: str, *, version: str = "pp-1") -> ProcessedCaption:
    return ProcessedCaption.objects.create(
        caption=caption,
        source_text=caption.current_text,
        final_text=final,
        train_text=final.lower().replace(",", ""),
        tokens=final.lower().replace(",", "").split(),
        grammar_status="skipped",
        pipeline_version=version,
    )


@pytest.fixture
def all_processed(imported: CorpusImport) -> None:
    for caption in Caption.objects.all():
        process(caption, caption.text.rstrip(".").replace("Café", "Cafe"))


def test_it_exports_the_processed_text(imported: CorpusImport, all_processed: None) -> None:
    snapshot = snapshot_create(
        project=imported.project, fmt="audiocaps", text="processed", splits=["train"]
    )
    snapshot = snapshot_build(snapshot=snapshot)

    data = b"".join(snapshot_file_chunks(snapshot=snapshot, path="train.csv")).decode()
    assert data.splitlines()[5] == "105,DDDDDDDDDDD,120,Cafe chatter and clinking cups"
    assert snapshot.manifest["pipeline_versions"] == ["pp-1"]


def test_jsonl_carries_raw_processed_training_text_and_tokens(
    imported: CorpusImport, all_processed: None
) -> None:
    snapshot = snapshot_create(
        project=imported.project, fmt="jsonl", text="processed", splits=["train"]
    )
    snapshot = snapshot_build(snapshot=snapshot)

    lines = b"".join(snapshot_file_chunks(snapshot=snapshot, path="train.jsonl")).splitlines()
    second = json.loads(lines[1])
    assert second["raw"] == "A dog barks, then a man speaks"
    assert second["text"] == second["processed"] == "A dog barks, then a man speaks"
    assert second["train_text"] == "a dog barks then a man speaks"
    assert second["tokens"] == ["a", "dog", "barks", "then", "a", "man", "speaks"]


def test_it_refuses_processed_text_while_captions_wait(imported: CorpusImport) -> None:
    process(Caption.objects.get(external_id="101"), "A dog barks twice")

    with pytest.raises(ValidationError, match="4 approved captions are not post-processed yet"):
        snapshot_create(
            project=imported.project, fmt="audiocaps", text="processed", splits=["train"]
        )

    assert not Snapshot.objects.exists()


def test_a_caption_fixed_after_processing_counts_as_waiting(project: Project, ann: Any) -> None:
    caption = crowd_caption(project, ann, "a dgo barks")
    process(caption, "a dgo barks")
    caption.fixed_text = "a dog barks"
    caption.save()

    with pytest.raises(ValidationError, match="1 approved captions are not post-processed yet"):
        snapshot_create(project=project, fmt="jsonl", text="processed", splits=["val"])


def test_raw_exports_need_no_processing(imported: CorpusImport) -> None:
    snapshot = snapshot_create(project=imported.project, fmt="jsonl", text="raw", splits=["train"])

    assert snapshot_build(snapshot=snapshot).state == Snapshot.State.READY
