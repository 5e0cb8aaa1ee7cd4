"""synthscenes.recipe.prepare_synthscenes: writes a set once, finds it complete the second
time, and redoes a partial folder instead of trusting it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from synthscenes import generate_scene, prepare_synthscenes, recipe
from synthscenes.recipe import MANIFEST, PreparedScene


def _holds_the_scenes(prepared: list[PreparedScene], seed: int, indices: range) -> None:
    assert [p.name for p in prepared] == [f"synth-{seed}-{i}" for i in indices]
    for item, index in zip(prepared, indices, strict=True):
        scene = generate_scene(seed, index, n_captions=2)
        samples, rate = sf.read(str(item.audio), dtype="float32")
        assert rate == scene.sample_rate
        assert np.abs(samples - scene.waveform).max() < 1e-4
        assert (item.mids, item.captions) == (scene.mids, scene.captions)


def _no_generating(*_: object, **__: object) -> None:
    raise AssertionError("prepare_synthscenes generated scenes")


def test_it_writes_the_scenes_their_videos_and_a_manifest(tmp_path: Path) -> None:
    prepared = prepare_synthscenes(tmp_path / "set", seed=3, start=5, count=2, n_captions=2)

    _holds_the_scenes(prepared, 3, range(5, 7))
    assert [p.video.name for p in prepared if p.video] == ["synth-3-5.mp4", "synth-3-6.mp4"]
    manifest = json.loads((tmp_path / "set" / MANIFEST).read_text())
    assert manifest["arguments"]["count"] == 2
    assert [s["audio"] for s in manifest["scenes"]] == ["synth-3-5.wav", "synth-3-6.wav"]
    assert manifest["scenes"][0]["captions"] == prepared[0].captions


def test_a_second_call_with_the_same_arguments_does_no_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = prepare_synthscenes(tmp_path, seed=1, count=2, n_captions=2)
    written = {path: path.stat().st_mtime_ns for path in tmp_path.iterdir()}
    monkeypatch.setattr(recipe, "generate_scenes", _no_generating)

    again = prepare_synthscenes(tmp_path, seed=1, count=2, n_captions=2)

    assert again == first
    assert {path: path.stat().st_mtime_ns for path in tmp_path.iterdir()} == written


def test_a_partial_folder_is_redone_not_trusted(tmp_path: Path) -> None:
    prepare_synthscenes(tmp_path, seed=2, count=3, n_captions=2, video=False)
    # an interrupted run: no manifest yet, one WAV cut short, one never written
    (tmp_path / MANIFEST).unlink()
    (tmp_path / "synth-2-0.wav").write_bytes(b"RIFF")
    (tmp_path / "synth-2-2.wav").unlink()

    prepared = prepare_synthscenes(tmp_path, seed=2, count=3, n_captions=2, video=False)

    _holds_the_scenes(prepared, 2, range(3))
    assert all(p.video is None for p in prepared)
    assert (tmp_path / MANIFEST).is_file()


def test_a_finished_folder_missing_a_file_is_redone(tmp_path: Path) -> None:
    prepare_synthscenes(tmp_path, seed=4, count=2, n_captions=2, video=False)
    (tmp_path / "synth-4-1.wav").unlink()

    prepared = prepare_synthscenes(tmp_path, seed=4, count=2, n_captions=2, video=False)

    _holds_the_scenes(prepared, 4, range(2))


def test_a_folder_prepared_with_other_arguments_is_refused(tmp_path: Path) -> None:
    prepare_synthscenes(tmp_path, seed=0, count=1, n_captions=2, video=False)

    with pytest.raises(ValueError, match=r"other arguments \(seed=0\)"):
        prepare_synthscenes(tmp_path, seed=1, count=1, n_captions=2, video=False)
