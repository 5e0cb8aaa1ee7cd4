"""Video settings, without the frame reading and encoding (no torch): `VideoConfig`, its cache
key and the video encoders' table. Run planning reads these in the web process;
`modeling.ml.video` (whose docstring describes each encoder) reads and encodes the frames and
re-exports every name here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

from modeling.ml.dataclass_dict import DictRoundTrip

# Bumped whenever frame sampling or encoding changes its output for the same config.
VIDEO_CODE_VERSION = 1

# encoder -> (feature size per frame or chunk, normalisation mean, std, per-chunk?)
ENCODERS: dict[str, tuple[int, tuple[float, ...], tuple[float, ...], bool]] = {
    "frames": (0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), False),
    "resnet18": (512, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), False),
    "resnet50": (2048, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), False),
    "s3d": (1024, (0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989), True),
    "swin3d_t": (768, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), True),
}


@dataclass(frozen=True)
class VideoConfig(DictRoundTrip):
    config_name: ClassVar[str] = "video config"

    # frames | resnet18 | resnet50 | s3d | swin3d_t (see the module docstring)
    encoder: str = "frames"
    # Local file with the encoder's pretrained torchvision weights ("" = random, tests only).
    weights: str = ""
    # Frames sampled per second of video.
    fps: float = 2.0
    # Frame side in pixels: the video is scaled to cover S x S and centre-cropped
    # (ImageNet / Kinetics encoders: 224; the trainable CNN: small, e.g. 32).
    size: int = 32
    # At most this many frames per clip; longer videos are sampled evenly down to it.
    max_frames: int = 32
    # Frames per chunk for the clip encoders (S3D, Swin3D-T): one feature per chunk.
    chunk_frames: int = 16
    # Frames (resnets) or chunks (clip encoders) encoded at once.
    batch_size: int = 32
    # "auto" encodes on cuda when available, else cpu; or a torch device string.
    device: str = "auto"

    def __post_init__(self) -> None:
        problems = []
        if self.encoder not in ENCODERS:
            problems.append(f"encoder {self.encoder!r} is not one of {', '.join(ENCODERS)}")
        if self.fps <= 0:
            problems.append(f"fps must be > 0, got {self.fps}")
        if self.size < 8:
            problems.append(f"size must be at least 8 pixels, got {self.size}")
        if self.max_frames < 1 or self.chunk_frames < 1 or self.batch_size < 1:
            problems.append("max_frames, chunk_frames and batch_size must be >= 1")
        if self.encoder == "frames" and self.weights:
            problems.append("the frames encoder has no weights (it is trained with the model)")
        if problems:
            raise ValueError("Bad video config: " + "; ".join(problems) + ".")

    @property
    def feature_dim(self) -> int:
        """Fv: values per video feature frame."""
        if self.encoder == "frames":
            return 3 * self.size * self.size
        return ENCODERS[self.encoder][0]

    def key(self, weights_sha256: str = "") -> str:
        """16 hex digits naming every field that changes the output (not batch_size or
        device), the code version and the weights file's content hash."""
        fields = {k: v for k, v in self.to_dict().items() if k not in ("batch_size", "device")}
        fields["weights"] = weights_sha256
        payload = json.dumps(
            {"v": VIDEO_CODE_VERSION, **fields}, sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
