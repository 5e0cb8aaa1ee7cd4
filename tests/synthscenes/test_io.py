"""synthscenes.io: the WAV and MP4 files of a scene read back as the scene."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

import synthscenes as S
from modeling.ml.video import VideoConfig, read_frames


def test_wav_files_hold_the_scene(tmp_path: Path) -> None:
    scene = S.generate_scene(1, 0)
    path = S.write_scene(tmp_path, scene)
    assert path.name == "synth-1-0.wav"
    samples, rate = sf.read(str(path), dtype="float32")
    assert rate == 32_000
    assert np.abs(samples - scene.waveform).max() < 1e-4
    assert sf.info(str(path)).subtype == "PCM_16"


def test_the_mp4_reads_back_as_the_rendered_frames(tmp_path: Path) -> None:
    scene = S.generate_scene(7, 3)
    path = S.write_scene_video(tmp_path, scene)
    assert path.name == "synth-7-3.mp4"
    assert path.stat().st_size < 20_000
    frames = read_frames(path, VideoConfig(fps=S.VIDEO_FPS, size=S.VIDEO_SIZE, max_frames=100))
    rendered = S.render_video(scene)
    assert frames.shape == rendered.shape
    assert np.abs(frames.astype(int) - rendered.astype(int)).mean() < 3
