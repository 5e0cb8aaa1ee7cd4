"""curation.media: ffmpeg reads an untrusted file as one local media file, and what a
file lasts is counted from its decoded samples, on real ffmpeg."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from curation import media
from curation.synth import siren, write_wav
from tests.curation import hostile_media


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    return hostile_media.server_secret(tmp_path / "elsewhere" / "secret.mp3")


@pytest.fixture(autouse=True)
def _folder(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()


def test_it_refuses_an_hls_playlist_named_wav_naming_the_format(
    tmp_path: Path, secret: Path
) -> None:
    playlist = hostile_media.hls_playlist(tmp_path / "rain.wav", secret)

    with pytest.raises(media.MediaError, match=r"rain\.wav: .*a hls file, which Earmark does not"):
        media.probe(playlist)


def test_it_never_decodes_the_local_file_an_hls_playlist_points_at(
    tmp_path: Path, secret: Path
) -> None:
    playlist = hostile_media.hls_playlist(tmp_path / "rain.wav", secret)

    with pytest.raises(media.MediaError, match="hls"):
        media.decode_audio(playlist, tmp_path / "out.wav", seconds=10)
    assert not (tmp_path / "out.wav").exists()


def test_it_refuses_an_ffconcat_list(tmp_path: Path, secret: Path) -> None:
    listing = hostile_media.concat_list(tmp_path / "rain.wav", secret)

    with pytest.raises(media.MediaError, match="a concat file"):
        media.probe(listing)


def test_it_reads_a_file_whose_name_has_a_colon_as_a_file(tmp_path: Path) -> None:
    path = tmp_path / "take:2.wav"
    write_wav(path, siren(np.random.default_rng(0), 16_000, 0.5), 16_000)

    assert media.probe(path).duration_seconds == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (hostile_media.wav_lying_about_duration, "liar.wav"),
        (hostile_media.flac_lying_about_duration, "liar.flac"),
    ],
)
def test_decoding_stops_at_its_limit_whatever_the_header_claims(
    tmp_path: Path, build: hostile_media.Liar, name: str
) -> None:
    liar = build(tmp_path / name, claims=1.0, holds=600.0)
    assert media.probe(liar).duration_seconds == pytest.approx(1.0)  # the claim

    seconds = media.decode_audio(liar, tmp_path / "out.wav", seconds=5.0, sample_rate=8_000)

    assert seconds == pytest.approx(5.0, abs=0.1)  # the samples, not the claim
    assert sf.info(str(tmp_path / "out.wav")).duration == pytest.approx(seconds)
