"""Audio features: log-mel / MFCC / Kaldi fbank per model, a content-addressed disk cache,
batch extraction from WAV files, and SpecAugment.

Shapes: a clip's features are `(T, F)` float32 (frames x bins); a padded batch is
`(B, T, F)` with `lengths (B,)` holding each clip's frame count.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import torchaudio
from torch import Tensor, nn

# the settings live in config_features (no torch, so run planning reads them in the web
# process); every name is re-exported here for the code that extracts
from modeling.ml.config_features import (  # noqa: F401
    ACT,
    AST,
    AUDIOCAPS_MFCC,
    AV,
    BILSTM,
    FEATURE_CODE_VERSION,
    KINDS,
    LOGS,
    PANNS,
    PRESETS,
    VGGISH,
    YAMNET,
    FeatureConfig,
    feature_preset,
)

# Extraction ------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def _mel_filters(config: FeatureConfig) -> tuple[Tensor, Tensor, int, int]:
    """(window padded to n_fft, mel filterbank rows lo:hi (hi - lo, n_mels), lo, hi): the same
    window and filterbank torchaudio's MelSpectrogram uses; bins no filter touches are
    skipped."""
    window = torch.hann_window(config.win_length)
    left = (config.n_fft - config.win_length) // 2
    window = F.pad(window, (left, config.n_fft - config.win_length - left))
    fb = torchaudio.functional.melscale_fbanks(
        config.n_fft // 2 + 1,
        config.f_min,
        config.f_max if config.f_max is not None else config.sample_rate / 2,
        config.n_mels,
        config.sample_rate,
        config.mel_norm,
        config.mel_scale,
    )
    used = torch.nonzero(fb.abs().sum(dim=1)).flatten()
    lo, hi = int(used.min()), int(used.max()) + 1
    return window, fb[lo:hi].contiguous(), lo, hi


def _mel(waves: Tensor, config: FeatureConfig) -> Tensor:
    """waves (B, samples) -> mel energies (B, T, n_mels), as torchaudio's MelSpectrogram
    (Hann window, reflect padding when centred) but framed with unfold and a real FFT per
    frame, and only over the FFT bins the filterbank uses: about twice as fast on CPU."""
    window, fb, lo, hi = _mel_filters(config)
    if config.center:
        pad = config.n_fft // 2
        waves = F.pad(waves[:, None], (pad, pad), mode="reflect")[:, 0]
    frames = waves.unfold(1, config.n_fft, config.hop_length) * window  # (B, T, n_fft)
    spectrum = torch.fft.rfft(frames)[..., lo:hi]
    if config.power == 2.0:
        power = spectrum.real.square() + spectrum.imag.square()
    else:
        power = spectrum.abs().pow(config.power)
    return torch.matmul(power, fb)


@lru_cache(maxsize=32)
def _dct(n_mfcc: int, n_mels: int) -> Tensor:
    return torchaudio.functional.create_dct(n_mfcc, n_mels, "ortho")


def _as_mono(waveform: Tensor | np.ndarray) -> Tensor:
    """(samples,), (channels, samples) or (batch, samples) for batches -> float32."""
    wave = torch.as_tensor(waveform)
    if not torch.is_floating_point(wave):
        raise ValueError(f"waveform must be floating point samples, not {wave.dtype}")
    return wave.to(torch.float32)


def _log(mel: Tensor, config: FeatureConfig) -> Tensor:
    if config.log == "db":
        db = 10.0 * torch.log10(torch.clamp(mel, min=config.log_offset))
        if config.top_db is not None:  # mel (B, T, F): the floor follows each clip's loudest
            floor = db.amax(dim=(-2, -1), keepdim=True) - config.top_db
            db = torch.maximum(db, floor)
        return db
    return torch.log(mel + config.log_offset)


def _pcm_to_float(waves: Tensor) -> Tensor:
    if waves.dtype == torch.int16:
        return waves.float().mul_(float(_PCM16_SCALE))
    return waves


def _extract_batch_tensor(waves: Tensor, config: FeatureConfig) -> Tensor:
    """waves (B, samples) at config.sample_rate, float or 16-bit PCM -> features (B, T, F)."""
    if config.kind == "fbank":
        waves = _pcm_to_float(waves)
        # Kaldi's fbank has no batch form; AST computes it one clip at a time too
        return torch.stack(
            [
                torchaudio.compliance.kaldi.fbank(
                    wave[None],
                    sample_frequency=config.sample_rate,
                    frame_length=config.win_length * 1000 / config.sample_rate,
                    frame_shift=config.hop_length * 1000 / config.sample_rate,
                    num_mel_bins=config.n_mels,
                    low_freq=config.f_min,
                    high_freq=config.f_max if config.f_max is not None else 0.0,
                    window_type="hanning",
                    htk_compat=True,
                    use_energy=False,
                    dither=0.0,
                )
                for wave in waves
            ]
        )
    # a few clips at a time keep the samples and (B, T, n_fft) frames in cache-sized pieces
    logmel = torch.cat([_log(_mel(_pcm_to_float(part), config), config) for part in waves.split(8)])
    if config.drop_last_frame:
        logmel = logmel[:, :-1]
    if config.kind == "mfcc":
        return torch.matmul(logmel, _dct(config.n_mfcc, config.n_mels))
    return logmel


def resample(waveform: Tensor, sample_rate: int, target_rate: int) -> Tensor:
    if sample_rate == target_rate:
        return waveform
    return torchaudio.functional.resample(waveform, sample_rate, target_rate)


@torch.no_grad()  # not inference_mode: callers may train on the result
def extract(waveform: Tensor | np.ndarray, sample_rate: int, config: FeatureConfig) -> Tensor:
    """Features `(T, F)` float32 of one clip.

    `waveform` is `(samples,)` or `(channels, samples)` float audio at `sample_rate`;
    channels are averaged to mono and the audio is resampled to `config.sample_rate`.
    """
    wave = _as_mono(waveform)
    if wave.dim() == 2:
        wave = wave.mean(dim=0)
    elif wave.dim() != 1:
        raise ValueError(f"waveform must be (samples,) or (channels, samples), got {wave.shape}")
    wave = resample(wave, sample_rate, config.sample_rate)
    if wave.numel() < config.win_length:
        raise ValueError(
            f"audio of {wave.numel()} samples is shorter than one {config.win_length}-sample window"
        )
    return _extract_batch_tensor(wave[None], config)[0].contiguous()


# 16-bit PCM (WAV/FLAC) is read as int16 and scaled here: libsndfile's own float conversion
# gives the same values (x / 32768) at about twice the cost, and a batch of int16 clips is
# half the bytes to stack.
_PCM16_SCALE = np.float32(1 / 32768)
# np.load parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor
# is not thread-safe ("AST constructor recursion depth mismatch" when threads parse at
# once): cache reads from several threads (DataLoader threads, tests) take turns.
_NPY_LOAD_LOCK = threading.Lock()


def load_npy(path: Path) -> np.ndarray:
    """np.load without pickles, one thread at a time (see _NPY_LOAD_LOCK)."""
    with _NPY_LOAD_LOCK:
        return np.load(path, allow_pickle=False)


def _read_samples(path: Path | str) -> tuple[np.ndarray, int]:
    """`(samples,)` mono, int16 for 16-bit PCM files and float32 otherwise, and the rate."""
    # imported here: features computed from waveforms in memory (benchmarks/gpu_check.py on
    # a machine without soundfile) need no decoder
    import soundfile as sf

    try:
        with sf.SoundFile(str(path)) as handle:
            pcm16 = handle.subtype == "PCM_16" and handle.channels == 1
            data = handle.read(dtype="int16" if pcm16 else "float32", always_2d=True)
            rate = handle.samplerate
    except (sf.LibsndfileError, RuntimeError) as exc:
        raise ValueError(f"{path}: cannot decode audio ({exc})") from None
    if data.shape[0] == 0:
        raise ValueError(f"{path}: has no samples")
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono), int(rate)


def _as_float(samples: np.ndarray) -> np.ndarray:
    if samples.dtype == np.int16:
        return np.multiply(samples, _PCM16_SCALE, dtype=np.float32)
    return samples


def read_wav(path: Path | str) -> tuple[np.ndarray, int]:
    """Decodes a WAV/FLAC/OGG file with soundfile: `(samples,)` float32 mono and its rate."""
    samples, rate = _read_samples(path)
    return _as_float(samples), rate


@torch.no_grad()  # not inference_mode: callers may train on the result
def extract_files(paths: Sequence[Path | str], config: FeatureConfig) -> list[Tensor]:
    """Features of many audio files, decoded with soundfile. Clips with the same length and
    rate (10 s AudioSet clips, SynthScenes) go through the STFT as one batch."""
    waves = [_read_samples(path) for path in paths]
    out: list[Tensor | None] = [None] * len(waves)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (samples, rate) in enumerate(waves):
        groups.setdefault((samples.size, rate), []).append(i)
    for (size, rate), members in groups.items():
        if size < config.win_length * rate / config.sample_rate:
            raise ValueError(f"{paths[members[0]]}: shorter than one analysis window")
        parts = [waves[i][0] for i in members]
        if len({part.dtype for part in parts}) > 1:
            parts = [_as_float(part) for part in parts]
        batch = torch.from_numpy(np.stack(parts))  # int16 stays int16 until the STFT
        if rate != config.sample_rate:
            batch = resample(_pcm_to_float(batch), rate, config.sample_rate)
        feats = _extract_batch_tensor(batch, config)
        for row, i in enumerate(members):
            out[i] = feats[row].contiguous()
    return [f for f in out if f is not None]


def pad_batch(features: Sequence[Tensor], pad_value: float = 0.0) -> tuple[Tensor, Tensor]:
    """[(T_i, F)] -> (features (B, T_max, F), lengths (B,) int64)."""
    if not features:
        raise ValueError("pad_batch needs at least one clip")
    lengths = torch.tensor([f.shape[0] for f in features], dtype=torch.long)
    batch = features[0].new_full(
        (len(features), int(lengths.max()), features[0].shape[1]), pad_value
    )
    for i, f in enumerate(features):
        batch[i, : f.shape[0]] = f
    return batch, lengths


# Cache -----------------------------------------------------------------------------------


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _atomic_write(target: Path, write: Any) -> None:
    """Writes through a temporary file in the target's folder and renames it into place, so
    readers see either nothing or a whole file; when two workers race, both write complete
    identical files and the last rename wins. No fsync (it tripled the cost of a cache
    miss): after a power cut a renamed file may be empty or short, and `FeatureCache.get`
    treats such a file as a miss and rewrites it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FeatureCache:
    """Features on disk, one `.npy` per clip under `root/<config key>/<sha[:2]>/<sha>.npy`,
    keyed by the clip's audio content hash and the feature config, so a changed config or
    changed audio never reads stale features. Safe for several processes at once."""

    def __init__(self, root: Path | str, config: FeatureConfig) -> None:
        self.root = Path(root)
        self.config = config
        self.folder = self.root / config.key()
        self.hits = 0
        self.misses = 0

    def path_for(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a lower-case hex sha256: {sha256!r}")
        return self.folder / sha256[:2] / f"{sha256}.npy"

    def get(self, sha256: str) -> Tensor | None:
        path = self.path_for(sha256)
        try:
            array = load_npy(path)
        except FileNotFoundError:
            return None
        except (ValueError, OSError, EOFError):
            return None  # damaged (disk full, killed mid-copy): recomputed and replaced
        if array.ndim != 2 or array.shape[1] != self.config.n_features:
            return None
        return torch.from_numpy(array)

    def put(self, sha256: str, features: Tensor) -> Path:
        path = self.path_for(sha256)
        array = features.detach().cpu().numpy().astype(np.float32, copy=False)
        if not (self.folder / "config.json").exists():
            text = json.dumps(self.config.to_dict(), indent=2, sort_keys=True).encode()
            _atomic_write(self.folder / "config.json", lambda h: h.write(text))
        _atomic_write(path, lambda h: np.save(h, array, allow_pickle=False))
        return path

    def get_or_compute(self, path: Path | str, sha256: str | None = None) -> Tensor:
        """Features `(T, F)` of the audio file at `path`; `sha256` is its content hash (the
        clip's `content_sha256`), computed from the file when not given."""
        sha256 = sha256 or sha256_file(path)
        cached = self.get(sha256)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        samples, rate = read_wav(path)
        features = extract(samples, rate, self.config)
        self.put(sha256, features)
        return features

    def get_or_compute_many(self, items: Iterable[tuple[Path | str, str | None]]) -> list[Tensor]:
        """Like `get_or_compute` for many `(path, sha256)` pairs; misses are extracted in
        batches (`extract_files`)."""
        keyed = [(p, s or sha256_file(p)) for p, s in items]
        out: list[Tensor | None] = [self.get(sha) for _, sha in keyed]
        missing = [i for i, f in enumerate(out) if f is None]
        self.hits += len(keyed) - len(missing)
        self.misses += len(missing)
        for start in range(0, len(missing), 64):
            chunk = missing[start : start + 64]
            for i, features in zip(
                chunk, extract_files([keyed[i][0] for i in chunk], self.config), strict=True
            ):
                self.put(keyed[i][1], features)
                out[i] = features
        return [f for f in out if f is not None]


# SpecAugment -----------------------------------------------------------------------------


class SpecAugment(nn.Module):
    """Time and frequency masking (Park et al., 2019) on a padded batch, in training only.

    Each clip is augmented with probability `p`: `n_time_masks` time masks of width
    0..`time_mask` frames placed inside the clip's own length, and `n_freq_masks` frequency
    masks of width 0..`freq_mask` bins. Masked cells take the clip's mean value, which is
    "no information" whether the features are normalised or raw log-mel (a zero would be a
    loud value in raw log-mel). In eval mode the input is returned unchanged.
    """

    def __init__(
        self,
        *,
        time_mask: int,
        freq_mask: int,
        n_time_masks: int = 2,
        n_freq_masks: int = 2,
        p: float = 1.0,
    ) -> None:
        super().__init__()
        if time_mask < 0 or freq_mask < 0 or n_time_masks < 0 or n_freq_masks < 0:
            raise ValueError("SpecAugment widths and counts must be >= 0")
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"SpecAugment probability {p} is not in [0, 1]")
        self.time_mask = time_mask
        self.freq_mask = freq_mask
        self.n_time_masks = n_time_masks
        self.n_freq_masks = n_freq_masks
        self.p = p

    def extra_repr(self) -> str:
        return (
            f"time_mask={self.time_mask}, freq_mask={self.freq_mask}, "
            f"n_time_masks={self.n_time_masks}, n_freq_masks={self.n_freq_masks}, p={self.p}"
        )

    def mask(self, features: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Boolean `(B, T, F)`: True where the batch would be masked."""
        batch, frames, bins = features.shape
        device = features.device
        if lengths is None:
            lengths = torch.full((batch,), frames, device=device, dtype=torch.long)
        lengths = lengths.to(device)
        chosen = torch.rand(batch, device=device) < self.p
        time_axis = torch.arange(frames, device=device)
        freq_axis = torch.arange(bins, device=device)
        masked_t = torch.zeros(batch, frames, dtype=torch.bool, device=device)
        for _ in range(self.n_time_masks):
            limit = torch.minimum(torch.full_like(lengths, self.time_mask), lengths)
            width = (torch.rand(batch, device=device) * (limit + 1)).long()
            start = (torch.rand(batch, device=device) * (lengths - width + 1)).long()
            masked_t |= (time_axis >= start[:, None]) & (time_axis < (start + width)[:, None])
        masked_f = torch.zeros(batch, bins, dtype=torch.bool, device=device)
        for _ in range(self.n_freq_masks):
            width = (torch.rand(batch, device=device) * (min(self.freq_mask, bins) + 1)).long()
            start = (torch.rand(batch, device=device) * (bins - width + 1)).long()
            masked_f |= (freq_axis >= start[:, None]) & (freq_axis < (start + width)[:, None])
        mask = masked_t[:, :, None] | masked_f[:, None, :]
        return mask & chosen[:, None, None]

    def forward(self, features: Tensor, lengths: Tensor | None = None) -> Tensor:
        if not self.training or self.p == 0.0:
            return features
        mask = self.mask(features, lengths)
        if lengths is None:
            mean = features.mean(dim=(1, 2), keepdim=True)
        else:
            valid = torch.arange(features.shape[1], device=features.device)[None] < lengths[
                :, None
            ].to(features.device)
            total = (features * valid[:, :, None]).sum(dim=(1, 2))
            count = (valid.sum(dim=1) * features.shape[2]).clamp(min=1)
            mean = (total / count)[:, None, None]
            # padding stays as collate left it (zeros): frequency masks span all frames
            mask &= valid[:, :, None]
        return torch.where(mask, mean.to(features.dtype), features)
