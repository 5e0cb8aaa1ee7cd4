"""SynthScenes file I/O: scenes written as 16-bit WAVs and, through ffmpeg, as H.264 MP4s."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from synthscenes.scenes import Scene
from synthscenes.video import VIDEO_FPS, render_video


def write_wav(path: Path | str, waveform: np.ndarray, sample_rate: int) -> Path:
    """16-bit PCM mono WAV; samples are clipped to [-1, 1]."""
    # imported here: generating scenes in memory (benchmarks/gpu_check.py on a machine
    # without soundfile) writes no file
    import soundfile as sf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.clip(waveform, -1.0, 1.0), sample_rate, subtype="PCM_16")
    return path


def write_scene(folder: Path | str, scene: Scene) -> Path:
    """Writes `<folder>/<scene.name>.wav` and returns its path."""
    return write_wav(Path(folder) / f"{scene.name}.wav", scene.waveform, scene.sample_rate)


def write_video(path: Path | str, frames: np.ndarray, fps: float = VIDEO_FPS) -> Path:
    """An H.264 MP4 of (frames, H, W, 3) uint8 RGB frames (a few kB for a scene)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _, height, width, _ = frames.shape
    command = [
        *("ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24"),
        *("-s", f"{width}x{height}", "-r", str(fps), "-i", "pipe:0"),
        *("-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-pix_fmt", "yuv444p"),
        str(path),
    ]
    done = subprocess.run(
        command, input=np.ascontiguousarray(frames).tobytes(), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg could not write {path}: {done.stderr.decode().strip()}")
    return path


def write_scene_video(folder: Path | str, scene: Scene) -> Path:
    """Writes `<folder>/<scene.name>.mp4` and returns its path."""
    return write_video(Path(folder) / f"{scene.name}.mp4", render_video(scene))
