"""Ontology import and local-audio import speed.

Usage: .venv/bin/python benchmarks/imports.py [--clips 24]
Prints seconds per step; needs ../shared/data for the full ontology.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from _django import SHARED, setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=24)
    args = parser.parse_args()
    var = setup()

    import numpy as np

    from curation.services import clips_import_local, ontology_import
    from curation.synth import DEMO_SOUNDS, write_wav

    print(f"machine: {platform.machine()}, python {platform.python_version()}")
    ontology = SHARED / "audioset" / "ontology.json"
    if ontology.exists():
        start = time.perf_counter()
        result = ontology_import(path=ontology)
        print(f"ontology import, fresh:   {time.perf_counter() - start:.3f} s  {result}")
        start = time.perf_counter()
        result = ontology_import(path=ontology)
        print(f"ontology import, re-run:  {time.perf_counter() - start:.3f} s  {result}")
    else:
        print(f"skipped ontology import: {ontology} missing")

    folder = Path(var) / "bench-src"
    folder.mkdir()
    rng = np.random.default_rng(0)
    generators = [g for g, _, _ in DEMO_SOUNDS.values()]
    paths = []
    for i in range(args.clips):
        path = folder / f"clip{i:03d}.wav"
        samples = generators[i % len(generators)](rng, 44_100, 10.0)
        samples = samples + 0.01 * rng.standard_normal(samples.size).astype(samples.dtype)
        write_wav(path, samples, 44_100)
        paths.append(path)
    start = time.perf_counter()
    result = clips_import_local(project=None, paths=paths)  # site-wide, as the command does
    elapsed = time.perf_counter() - start
    print(
        f"local import of {args.clips} x 10 s WAV (44.1 kHz → 32 kHz mono, peaks, hash): "
        f"{elapsed:.2f} s, {elapsed / args.clips * 1000:.0f} ms/clip  created={result['created']}"
    )


if __name__ == "__main__":
    main()
