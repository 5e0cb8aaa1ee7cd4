"""Video features: frames sampled with ffmpeg, encoded by a torchvision model or kept as small
pixel frames for a trainable CNN, and a content-addressed disk cache. No Django here.

Shapes: ``read_frames`` gives ``(Tv, S, S, 3)`` uint8 RGB; a clip's video features are
``(Tv', Fv)`` float32, where Tv' is Tv for per-frame encoders and the number of chunks of
``chunk_frames`` frames for clip encoders (S3D, Swin3D-T). Encoders (``VideoConfig.encoder``):

    frames     no network: each frame's pixels, (3, S, S) flattened to 3 S^2 values in [0, 1],
               for the models' trainable ``FrameCNN`` (set the model's video_frame_size = S)
    resnet18   torchvision ResNet-18 per frame, pooled 512-d (ImageNet normalisation)
    resnet50   torchvision ResNet-50 per frame, pooled 2048-d
    s3d        torchvision S3D per chunk, pooled 1024-d (the V-ACT paper's encoder)
    swin3d_t   torchvision Swin3D-T per chunk, pooled 768-d (the AV paper's Video Swin, tiny)

Pretrained weights load from a local file (``VideoConfig.weights``: a torchvision state dict of
the full model, head included, e.g. ``resnet18-f37072fd.pth``); these machines cannot download
them. Without a weights file the network keeps its random initialisation, which is only good
for tests: a run without weights should use ``frames``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from curation.ffmpeg_input import input_args, refused_format

# the settings live in config_video (no torch, so run planning reads them in the web
# process); every name is re-exported here for the code that encodes
from modeling.ml.config_video import ENCODERS, VIDEO_CODE_VERSION, VideoConfig  # noqa: F401
from modeling.ml.features import _atomic_write, load_npy, sha256_file

# Frames ------------------------------------------------------------------------------------


def read_frames(path: Path | str, config: VideoConfig) -> np.ndarray:
    """(Tv, S, S, 3) uint8 RGB frames of the video at ``config.fps``, scaled to cover S x S
    and centre-cropped, at most ``max_frames`` of them (evenly spaced). A video without
    frames gives Tv = 0; a file ffmpeg cannot decode raises ValueError naming it.

    The video may come from a stranger (a fetched or imported clip), so ffmpeg opens it as
    one local file in a media container (curation.ffmpeg_input): a playlist (HLS, concat)
    would otherwise put the frames of other files on this server, or of URLs, into the
    features."""
    s = config.size
    command = [
        "ffmpeg",
        "-nostdin",
        "-v",
        "error",
        *input_args(path),
        "-an",
        "-vf",
        f"fps={config.fps},scale={s}:{s}:force_original_aspect_ratio=increase,crop={s}:{s}",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "pipe:1",
    ]
    try:
        done = subprocess.run(command, capture_output=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"{path}: cannot run ffmpeg to read the video ({exc})") from None
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace")
        refused = refused_format(stderr)
        if refused:
            raise ValueError(
                f"{path}: cannot decode video (a {refused} file, which Earmark does not read: "
                "it could make ffmpeg open other files; send MP4, MOV, WebM or MKV video)"
            )
        detail = stderr.strip().splitlines()
        raise ValueError(f"{path}: cannot decode video ({detail[-1] if detail else 'ffmpeg'})")
    frame_bytes = s * s * 3
    count = len(done.stdout) // frame_bytes
    frames = np.frombuffer(done.stdout[: count * frame_bytes], np.uint8).reshape(count, s, s, 3)
    if count > config.max_frames:
        frames = frames[np.linspace(0, count - 1, config.max_frames).round().astype(int)]
    return frames.copy()  # writable, so torch can wrap it


def pixel_features(frames: np.ndarray) -> Tensor:
    """(Tv, S, S, 3) uint8 -> (Tv, 3 S^2) float in [0, 1], channel-first per frame."""
    pixels = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)
    return pixels.reshape(pixels.size(0), -1).float() / 255.0


# Encoders ----------------------------------------------------------------------------------


def _torchvision_model(name: str) -> nn.Module:
    from torchvision import models
    from torchvision.models import video

    factories = {
        "resnet18": models.resnet18,
        "resnet50": models.resnet50,
        "s3d": video.s3d,
        "swin3d_t": video.swin3d_t,
    }
    return factories[name](weights=None)


def _load_state(model: nn.Module, path: str, name: str) -> None:
    if not Path(path).is_file():
        raise ValueError(f"video encoder {name}: no weights file at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a foreign file
        raise ValueError(f"video encoder {name}: {path} is not a readable weights file") from exc
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:300]
        raise ValueError(f"video encoder {name}: {path} does not fit ({detail})") from exc


class PretrainedVideoEncoder(nn.Module):
    """A torchvision image or video classifier without its head: frames -> features."""

    # buffers (register_buffer in __init__): the network's per-channel input normalisation
    mean: Tensor
    std: Tensor

    def __init__(self, config: VideoConfig) -> None:
        super().__init__()
        if config.encoder == "frames":
            raise ValueError("the frames encoder has no network")
        self.config = config
        dim, mean, std, self.per_chunk = ENCODERS[config.encoder]
        self.dim = dim
        model = _torchvision_model(config.encoder)
        if config.weights:
            _load_state(model, config.weights, config.encoder)
        # the head goes after loading, so a complete torchvision file loads strictly
        if config.encoder.startswith("resnet"):
            model.fc = nn.Identity()
        elif config.encoder == "swin3d_t":
            model.head = nn.Identity()
        self.model = model.eval()
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def _network(self, x: Tensor) -> Tensor:
        if self.config.encoder == "s3d":
            # S3D's features, averaged over time and space (its classifier is a 1x1 conv)
            return self.model.features(x).mean(dim=(2, 3, 4))  # type: ignore[operator]
        return self.model(x)

    @torch.no_grad()
    def forward(self, frames: Tensor) -> Tensor:
        """(Tv, S, S, 3) uint8 -> (Tv, F) per frame, or (ceil(Tv / chunk), F) per chunk."""
        if frames.size(0) == 0:
            return torch.zeros(0, self.dim)
        device = self.mean.device
        x = (frames.to(device).permute(0, 3, 1, 2).float() / 255.0 - self.mean) / self.std
        if not self.per_chunk:
            parts = [self._network(part) for part in x.split(self.config.batch_size)]
            return torch.cat(parts).float().cpu()
        chunk = self.config.chunk_frames
        missing = -x.size(0) % chunk
        if missing:  # the last chunk repeats the last frame
            x = torch.cat([x, x[-1:].expand(missing, -1, -1, -1)])
        clips = x.reshape(-1, chunk, *x.shape[1:]).permute(0, 2, 1, 3, 4)  # N, 3, T, S, S
        parts = [self._network(part) for part in clips.split(self.config.batch_size)]
        return torch.cat(parts).float().cpu()


def video_encoder(config: VideoConfig) -> PretrainedVideoEncoder | None:
    """The network of ``config.encoder`` on its device, or None for ``frames``."""
    if config.encoder == "frames":
        return None
    if config.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(config.device)
    return PretrainedVideoEncoder(config).to(device)


def encode_frames(
    frames: np.ndarray, config: VideoConfig, encoder: PretrainedVideoEncoder | None
) -> Tensor:
    """Video features (Tv', Fv) of (Tv, S, S, 3) frames."""
    if config.encoder == "frames":
        return pixel_features(frames)
    if encoder is None:
        raise ValueError(f"video encoder {config.encoder} needs its network")
    return encoder(torch.from_numpy(np.ascontiguousarray(frames)))


class FrameCNN(nn.Module):
    """Trainable frame encoder for ``frames`` video features: (B, Tv, 3 S^2) in [0, 1] ->
    (B, Tv, out_dim). Strided conv blocks halve the frame side down to 4 x 4 or less, then
    global average pooling and a linear layer; every frame is encoded on its own."""

    def __init__(self, size: int, out_dim: int, width: int = 32) -> None:
        super().__init__()
        if size < 8:
            raise ValueError(f"frame size must be at least 8 pixels, got {size}")
        self.size = size
        layers: list[nn.Module] = []
        channels, side = 3, size
        while side > 4:
            layers += [
                nn.Conv2d(channels, width, 3, stride=2, padding=1),
                nn.BatchNorm2d(width),
                nn.ReLU(inplace=True),
            ]
            channels, side = width, (side + 1) // 2
        self.blocks = nn.Sequential(*layers)
        self.out = nn.Linear(width, out_dim)

    def forward(self, pixels: Tensor, mask: Tensor | None = None) -> Tensor:
        """``mask`` (B, Tv) True on real frames: only those are encoded (padding never
        reaches the batch statistics); the others come out as zeros."""
        b, t, values = pixels.shape
        if values != 3 * self.size * self.size:
            raise ValueError(
                f"frames of {self.size}x{self.size} RGB need {3 * self.size**2} values per "
                f"frame, got {values}"
            )
        if mask is None:
            mask = torch.ones(b, t, dtype=torch.bool, device=pixels.device)
        out = pixels.new_zeros(b, t, self.out.out_features)
        real = pixels[mask]
        if real.size(0):
            x = self.blocks(real.reshape(-1, 3, self.size, self.size))
            out[mask] = self.out(x.mean(dim=(2, 3))).to(out.dtype)
        return out


# Cache -------------------------------------------------------------------------------------


class VideoFeatureCache:
    """Video features on disk, one ``.npy`` per video under ``root/video-<key>/<sha[:2]>/
    <sha>.npy``, keyed by the video file's content hash and the config (and the weights'
    hash), like ``modeling.ml.features.FeatureCache``. Pixel frames are stored as uint8."""

    def __init__(self, root: Path | str, config: VideoConfig) -> None:
        self.root = Path(root)
        self.config = config
        if config.weights and not Path(config.weights).is_file():
            raise ValueError(f"video encoder {config.encoder}: no weights file at {config.weights}")
        weights_sha = sha256_file(config.weights) if config.weights else ""
        self.folder = self.root / f"video-{config.key(weights_sha)}"
        self._encoder: PretrainedVideoEncoder | None = None
        self.hits = 0
        self.misses = 0

    def path_for(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a lower-case hex sha256: {sha256!r}")
        return self.folder / sha256[:2] / f"{sha256}.npy"

    def get(self, sha256: str) -> Tensor | None:
        try:
            array = load_npy(self.path_for(sha256))
        except FileNotFoundError:
            return None
        except (ValueError, OSError, EOFError):
            return None  # damaged: recomputed and replaced
        if array.ndim != 2 or array.shape[1] != self.config.feature_dim:
            return None
        if array.dtype == np.uint8:
            return torch.from_numpy(array).float() / 255.0
        return torch.from_numpy(array.astype(np.float32, copy=False))

    def put(self, sha256: str, frames: np.ndarray | None, features: Tensor) -> None:
        path = self.path_for(sha256)
        if self.config.encoder == "frames" and frames is not None:
            # the exact pixels, a quarter of the size of floats
            array = np.ascontiguousarray(frames).transpose(0, 3, 1, 2).reshape(len(frames), -1)
        else:
            array = features.detach().cpu().numpy().astype(np.float32, copy=False)
        if not (self.folder / "config.json").exists():
            text = json.dumps(self.config.to_dict(), indent=2, sort_keys=True).encode()
            _atomic_write(self.folder / "config.json", lambda h: h.write(text))
        _atomic_write(path, lambda h: np.save(h, array, allow_pickle=False))

    def get_or_compute(self, path: Path | str, sha256: str | None = None) -> Tensor:
        """Features (Tv', Fv) of the video file at ``path`` (``sha256``: its content hash,
        computed from the file when not given)."""
        sha256 = sha256 or sha256_file(path)
        cached = self.get(sha256)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        frames = read_frames(path, self.config)
        if self.config.encoder != "frames" and self._encoder is None:
            self._encoder = video_encoder(self.config)
        features = encode_frames(frames, self.config, self._encoder)
        self.put(sha256, frames, features)
        return features

    def empty(self) -> Tensor:
        """The features of a clip without video: (0, Fv)."""
        return torch.zeros(0, self.config.feature_dim)
