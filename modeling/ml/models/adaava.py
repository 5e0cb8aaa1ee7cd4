"""Adaptive audio-visual attention (AdaAVA, Liu et al. 2023, eq. 1-7) and its decoder block.

A V-ACT decoder block replaces the Transformer decoder's single cross-attention by::

    H       = SelfAttn(W) + W                                    (eq. 1)
    A_cross = CrossAttn(H, A),  V_cross = CrossAttn(H, V)        (eq. 2)
    A_conf  = sigma(FC([A_cross ; H]))                           (eq. 3; eq. 7 uses V_cross)
    M_a     = 1[A_conf > beta],  M_v = 1[(1 - A_conf) > beta]    (eq. 4-5)
    AV_out  = A_conf * A_cross * M_a + (1 - A_conf) * V_cross * M_v   (eq. 6)

and AV_out goes straight into the feed-forward sublayer: there is no residual connection
around the audio-visual attention, so the word stream H only reaches the rest of the block
through the gate.

AdaAVA was never released (liuxubo717/V-ACT holds only the concatenation model), so these
equations are the paper's in either block layout. V-ACT's default (``VACTConfig.form`` "code")
puts them in blocks laid out as the released ACT decoder's, post-norm
(``norm_first=False``, PyTorch's ``TransformerDecoderLayer``, ACT TransModel.py:92-97)::

    H = LN_1(W + SelfAttn(W))                    (eq. 1; H is what eq. 2-3 read)
    X = LN_2(AV_out)                             (no residual: the post-norm of eq. 6's output)
    out = LN_3(X + FF(X))

The paper form (``norm_first=True``) is pre-norm: the attentions read layer-normalised inputs,
the residual stream H itself is what eq. 3 concatenates, and ``out = AV_out + FF(LN(AV_out))``.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

Guide = Literal["audio", "video"]


def adaava_gate(
    audio_context: Tensor, video_context: Tensor, audio_confidence: Tensor, beta: float
) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. 4-6 on given tensors -> (AV_out, M_a, M_v).

    ``audio_confidence`` broadcasts against the contexts ((B, L, d) or (B, L, 1)). The masks use
    strict inequalities: a confidence exactly at beta (or 1 - beta) switches its stream off.
    With beta = 0 both streams are always on (a plain convex mix); with beta >= 1 both are off.
    """
    m_a = (audio_confidence > beta).to(audio_context.dtype)
    m_v = ((1.0 - audio_confidence) > beta).to(video_context.dtype)
    out = audio_confidence * audio_context * m_a + (1.0 - audio_confidence) * video_context * m_v
    return out, m_a, m_v


class AdaAVA(nn.Module):
    """Eq. 3-7: confidence from [context of the guiding modality ; H], then the masked mix."""

    def __init__(
        self,
        dim: int,
        *,
        beta: float = 0.13,
        guide: Guide = "audio",
        confidence: Literal["vector", "scalar"] = "vector",
    ) -> None:
        super().__init__()
        if guide not in ("audio", "video"):
            raise ValueError(f"AdaAVA guide must be 'audio' or 'video', got {guide!r}")
        if beta < 0:
            raise ValueError(f"AdaAVA beta must be >= 0, got {beta}")
        self.beta = beta
        self.guide = guide
        self.fc = nn.Linear(2 * dim, dim if confidence == "vector" else 1)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, guide={self.guide!r}"

    def confidence(self, hidden: Tensor, audio_context: Tensor, video_context: Tensor) -> Tensor:
        """A_conf = sigma(FC([A_cross ; H])) (eq. 3) or sigma(FC([V_cross ; H])) (eq. 7)."""
        context = audio_context if self.guide == "audio" else video_context
        return torch.sigmoid(self.fc(torch.cat([context, hidden], dim=-1)))

    def forward(self, hidden: Tensor, audio_context: Tensor, video_context: Tensor) -> Tensor:
        """hidden H, contexts A_cross and V_cross, all (B, L, d) -> AV_out (B, L, d)."""
        conf = self.confidence(hidden, audio_context, video_context)
        out, _, _ = adaava_gate(audio_context, video_context, conf, self.beta)
        return out


def cross_attend(attention: nn.MultiheadAttention, query: Tensor, memory: Tensor, mask: Tensor):
    """``attention(query, memory, memory)`` with key padding; a row whose memory is empty
    (a clip without video) gets a zero context instead of NaN."""
    empty = ~mask.any(dim=1)
    if bool(empty.any()):
        mask = mask.clone()
        mask[empty, 0] = True  # attend to one (ignored) slot, then zero the result
    context, _ = attention(query, memory, memory, key_padding_mask=~mask, need_weights=False)
    return context.masked_fill(empty[:, None, None], 0.0)


class AdaAVADecoderLayer(nn.Module):
    """Transformer decoder block with AdaAVA in place of cross-attention; pre-norm
    (``norm_first``, the paper form) or post-norm (the released ACT's layout)."""

    def __init__(
        self,
        dim: int,
        heads: int,
        ff_dim: int,
        dropout: float,
        *,
        beta: float,
        guide: Guide,
        confidence: Literal["vector", "scalar"] = "vector",
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.norm_self = nn.LayerNorm(dim)
        self.self_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm_cross = nn.LayerNorm(dim)
        self.audio_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.video_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.adaava = AdaAVA(dim, beta=beta, guide=guide, confidence=confidence)
        self.norm_ff = nn.LayerNorm(dim)
        self.ff = nn.Sequential(
            nn.Linear(dim, ff_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim)
        )
        self.dropout_self = nn.Dropout(dropout)
        self.dropout_cross = nn.Dropout(dropout)
        self.dropout_ff = nn.Dropout(dropout)

    def attend(
        self,
        words: Tensor,
        audio: Tensor,
        audio_mask: Tensor,
        video: Tensor,
        video_mask: Tensor,
        causal: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Eq. 1-2 -> (H, A_cross, V_cross), each (B, L, d)."""
        if not self.norm_first:
            attended, _ = self.self_attn(
                words, words, words, attn_mask=causal, is_causal=True, need_weights=False
            )
            hidden = self.norm_self(words + self.dropout_self(attended))  # eq. 1, post-norm
            audio_context = cross_attend(self.audio_attn, hidden, audio, audio_mask)  # eq. 2
            video_context = cross_attend(self.video_attn, hidden, video, video_mask)
            return hidden, audio_context, video_context
        x = self.norm_self(words)
        attended, _ = self.self_attn(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
        hidden = words + self.dropout_self(attended)  # eq. 1
        query = self.norm_cross(hidden)
        audio_context = cross_attend(self.audio_attn, query, audio, audio_mask)  # eq. 2
        video_context = cross_attend(self.video_attn, query, video, video_mask)
        return hidden, audio_context, video_context

    def forward(
        self,
        words: Tensor,
        audio: Tensor,
        audio_mask: Tensor,
        video: Tensor,
        video_mask: Tensor,
        causal: Tensor,
    ) -> Tensor:
        """words W (B, L, d); audio A (B, Na, d) and video V (B, Nv, d) with their (B, N) masks
        (True on real positions); causal (L, L) additive mask -> (B, L, d)."""
        hidden, audio_context, video_context = self.attend(
            words, audio, audio_mask, video, video_mask, causal
        )
        # Eq. 3-6, and no residual: AV_out alone goes on to the feed-forward sublayer.
        out = self.dropout_cross(self.adaava(hidden, audio_context, video_context))
        if not self.norm_first:
            out = self.norm_cross(out)
            return self.norm_ff(out + self.dropout_ff(self.ff(out)))
        return out + self.dropout_ff(self.ff(self.norm_ff(out)))
