"""Audio feature settings, without the extraction (no torch): `FeatureConfig`, its cache key
and the named front ends models were trained on (`feature_preset`). Run planning reads these in
the web process; `modeling.ml.features` extracts the features and re-exports every name here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import ClassVar

from modeling.ml.dataclass_dict import DictRoundTrip

# Bumped whenever `modeling.ml.features.extract` changes its output for the same config, so
# old cache entries stop matching instead of being served silently.
FEATURE_CODE_VERSION = 1

KINDS = ("logmel", "mfcc", "fbank")
LOGS = ("ln", "db")


@dataclass(frozen=True)
class FeatureConfig(DictRoundTrip):
    config_name: ClassVar[str] = "feature config"

    kind: str = "logmel"  # logmel | mfcc | fbank (Kaldi-compatible, as AST was trained on)
    sample_rate: int = 32_000  # audio is resampled to this rate first
    n_fft: int = 1024  # FFT size in samples
    win_length: int = 1024  # analysis window in samples (Hann; Hamming-free)
    hop_length: int = 640  # frame shift in samples; frames per second = sample_rate / hop
    n_mels: int = 64  # mel bands
    n_mfcc: int = 20  # cepstral coefficients kept (kind="mfcc" only)
    f_min: float = 0.0  # lowest mel band edge in Hz
    f_max: float | None = None  # highest mel band edge in Hz; None = sample_rate / 2
    power: float = 2.0  # 2 = power spectrogram, 1 = magnitude (VGGish, YAMNet)
    mel_scale: str = "htk"  # htk | slaney (librosa's default, used by PANNs)
    mel_norm: str | None = None  # None | "slaney" (area-normalised triangles, PANNs)
    center: bool = True  # pad the signal by n_fft/2 on both sides (torch.stft's center)
    log: str = "ln"  # ln: log(mel + log_offset); db: 10*log10(max(mel, log_offset))
    log_offset: float = 1e-6  # added before the log (ln) or the floor (db)
    # db only: values more than this many dB below the clip's loudest are raised to that
    # floor (librosa's power_to_db(top_db=80), which ACT's released code uses); None: no floor
    top_db: float | None = None
    # drop each clip's last frame (ACT's released code: feature[:-1], so that 10 s give 500
    # frames, 125 patches of 4)
    drop_last_frame: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.log not in LOGS:
            problems.append(f"log {self.log!r} is not one of {', '.join(LOGS)}")
        if self.mel_scale not in ("htk", "slaney"):
            problems.append(f"mel_scale {self.mel_scale!r} is not htk or slaney")
        if self.mel_norm not in (None, "slaney"):
            problems.append(f"mel_norm {self.mel_norm!r} is not None or 'slaney'")
        if self.win_length > self.n_fft:
            problems.append(f"win_length {self.win_length} exceeds n_fft {self.n_fft}")
        if min(self.sample_rate, self.n_fft, self.win_length, self.hop_length, self.n_mels) <= 0:
            problems.append("sample_rate, n_fft, win_length, hop_length and n_mels must be > 0")
        if self.kind == "mfcc" and not 0 < self.n_mfcc <= self.n_mels:
            problems.append(f"n_mfcc {self.n_mfcc} must be in 1..n_mels ({self.n_mels})")
        if self.log_offset <= 0:
            problems.append("log_offset must be > 0")
        if self.top_db is not None and (self.log != "db" or self.top_db <= 0):
            problems.append("top_db needs log 'db' and a value > 0")
        if problems:
            raise ValueError("Bad feature config: " + "; ".join(problems) + ".")

    @property
    def n_features(self) -> int:
        return self.n_mfcc if self.kind == "mfcc" else self.n_mels

    @property
    def frames_per_second(self) -> float:
        return self.sample_rate / self.hop_length

    def num_frames(self, num_samples: int) -> int:
        """Frames `extract` returns for `num_samples` samples already at `sample_rate`."""
        if self.kind == "fbank":
            frames = max(0, 1 + (num_samples - self.win_length) // self.hop_length)
        elif self.center:
            frames = 1 + num_samples // self.hop_length
        else:
            frames = max(0, 1 + (num_samples - self.n_fft) // self.hop_length)
        return max(0, frames - 1) if self.drop_last_frame else frames

    def key(self) -> str:
        """A stable 16-hex-digit hash of every field (and the code version): the cache key."""
        fields = self.to_dict()
        # added later: the configs without them keep the keys they had
        if fields["top_db"] is None:
            del fields["top_db"]
        if not fields["drop_last_frame"]:
            del fields["drop_last_frame"]
        payload = json.dumps(
            {"v": FEATURE_CODE_VERSION, **fields}, sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


# Presets -------------------------------------------------------------------------------

# ACT (Liu et al.): 32 kHz, 1024-point Hann window, hop 640 (50 frames/s), 64 mels.
ACT = FeatureConfig()
# ACT's released front end (XinhaoMei/ACT data_handling/audiocaps_dataset.py:44-46, librosa's
# melspectrogram and power_to_db defaults): the same STFT as ACT, Slaney mel scale and
# normalisation, dB with an 80 dB floor below each clip's loudest bin, the last frame dropped.
ACT_CODE = FeatureConfig(
    mel_scale="slaney",
    mel_norm="slaney",
    log="db",
    log_offset=1e-10,
    top_db=80.0,
    drop_last_frame=True,
)
# AudioCaps' MFCC baseline feature (Kim et al.): 16 kHz, 25 ms window, 10 ms hop.
AUDIOCAPS_MFCC = FeatureConfig(
    kind="mfcc", sample_rate=16_000, n_fft=512, win_length=400, hop_length=160, n_mels=64
)
# VGGish's front end: 16 kHz, 25 ms periodic Hann, 10 ms hop, magnitude STFT, 64 HTK mels
# between 125 and 7500 Hz, log(mel + 0.01), no centre padding.
VGGISH = FeatureConfig(
    sample_rate=16_000,
    n_fft=512,
    win_length=400,
    hop_length=160,
    f_min=125.0,
    f_max=7500.0,
    power=1.0,
    center=False,
    log_offset=0.01,
)
# YAMNet: as VGGish but log(mel + 0.001).
YAMNET = replace(VGGISH, log_offset=0.001)
# PANNs (CNN14, ResNet38): 32 kHz, 1024 window, hop 320, 64 Slaney mels 50-14000 Hz, in dB.
PANNS = FeatureConfig(
    hop_length=320,
    f_min=50.0,
    f_max=14_000.0,
    mel_scale="slaney",
    mel_norm="slaney",
    log="db",
    log_offset=1e-10,
)
# AST: Kaldi fbank, 16 kHz, 25 ms / 10 ms, 128 bins.
AST = FeatureConfig(
    kind="fbank",
    sample_rate=16_000,
    n_fft=512,
    win_length=400,
    hop_length=160,
    n_mels=128,
    f_min=20.0,
)
# The BiLSTM captioner's SpecAugment (time <= 192 frames, frequency <= 48 bins) is sized
# for AST's 128-bin, 100 frames/s input; it reads AST-style features.
BILSTM = AST
# Audio-visual captioner (Shen et al.): 22,050 Hz, 1536-sample frames, hop 588, 64 mels.
AV = FeatureConfig(sample_rate=22_050, n_fft=1536, win_length=1536, hop_length=588)

PRESETS: dict[str, FeatureConfig] = {
    "act": ACT,
    "act_code": ACT_CODE,
    "audiocaps_mfcc": AUDIOCAPS_MFCC,
    "vggish": VGGISH,
    "yamnet": YAMNET,
    "panns": PANNS,
    "ast": AST,
    "bilstm": BILSTM,
    "av": AV,
}


def feature_preset(name: str) -> FeatureConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"Unknown feature preset {name!r}; known presets: {', '.join(sorted(PRESETS))}."
        ) from None
