"""Media storage: the filesystem by default, an S3-compatible bucket when configured.

The S3 tests talk to a real S3 API server (moto's, on 127.0.0.1) through boto3 and
django-storages, the same path production takes to MinIO or AWS.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.http import StreamingHttpResponse
from django.test import RequestFactory

from core.media import media_response
from curation import synth
from curation.models import Clip
from curation.services import clips_import_local
from earmark.env import env_storages

BUCKET = "earmark-media"


def test_media_goes_to_disk_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDIA_STORAGE", raising=False)
    storages_setting = env_storages("MEDIA_STORAGE")
    assert storages_setting["default"]["BACKEND"] == "django.core.files.storage.FileSystemStorage"


def test_s3_needs_a_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDIA_STORAGE", "s3")
    monkeypatch.delenv("S3_BUCKET", raising=False)
    with pytest.raises(ImproperlyConfigured, match="MEDIA_STORAGE=s3 needs S3_BUCKET"):
        env_storages("MEDIA_STORAGE")


def test_an_unknown_storage_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDIA_STORAGE", "ftp")
    with pytest.raises(ImproperlyConfigured, match="MEDIA_STORAGE='ftp' is not a storage"):
        env_storages("MEDIA_STORAGE")


def test_a_malformed_endpoint_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDIA_STORAGE", "s3")
    monkeypatch.setenv("S3_BUCKET", BUCKET)
    monkeypatch.setenv("S3_ENDPOINT_URL", "minio:9000")
    with pytest.raises(ImproperlyConfigured, match="S3_ENDPOINT_URL='minio:9000'"):
        env_storages("MEDIA_STORAGE")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_storage(s3_endpoint: str, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "MEDIA_STORAGE": "s3",
        "S3_BUCKET": BUCKET,
        "S3_ENDPOINT_URL": s3_endpoint,
        "S3_REGION": "us-east-1",
        "S3_PREFIX": "earmark/",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = env_storages("MEDIA_STORAGE")
    yield storages["default"]
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def test_media_is_stored_in_the_bucket_under_the_prefix(s3_storage: Any, s3_endpoint: str) -> None:
    name = s3_storage.save("clips/audio/a.wav", ContentFile(b"RIFF-audio"))

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    body = client.get_object(Bucket=BUCKET, Key=f"earmark/{name}")["Body"].read()
    assert body == b"RIFF-audio"


def test_stored_names_never_overwrite_each_other(s3_storage: Any) -> None:
    first = s3_storage.save("clips/audio/a.wav", ContentFile(b"one"))
    second = s3_storage.save("clips/audio/a.wav", ContentFile(b"two"))

    assert first != second
    assert s3_storage.open(first).read() == b"one"


def test_media_views_stream_ranges_from_the_bucket(s3_storage: Any) -> None:
    name = s3_storage.save("clips/audio/b.wav", ContentFile(bytes(range(200))))

    class FieldFile:  # what a model's FileField gives media_response
        def __init__(self) -> None:
            self.name = name
            self.size = s3_storage.size(name)

        def __bool__(self) -> bool:
            return True

        def open(self, mode: str) -> Any:
            return s3_storage.open(name, mode)

    request = RequestFactory().get("/", headers={"Range": "bytes=10-19"})
    response = media_response(request, FieldFile(), missing="gone")

    assert response.status_code == 206
    assert isinstance(response, StreamingHttpResponse)
    assert response.getvalue() == bytes(range(10, 20))  # joins the streamed chunks


@pytest.mark.django_db
def test_imported_clips_keep_their_audio_in_the_bucket(s3_storage: Any, tmp_path: Any) -> None:
    wav = tmp_path / "siren.wav"
    synth.write_wav(wav, synth.siren(np.random.default_rng(1), 32_000, 1.0), 32_000)

    result = clips_import_local(project=None, paths=[wav])

    clip = Clip.objects.get(pk=result["clip_ids"][0])
    assert s3_storage.exists(clip.audio.name)
    with clip.audio.open("rb") as handle:
        assert handle.read(4) == b"RIFF"
