"""V-ACT (Liu et al. 2023): ACT with video, fused by AdaAVA or by the paper's baselines.

Audio goes through ACT's patch Transformer (``modeling.ml.models.act.PatchEncoder``) and is
projected to d. Video arrives as precomputed frame features (paper: a frozen S3D on 250-frame
chunks, 1024-d) and is projected to d by a trainable linear layer, optionally followed by
Transformer blocks (``video_layers``) when the features come from no strong encoder.

The four fusions share everything else and differ only in the decoder's cross-attention:

    VACTCaptioner        "vact"         AdaAVA, A_conf from audio context (eq. 3)
    VACTVideoCaptioner   "vact_video"   AdaAVA, A_conf from video context (eq. 7)
    ConcatCaptioner      "vact_concat"  one cross-attention over [A ; V]
    VideoOnlyCaptioner   "video_only"   one cross-attention over V; no audio encoder

The fusion is a class attribute, not a config field, so a registry name always builds the
model it names (checkpoints store the name).

``VACTConfig.form`` as ACT's (``modeling.ml.models.act``): the "code" form is the released
V-ACT (liuxubo717/V-ACT @ ae8f32e, models/TransModel.py), which adds to ACT's differences a ReLU
after the video projection (TransModel.py:132) and reads [V ; A] concatenated (the order does
not matter to attention: the memory carries no positions). That repository has no AdaAVA code
in any commit (only concatenation, and at HEAD its audio/audio_visual modes fail with shape
errors), so AdaAVA follows the paper's eq. 1-6 inside decoder blocks that match the released
ACT's (post-norm, no final norm; ``modeling.ml.models.adaava``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from modeling.ml.config_av import VACTConfig
from modeling.ml.models.act import PatchEncoder, embed_caption_prefix, transformer_decoder
from modeling.ml.models.adaava import AdaAVADecoderLayer
from modeling.ml.models.base import Batch, Captioner, Memory, State, lengths_to_mask
from modeling.ml.video import FrameCNN
from modeling.ml.vocab import PAD_ID

Fusion = Literal["adaava_audio", "adaava_video", "concat", "video_only"]


class VideoEncoder(nn.Module):
    """(B, Tv, Fv) precomputed video features -> (B, Tv, d) tokens, zero beyond each length."""

    def __init__(self, config: VACTConfig) -> None:
        super().__init__()
        d = config.decoder_dim
        # raw frames: a trainable CNN per frame first (no pretrained video encoder)
        self.frames = (
            FrameCNN(config.video_frame_size, config.video_dim) if config.video_frame_size else None
        )
        self.project = nn.Linear(config.video_dim, d)  # "linear to d = 512"
        self.relu = config.form == "code"  # TransModel.py@ae8f32e:132
        self.blocks: nn.TransformerEncoder | None = None
        if config.video_layers > 0:
            self.position = nn.Parameter(torch.zeros(1, config.max_video_frames, d))
            nn.init.trunc_normal_(self.position, std=0.02)
            block = nn.TransformerEncoderLayer(
                d,
                config.decoder_heads,
                config.ff_mult * d,
                config.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            self.blocks = nn.TransformerEncoder(
                block, config.video_layers, norm=nn.LayerNorm(d), enable_nested_tensor=False
            )
        self.max_frames = config.max_video_frames

    def forward(self, video: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """-> tokens (B, Tv, d), mask (B, Tv) True on real frames (all False without video)."""
        if video.dim() != 3:
            raise ValueError(f"video must be (B, Tv, Fv), got shape {tuple(video.shape)}")
        mask = lengths_to_mask(lengths, video.size(1))
        if self.frames is not None:
            video = self.frames(video, mask)
        x = self.project(video.masked_fill(~mask.unsqueeze(-1), 0.0))
        if self.relu:
            x = torch.relu(x)
        if self.blocks is not None:
            if video.size(1) > self.max_frames:
                raise ValueError(
                    f"video of {video.size(1)} frames exceeds max_video_frames={self.max_frames}"
                )
            # Clips without video keep one (ignored) slot so no attention row is fully masked.
            safe = mask.clone()
            safe[:, 0] = True
            x = self.blocks(x + self.position[:, : x.size(1)], src_key_padding_mask=~safe)
        return x.masked_fill(~mask.unsqueeze(-1), 0.0), mask


class VACTCaptioner(Captioner):
    """ACT audio encoder + video encoder + Transformer decoder with AdaAVA (audio-guided)."""

    config: VACTConfig
    fusion: ClassVar[Fusion] = "adaava_audio"
    uses_video: ClassVar[bool] = True

    def __init__(self, config: VACTConfig) -> None:
        super().__init__()
        self.config = config
        d = config.decoder_dim
        self.uses_audio = self.fusion != "video_only"
        if self.uses_audio:
            self.encoder = PatchEncoder(config)
            self.to_decoder = nn.Linear(config.encoder_dim, d)
        self.video_encoder = VideoEncoder(config)
        self.embedding = nn.Embedding(config.vocab_size, d, padding_idx=PAD_ID)
        self.position = nn.Parameter(torch.zeros(1, config.max_caption_length, d))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.dropout = nn.Dropout(config.dropout)
        ff_dim = config.ff_mult * d
        if self.fusion in ("adaava_audio", "adaava_video"):
            guide: Literal["audio", "video"] = "audio" if self.fusion == "adaava_audio" else "video"
            self.layers = nn.ModuleList(
                AdaAVADecoderLayer(
                    d,
                    config.decoder_heads,
                    ff_dim,
                    config.dropout,
                    beta=config.beta,
                    guide=guide,
                    confidence=config.confidence,
                    norm_first=config.form == "paper",
                )
                for _ in range(config.decoder_layers)
            )
            self.decoder = None
        else:
            # the paper form's final norm is self.norm below, shared with the AdaAVA fusions
            self.decoder = transformer_decoder(config, final_norm=False)
        # The paper form ends with a LayerNorm; the released decoder has none (post-norm).
        self.norm = nn.LayerNorm(d) if config.form == "paper" else nn.Identity()
        self.out = nn.Linear(d, config.vocab_size)

    @property
    def max_prefix_length(self) -> int | None:
        return self.config.max_caption_length

    def encode(self, batch: Batch) -> Memory:
        """-> {"video", "video_mask"} (+ {"audio", "audio_mask"} unless video-only)."""
        if "video" not in batch or "video_lengths" not in batch:
            raise ValueError(f"model fusion '{self.fusion}' needs batch['video'] and video_lengths")
        video, video_mask = self.video_encoder(batch["video"], batch["video_lengths"])
        memory = {"video": video, "video_mask": video_mask}
        if self.uses_audio:
            patches, mask = self.encoder(batch["features"], batch["feature_lengths"])
            audio = self.to_decoder(patches)
            if self.config.form == "code":
                audio = torch.relu(audio)  # TransModel.py@ae8f32e:128
            memory.update(audio=audio, audio_mask=mask)
        return memory

    def _decode(self, memory: Memory, tokens: Tensor) -> Tensor:
        x, causal = embed_caption_prefix(
            tokens, embedding=self.embedding, position=self.position, dropout=self.dropout
        )
        if self.decoder is None:
            for layer in self.layers:
                x = layer(
                    x,
                    memory["audio"],
                    memory["audio_mask"],
                    memory["video"],
                    memory["video_mask"],
                    causal,
                )
        else:
            if self.fusion == "concat":
                keys = torch.cat([memory["audio"], memory["video"]], dim=1)
                mask = torch.cat([memory["audio_mask"], memory["video_mask"]], dim=1)
            else:
                keys, mask = memory["video"], memory["video_mask"]
            # A clip whose memory is empty (video-only, no video) reads one zero slot.
            mask = mask.clone()
            mask[:, 0] |= ~mask.any(dim=1)
            x = self.decoder(
                x, keys, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=~mask
            )
        return self.out(self.norm(x))

    def forward(self, batch: Batch) -> Tensor:
        return self._decode(self.encode(batch), batch["tokens"])

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        # Re-decodes the whole prefix like ACT (no key/value cache).
        logits = self._decode(memory, tokens)[:, -1]
        return torch.log_softmax(logits.float(), dim=-1), {}


class VACTVideoCaptioner(VACTCaptioner):
    """AdaAVA-video: A_conf = sigma(FC([V_cross ; H])) (eq. 7)."""

    fusion: ClassVar[Fusion] = "adaava_video"


class ConcatCaptioner(VACTCaptioner):
    """Concatenation fusion: audio and video tokens form one cross-attention memory."""

    fusion: ClassVar[Fusion] = "concat"


class VideoOnlyCaptioner(VACTCaptioner):
    """Video-only: ACT's decoder over the video tokens; the audio is never read."""

    fusion: ClassVar[Fusion] = "video_only"
