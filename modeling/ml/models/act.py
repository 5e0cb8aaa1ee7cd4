"""ACT (Liu et al. 2023): a patch Transformer over log-mels and a Transformer word decoder.

Encoder: the (T, 64) log-mel is cut into non-overlapping patches of ``patch_frames`` x 64 along
time (4 x 64 in the paper), each flattened and linearly projected, plus a learnable positional
embedding, then ViT-style pre-norm blocks; the outputs are projected to the decoder width d.
Decoder: ACT-m, Transformer decoder blocks with causal self-attention and cross-attention to the
audio patches. The paper pretrains the encoder on AudioSet tagging; here it is trained from
scratch unless weights are loaded into it (``modeling.ml.encoders`` handles pretrained ones).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from modeling.ml.config import ACTConfig
from modeling.ml.models.base import Batch, Captioner, Memory, State, lengths_to_mask
from modeling.ml.vocab import PAD_ID


class PatchEncoder(nn.Module):
    """(B, T, F) log-mel frames -> (B, P, d) patch embeddings, P = ceil(T / patch_frames)."""

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.patch_frames = config.patch_frames
        self.max_patches = math.ceil(config.max_frames / config.patch_frames)
        width = config.encoder_dim
        self.project = nn.Linear(config.patch_frames * config.feature_dim, width)
        self.position = nn.Parameter(torch.zeros(1, self.max_patches, width))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.dropout = nn.Dropout(config.dropout)
        block = nn.TransformerEncoderLayer(
            width,
            config.encoder_heads,
            config.ff_mult * width,
            config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        # No nested-tensor fast path: it returns zeros at padded patches only in eval mode, and
        # train/eval must compute the same function for the padding-invariance guarantee.
        self.blocks = nn.TransformerEncoder(
            block, config.encoder_layers, norm=nn.LayerNorm(width), enable_nested_tensor=False
        )

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """-> patches (B, P, width), patch mask (B, P) True on patches holding real frames."""
        b, t, f = features.shape
        p = math.ceil(t / self.patch_frames)
        if p > self.max_patches:
            raise ValueError(
                f"clip of {t} frames exceeds max_frames={self.max_patches * self.patch_frames}"
            )
        # Zero everything past each clip's end so a partly filled last patch looks the same
        # however much padding the batch added after it.
        frame_mask = lengths_to_mask(lengths, t).unsqueeze(-1)
        x = features.masked_fill(~frame_mask, 0.0)
        x = nn.functional.pad(x, (0, 0, 0, p * self.patch_frames - t))
        x = x.reshape(b, p, self.patch_frames * f)
        x = self.dropout(self.project(x) + self.position[:, :p])
        patch_lengths = torch.div(
            lengths + self.patch_frames - 1, self.patch_frames, rounding_mode="floor"
        )
        mask = lengths_to_mask(patch_lengths, p)
        return self.blocks(x, src_key_padding_mask=~mask), mask


class ACTCaptioner(Captioner):
    """Patch-Transformer audio encoder + Transformer decoder (ACT-m)."""

    config: ACTConfig

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.config = config
        d = config.decoder_dim
        self.encoder = PatchEncoder(config)
        self.to_decoder = nn.Linear(config.encoder_dim, d)  # "features projected to d=512"
        self.embedding = nn.Embedding(config.vocab_size, d, padding_idx=PAD_ID)
        self.position = nn.Parameter(torch.zeros(1, config.max_caption_length, d))
        nn.init.trunc_normal_(self.position, std=0.02)
        self.dropout = nn.Dropout(config.dropout)
        block = nn.TransformerDecoderLayer(
            d,
            config.decoder_heads,
            config.ff_mult * d,
            config.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.decoder = nn.TransformerDecoder(block, config.decoder_layers, norm=nn.LayerNorm(d))
        self.out = nn.Linear(d, config.vocab_size)

    @property
    def max_prefix_length(self) -> int | None:
        return self.config.max_caption_length

    def encode(self, batch: Batch) -> Memory:
        """-> {"audio": (B, P, d), "mask": (B, P)}."""
        patches, mask = self.encoder(batch["features"], batch["feature_lengths"])
        return {"audio": self.to_decoder(patches), "mask": mask}

    def _decode(self, memory: Memory, tokens: Tensor) -> Tensor:
        x, causal = embed_caption_prefix(
            tokens, embedding=self.embedding, position=self.position, dropout=self.dropout
        )
        # No key-padding mask on the words: the causal mask already keeps every real position
        # from seeing the <pad> tokens after it, and a padding mask would give fully masked rows.
        h = self.decoder(
            x,
            memory["audio"],
            tgt_mask=causal,
            tgt_is_causal=True,
            memory_key_padding_mask=~memory["mask"],
        )
        return self.out(h)

    def forward(self, batch: Batch) -> Tensor:
        return self._decode(self.encode(batch), batch["tokens"])

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        # The whole prefix is re-decoded each step (no key/value cache): captions are ~20 words,
        # so the quadratic cost is small next to the encoder, and the code stays obviously right.
        logits = self._decode(memory, tokens)[:, -1]
        return torch.log_softmax(logits.float(), dim=-1), {}


def embed_caption_prefix(
    tokens: Tensor, *, embedding: nn.Embedding, position: Tensor, dropout: nn.Dropout
) -> tuple[Tensor, Tensor]:
    """tokens (B, L) -> word vectors with learned positions (B, L, d), causal mask (L, L).

    The transformer decoders (ACT, V-ACT, the audio-visual models) share this front; ``position``
    (1, max_caption_length, d) bounds how long a caption may be.
    """
    length, limit = tokens.size(1), position.size(1)
    if length > limit:
        raise ValueError(f"caption of {length} tokens exceeds max_caption_length={limit}")
    x = dropout(embedding(tokens) + position[:, :length])
    causal = nn.Transformer.generate_square_subsequent_mask(
        length, device=tokens.device, dtype=x.dtype
    )
    return x, causal
