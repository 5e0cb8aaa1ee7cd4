"""Audio snapshot throughput against `cp -r` of the same files (issue 22 item 1).

Usage: .venv/bin/python benchmarks/snapshot_audio.py [--clips 10000] [--seconds 10]
       [--format jsonl|clotho] [--dir /tmp] [--keep]

Generates N clips of 10 s of 32 kHz 16-bit mono WAV (10,000 ≈ 6.4 GB) into a fresh media
folder under --dir, imports one caption per clip (80 % train, 10 % val, 10 % test) and
points each clip at its file, then times:

- the audio snapshot build (`snapshot_build`, with_audio: every WAV streamed into one zip
  in storage, metadata, card, checksums), in this process;
- `cp -r` of the same audio folder to a folder beside it.

Each step starts after `sync`, so neither pays for the other's dirty pages; the write
figures are to the page cache (as `cp` reports), and `+ sync` adds the flush to disk. MB/s
is audio bytes (what both copy) per second. Memory: the largest RSS growth of this process
over the build, sampled every 20 ms from /proc/self/statm. Everything generated is deleted
at the end unless --keep.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DEBUG", "0")  # DEBUG would log every query
os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key-benchmark-only-secret-key")

from _measure import measured

RATE = 32_000


def timed_sync() -> float:
    start = time.perf_counter()
    os.sync()
    return time.perf_counter() - start


def generate(folder: Path, clips: int, seconds: float) -> int:
    """Writes the WAV files (noise, a different rotation per clip); returns their bytes."""
    import numpy as np
    import soundfile

    folder.mkdir(parents=True)
    noise = np.random.default_rng(0).integers(-8000, 8000, round(seconds * RATE))
    noise = noise.astype(np.int16)
    total = 0
    for i in range(clips):
        path = folder / f"clip{i:06d}.wav"
        soundfile.write(path, np.roll(noise, i * 101), RATE, subtype="PCM_16")
        total += path.stat().st_size
    return total


def caption_files(folder: Path, clips: int) -> dict[str, Path]:
    """One Clotho caption file per split naming the generated WAVs."""
    bounds = {"train": (0, clips * 8 // 10), "val": (clips * 8 // 10, clips * 9 // 10)}
    bounds["test"] = (clips * 9 // 10, clips)
    files = {}
    for split, (first, last) in bounds.items():
        path = folder / f"{split}.csv"
        lines = ["file_name,caption_1"]
        lines += [f"clip{i:06d}.wav,a steady hiss fills room {i}" for i in range(first, last)]
        path.write_text("\n".join(lines) + "\n")
        files[split] = path
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--format", default="jsonl", choices=["jsonl", "clotho"])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="leave the generated files")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="earmark-bench-audio-", dir=args.dir))
    os.environ["EARMARK_VAR_DIR"] = str(work / "var")
    os.environ["MEDIA_ROOT"] = str(work / "media")
    try:
        run(work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, args: argparse.Namespace) -> None:
    from _django import setup

    setup()
    from django.conf import settings

    from core.models import Project
    from corpus.services import captions_import, snapshot_build, snapshot_create
    from curation.models import Clip

    media = Path(settings.MEDIA_ROOT)
    audio = media / "clips" / "audio"
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python "
        f"{platform.python_version()}, database {db}, media on {media}"
    )
    start = time.perf_counter()
    audio_bytes = generate(audio, args.clips, args.seconds)
    print(
        f"generated {args.clips:,} clips of {args.seconds:g} s: {audio_bytes / 1e9:.2f} GB "
        f"in {time.perf_counter() - start:.1f} s"
    )
    project = Project.objects.create(name="bench", slug="bench")
    for split, path in caption_files(work, args.clips).items():
        captions_import(project=project, path=path, fmt="clotho", split=split)
    clips = list(Clip.objects.filter(project=project).only("pk", "original_name"))
    for clip in clips:
        clip.audio.name = f"clips/audio/{clip.original_name}"
        clip.status = Clip.Status.READY
    Clip.objects.bulk_update(clips, ["audio", "status"], batch_size=2000)

    snapshot = snapshot_create(
        project=project,
        fmt=args.format,
        text="raw",
        splits=["train", "val", "test"],
        with_audio=True,
    )
    os.sync()
    built, elapsed, cpu, grew = measured(lambda: snapshot_build(snapshot=snapshot))
    flushed = timed_sync()
    archive = media / built.archive.name
    print(
        f"audio snapshot ({args.format}): {built.manifest['audio']['files']:,} WAVs, archive "
        f"{archive.stat().st_size / 1e9:.2f} GB in {elapsed:.1f} s = "
        f"{audio_bytes / 1e6 / elapsed:.0f} MB/s (+ sync {flushed:.1f} s: "
        f"{audio_bytes / 1e6 / (elapsed + flushed):.0f} MB/s), CPU {cpu:.1f} s, "
        f"RSS +{grew:.0f} MB, missing {built.missing_audio}"
    )
    archive.unlink()  # free the space before cp writes its copy

    os.sync()
    start = time.perf_counter()
    subprocess.run(["cp", "-r", str(audio), str(work / "copy")], check=True)
    elapsed = time.perf_counter() - start
    flushed = timed_sync()
    print(
        f"cp -r of the same files: {elapsed:.1f} s = {audio_bytes / 1e6 / elapsed:.0f} MB/s "
        f"(+ sync {flushed:.1f} s: {audio_bytes / 1e6 / (elapsed + flushed):.0f} MB/s)"
    )


if __name__ == "__main__":
    main()
