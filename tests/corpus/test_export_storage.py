"""An audio snapshot with media in an S3-compatible bucket (moto's S3 server, through
boto3 and django-storages as in production): the clips' audio streams out of the bucket,
and the archive is uploaded under a temporary key, then copied to its own name inside the
bucket, leaving no temporary key behind."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import boto3
import pytest

from core.models import Project
from corpus.models import Snapshot
from corpus.services import snapshot_build, snapshot_create
from tests.core import test_storage
from tests.core.test_storage import BUCKET
from tests.corpus.conftest import clip_with_audio, crowd_caption, wav_bytes

pytestmark = pytest.mark.django_db

# the S3 server and the storage on it, as tests/core/test_storage.py sets them up
s3_endpoint = test_storage.s3_endpoint
s3_storage = test_storage.s3_storage


def test_an_audio_snapshot_is_built_from_and_into_the_bucket(
    s3_storage: Any, s3_endpoint: str, project: Project, ann: Any
) -> None:
    clip, samples = clip_with_audio(seconds=0.2, seed=5, youtube_id="AAAAAAAAAAA", start=30)
    crowd_caption(project, ann, "a dog barks twice", split="train", clip=clip)
    snapshot = snapshot_create(
        project=project, fmt="jsonl", text="raw", splits=["train"], with_audio=True
    )

    built = snapshot_build(snapshot=snapshot)

    assert built.state == Snapshot.State.READY
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == [f"earmark/{clip.audio.name}", "earmark/snapshots/sounds-v1-jsonl-raw-audio.zip"]
    body = client.get_object(Bucket=BUCKET, Key=f"earmark/{built.archive.name}")["Body"].read()
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.read("train/AAAAAAAAAAA_30.wav") == wav_bytes(samples)
