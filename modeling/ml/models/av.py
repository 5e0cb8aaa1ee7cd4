"""Audio-visual captioner with a cross-modal encoder and MBP (Shen et al. 2023, MODELS.md 5).

- Audio: log-mel frames (at most ``max_frames``; longer clips are linearly down-sampled to it)
  cut into 1-D patches along time (``patch_frames`` x all mel bins; 1 frame in the paper),
  projected to D with a learnable position embedding, a Transformer, then average-pooled over
  time by ``audio_pool`` (256 frames -> N_a = 64 tokens).
- Video: precomputed video tokens (paper: Video Swin, 8 x 7 x 7 = 392 per clip) -> linear to D.
- Cross-modal encoder: position and token-type embeddings, then ``fusion_layers`` layers of
  one of four fusions (eq. 9-12, see ``FusionLayer``).
- Decoder: Transformer decoder with a causal mask over the fused tokens of both modalities.
- MBP (eq. 2-6), in pre-training only: ``pretrain_loss`` (the trainer's pre-training stage,
  over the captions) adds ``w_a L_a + w_v L_v``, the losses with the video (resp. audio)
  embeddings zeroed, weighted by ``modeling.ml.mbp.ModalityBalancer``; fine-tuning (caption
  training) is the plain caption loss.

Not reproduced: the paper's second pre-training task (predicting the *next* caption after a
BOS2 token) needs consecutive captions of one video, which an audio-captioning corpus does
not have; only the current-caption task (BOS1, our <bos>) is trained.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_av import AVConfig
from modeling.ml.mbp import ModalityBalancer
from modeling.ml.models.act import embed_caption_prefix
from modeling.ml.models.adaava import cross_attend
from modeling.ml.models.base import Batch, Captioner, Memory, State, caption_loss, lengths_to_mask
from modeling.ml.video import FrameCNN
from modeling.ml.vocab import PAD_ID

FusionKind = Literal["merged", "cross", "global_cross", "local_global"]
AUDIO, VIDEO = 0, 1  # token types


# audio encoder -----------------------------------------------------------------------------


def downsample_long_clips(
    features: Tensor, lengths: Tensor, max_frames: int
) -> tuple[Tensor, Tensor]:
    """Clips longer than ``max_frames`` are linearly resampled to exactly ``max_frames``
    frames; shorter ones are left alone (and padded as before)."""
    if int(lengths.max()) <= max_frames:
        return features[:, : int(lengths.max())], lengths
    out = features.new_zeros(features.size(0), max_frames, features.size(2))
    for row, n in enumerate(lengths.tolist()):
        clip = features[row, :n]
        if n > max_frames:
            clip = F.interpolate(
                clip.T.unsqueeze(0), size=max_frames, mode="linear", align_corners=True
            )[0].T
        out[row, : clip.size(0)] = clip
    return out, lengths.clamp(max=max_frames)


def masked_pool(x: Tensor, lengths: Tensor, factor: int) -> tuple[Tensor, Tensor]:
    """Average (B, T, D) over non-overlapping windows of ``factor`` steps, counting only real
    steps; -> (B, ceil(T / factor), D) and the pooled lengths."""
    b, t, d = x.shape
    n = math.ceil(t / factor)
    mask = lengths_to_mask(lengths, t).unsqueeze(-1).to(x.dtype)
    x = F.pad(x * mask, (0, 0, 0, n * factor - t)).reshape(b, n, factor, d).sum(2)
    counts = F.pad(mask, (0, 0, 0, n * factor - t)).reshape(b, n, factor, 1).sum(2)
    pooled_lengths = torch.div(lengths + factor - 1, factor, rounding_mode="floor")
    return x / counts.clamp(min=1), pooled_lengths


class AudioTransformer(nn.Module):
    """(B, T, F) log-mel -> (B, N_a, D) tokens with a 1-D (time-only) patch layout."""

    def __init__(self, config: AVConfig) -> None:
        super().__init__()
        self.config = config
        width = config.width
        self.max_patches = math.ceil(config.max_frames / config.patch_frames)
        self.project = nn.Linear(config.patch_frames * config.feature_dim, width)
        self.position = nn.Parameter(torch.zeros(1, self.max_patches, width))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.dropout = nn.Dropout(config.dropout)
        block = nn.TransformerEncoderLayer(
            width,
            config.audio_heads,
            config.ff_mult * width,
            config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(
            block, config.audio_layers, norm=nn.LayerNorm(width), enable_nested_tensor=False
        )

    @property
    def max_tokens(self) -> int:
        return math.ceil(self.max_patches / self.config.audio_pool)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """-> tokens (B, N_a, D), mask (B, N_a) True on real tokens."""
        cfg = self.config
        if features.dim() != 3 or features.size(2) != cfg.feature_dim:
            raise ValueError(
                f"audio features must be (B, T, {cfg.feature_dim}), got {tuple(features.shape)}"
            )
        features, lengths = downsample_long_clips(features, lengths, cfg.max_frames)
        b, t, f = features.shape
        p = math.ceil(t / cfg.patch_frames)
        x = features.masked_fill(~lengths_to_mask(lengths, t).unsqueeze(-1), 0.0)
        x = F.pad(x, (0, 0, 0, p * cfg.patch_frames - t)).reshape(b, p, cfg.patch_frames * f)
        x = self.dropout(self.project(x) + self.position[:, :p])
        patch_lengths = torch.div(
            lengths + cfg.patch_frames - 1, cfg.patch_frames, rounding_mode="floor"
        )
        x = self.blocks(x, src_key_padding_mask=~lengths_to_mask(patch_lengths, p))
        tokens, token_lengths = masked_pool(x, patch_lengths, cfg.audio_pool)
        return tokens, lengths_to_mask(token_lengths, tokens.size(1))


# cross-modal encoder ----------------------------------------------------------------------


class AttentionBlock(nn.Module):
    """Pre-norm Transformer block whose queries attend to a given key/value set."""

    def __init__(self, width: int, heads: int, ff_dim: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm_ff = nn.LayerNorm(width)
        self.ff = nn.Sequential(
            nn.Linear(width, ff_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(ff_dim, width)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries: Tensor, keys: Tensor, key_mask: Tensor) -> Tensor:
        """queries (B, Nq, D) attend to keys (B, Nk, D) (key_mask (B, Nk) True on real ones);
        a query whose key set is empty only gets its feed-forward update."""
        context = cross_attend(self.attention, self.norm(queries), self.norm(keys), key_mask)
        x = queries + self.dropout(context)
        return x + self.dropout(self.ff(self.norm_ff(x)))


class FusionLayer(nn.Module):
    """One cross-modal encoder layer.

    merged (eq. 9)        every token attends to [audio ; video]
    cross (eq. 10)        audio tokens attend to video tokens and vice versa (own Transformers)
    global_cross (eq. 11) each modality is [global ; tokens]; it attends to itself plus the
                          other modality's global token only, so local tokens see the other
                          modality only through that summary
    local_global (eq. 12) local tokens: the mean of a local fusion (merged or cross, without
                          the global tokens) and the global cross fusion; global tokens: the
                          global cross fusion
    """

    def __init__(
        self,
        kind: FusionKind,
        width: int,
        heads: int,
        ff_dim: int,
        dropout: float,
        *,
        local: Literal["merged", "cross"] = "merged",
    ) -> None:
        super().__init__()
        self.kind = kind
        self.local = local

        def block() -> AttentionBlock:
            return AttentionBlock(width, heads, ff_dim, dropout)

        match kind:  # a match narrows kind's Literal type (an `in` test would not)
            case "merged" | "cross":
                self.local = kind
        if kind == "merged" or (kind == "local_global" and local == "merged"):
            self.merged = block()
        if kind == "cross" or (kind == "local_global" and local == "cross"):
            self.audio_cross, self.video_cross = block(), block()
        if kind in ("global_cross", "local_global"):
            self.audio_global, self.video_global = block(), block()

    @property
    def uses_global_tokens(self) -> bool:
        return self.kind in ("global_cross", "local_global")

    def local_fusion(
        self, audio: Tensor, audio_mask: Tensor, video: Tensor, video_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        if self.local == "merged":
            tokens = torch.cat([audio, video], dim=1)
            fused = self.merged(tokens, tokens, torch.cat([audio_mask, video_mask], dim=1))
            return fused[:, : audio.size(1)], fused[:, audio.size(1) :]
        return (
            self.audio_cross(audio, video, video_mask),
            self.video_cross(video, audio, audio_mask),
        )

    def global_fusion(
        self,
        audio: Tensor,
        audio_mask: Tensor,
        video: Tensor,
        video_mask: Tensor,
        audio_global: Tensor,
        video_global: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """-> audio, video, audio global, video global after eq. 11."""
        one = audio_mask.new_ones(audio_mask.size(0), 1)
        audio_side = torch.cat([audio_global, audio], dim=1)
        video_side = torch.cat([video_global, video], dim=1)
        audio_out = self.audio_global(
            audio_side,
            torch.cat([audio_side, video_global], dim=1),
            torch.cat([one, audio_mask, one], dim=1),
        )
        video_out = self.video_global(
            video_side,
            torch.cat([video_side, audio_global], dim=1),
            torch.cat([one, video_mask, one], dim=1),
        )
        return audio_out[:, 1:], video_out[:, 1:], audio_out[:, :1], video_out[:, :1]

    def forward(
        self,
        audio: Tensor,
        audio_mask: Tensor,
        video: Tensor,
        video_mask: Tensor,
        audio_global: Tensor | None = None,
        video_global: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        if self.kind in ("merged", "cross"):
            audio, video = self.local_fusion(audio, audio_mask, video, video_mask)
            return audio, video, audio_global, video_global
        if audio_global is None or video_global is None:
            raise ValueError(f"{self.kind} fusion needs the global tokens")
        g_audio, g_video, audio_global, video_global = self.global_fusion(
            audio, audio_mask, video, video_mask, audio_global, video_global
        )
        if self.kind == "global_cross":
            return g_audio, g_video, audio_global, video_global
        l_audio, l_video = self.local_fusion(audio, audio_mask, video, video_mask)
        return (l_audio + g_audio) / 2, (l_video + g_video) / 2, audio_global, video_global


# the captioner ---------------------------------------------------------------------------


class AVCaptioner(Captioner):
    """Audio Transformer + video tokens -> cross-modal encoder -> Transformer decoder."""

    config: AVConfig
    uses_video: ClassVar[bool] = True
    # pre-training (MBP) learns captions, as fine-tuning does: every caption, not one per clip
    pretrain_per_caption: ClassVar[bool] = True

    def __init__(self, config: AVConfig) -> None:
        super().__init__()
        self.config = config
        d = config.width
        if config.fusion not in ("merged", "cross", "global_cross", "local_global"):
            raise ValueError(f"unknown fusion {config.fusion!r}")
        self.audio_encoder = AudioTransformer(config)
        # raw frames: a trainable CNN per frame first (no pretrained video encoder)
        self.video_frames = (
            FrameCNN(config.video_frame_size, config.video_dim) if config.video_frame_size else None
        )
        self.video_project = nn.Linear(config.video_dim, d)
        self.audio_position = nn.Parameter(torch.zeros(1, self.audio_encoder.max_tokens, d))
        self.video_position = nn.Parameter(torch.zeros(1, config.max_video_tokens, d))
        self.token_type = nn.Embedding(2, d)
        for param in (self.audio_position, self.video_position):
            nn.init.trunc_normal_(param, std=0.02)
        ff_dim = config.ff_mult * d
        self.fusion_layers = nn.ModuleList(
            FusionLayer(
                config.fusion,
                d,
                config.fusion_heads,
                ff_dim,
                config.dropout,
                local=config.local_fusion,
            )
            for _ in range(config.fusion_layers)
        )
        self.uses_global_tokens = config.fusion in ("global_cross", "local_global")
        if self.uses_global_tokens:
            self.audio_global = nn.Parameter(torch.zeros(1, 1, d))
            self.video_global = nn.Parameter(torch.zeros(1, 1, d))
            nn.init.trunc_normal_(self.audio_global, std=0.02)
            nn.init.trunc_normal_(self.video_global, std=0.02)
        self.fusion_norm = nn.LayerNorm(d)
        self.embedding = nn.Embedding(config.vocab_size, d, padding_idx=PAD_ID)
        self.position = nn.Parameter(torch.zeros(1, config.max_caption_length, d))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.dropout = nn.Dropout(config.dropout)
        block = nn.TransformerDecoderLayer(
            d,
            config.decoder_heads,
            ff_dim,
            config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.decoder = nn.TransformerDecoder(block, config.decoder_layers, norm=nn.LayerNorm(d))
        self.out = nn.Linear(d, config.vocab_size)
        self.balancer = (
            ModalityBalancer(alpha=config.mbp_alpha, beta=config.mbp_beta) if config.mbp else None
        )

    @property
    def max_prefix_length(self) -> int | None:
        return self.config.max_caption_length

    # -------------------------------------------------------------- encoders

    def embed(self, batch: Batch) -> dict[str, Tensor]:
        """Unimodal embeddings phi^a (B, N_a, D), phi^v (B, N_v, D) and their masks."""
        if "video" not in batch or "video_lengths" not in batch:
            raise ValueError("the audio-visual captioner needs batch['video'] and video_lengths")
        audio, audio_mask = self.audio_encoder(batch["features"], batch["feature_lengths"])
        video_in = batch["video"]
        if video_in.size(1) > self.config.max_video_tokens:
            raise ValueError(
                f"video of {video_in.size(1)} tokens exceeds "
                f"max_video_tokens={self.config.max_video_tokens}"
            )
        video_mask = lengths_to_mask(batch["video_lengths"], video_in.size(1))
        if self.video_frames is not None:
            video_in = self.video_frames(video_in, video_mask)
        video = self.video_project(video_in.masked_fill(~video_mask.unsqueeze(-1), 0.0))
        return {"audio": audio, "audio_mask": audio_mask, "video": video, "video_mask": video_mask}

    def fuse(self, embedded: dict[str, Tensor]) -> Memory:
        """Cross-modal encoder -> {"tokens" (B, N, D), "mask" (B, N)} for the decoder."""
        audio, video = embedded["audio"], embedded["video"]
        audio_mask, video_mask = embedded["audio_mask"], embedded["video_mask"]
        b = audio.size(0)
        audio = audio + self.audio_position[:, : audio.size(1)] + self.token_type.weight[AUDIO]
        video = video + self.video_position[:, : video.size(1)] + self.token_type.weight[VIDEO]
        audio_global = video_global = None
        if self.uses_global_tokens:
            audio_global = self.audio_global.expand(b, -1, -1) + self.token_type.weight[AUDIO]
            video_global = self.video_global.expand(b, -1, -1) + self.token_type.weight[VIDEO]
        audio, video = self.dropout(audio), self.dropout(video)
        for layer in self.fusion_layers:
            audio, video, audio_global, video_global = layer(
                audio, audio_mask, video, video_mask, audio_global, video_global
            )
        parts, masks = [audio, video], [audio_mask, video_mask]
        if audio_global is not None and video_global is not None:
            one = audio_mask.new_ones(b, 1)
            parts = [audio_global, audio, video_global, video]
            masks = [one, audio_mask, one, video_mask]
        return {
            "tokens": self.fusion_norm(torch.cat(parts, dim=1)),
            "mask": torch.cat(masks, dim=1),
        }

    def encode(self, batch: Batch) -> Memory:
        return self.fuse(self.embed(batch))

    # -------------------------------------------------------------- decoder

    def _decode(self, memory: Memory, tokens: Tensor) -> Tensor:
        x, causal = embed_caption_prefix(
            tokens, embedding=self.embedding, position=self.position, dropout=self.dropout
        )
        h = self.decoder(
            x,
            memory["tokens"],
            tgt_mask=causal,
            tgt_is_causal=True,
            memory_key_padding_mask=~memory["mask"],
        )
        return self.out(h)

    def forward(self, batch: Batch) -> Tensor:
        return self._decode(self.encode(batch), batch["tokens"])

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        logits = self._decode(memory, tokens)[:, -1]
        return torch.log_softmax(logits.float(), dim=-1), {}

    # -------------------------------------------------------------- MBP

    def pretrain_loss(
        self, batch: Batch, *, label_smoothing: float = 0.0
    ) -> tuple[Tensor, dict[str, float]]:
        """The pre-training stage's loss and the figures to log for this step.

        Without MBP: the caption cross-entropy. With MBP (eq. 2-6): ``L + w_a L_a + w_v L_v``,
        L_a with the video embeddings zeroed and L_v with the audio embeddings zeroed (the
        unimodal embeddings, before position and token-type embeddings are added); the weights
        are updated every call in training mode and returned with the losses.
        """
        tokens = batch["tokens"]
        embedded = self.embed(batch)

        def loss_with(parts: dict[str, Tensor]) -> Tensor:
            logits = self._decode(self.fuse(parts), tokens)
            return caption_loss(logits.float(), tokens, label_smoothing=label_smoothing)

        loss = loss_with(embedded)
        if self.balancer is None:
            return loss, {"loss": float(loss.detach())}
        loss_audio = loss_with(dict(embedded, video=torch.zeros_like(embedded["video"])))
        loss_video = loss_with(dict(embedded, audio=torch.zeros_like(embedded["audio"])))
        total = self.balancer(loss, loss_audio, loss_video)
        return total, {"loss": float(total.detach()), **self.balancer.last}
