"""TopDown multi-scale encoder with aligned semantic attention (Kim et al. 2019, eq. 1-13).

Encoder (eq. 1-3)::

    h^a1_t = biLSTM_1(f_t)                       high-level frames f_t
    h_ctxt = W_c [->h^a1_T ; <-h^a1_1] + b_c     global context
    h^a2_t = biLSTM_2(c_t + h_ctxt)              mid-level frames c_t

Attribute words d_n -> h^w_n = biLSTM_w(Emb(d_n)) (eq. 4); attention flow (eq. 5-9, see
``attention_flow``) gives h^flow_t; the LSTM decoder attends over h^flow with Luong global
attention, a_m = tanh(W_dec [c_m ; h^dec_m]), s_m = softmax(W_o a_m) (eq. 10-13).

With ``aligned_attention=False`` (plain TopDown) the decoder attends over h^a2 directly.

Two feature levels: batch["features"] is the high level f_t and batch["mid_features"] the mid
level c_t, each with its own frame rate (batch["mid_feature_lengths"]; the high level's lengths
when absent): h_ctxt is one vector per clip, added at every mid-level step. A pretrained VGGish
in front (``model.encoder=vggish``) provides the paper's two, fc2 and conv4
(``EncodedCaptioner``).

One feature level only (``mid_feature_dim == 0``): the paper's mid level is VGGish conv4 and its
high level fc2, i.e. fully connected layers on top of conv4. When the features have one level
(log-mels, or a single embedding per frame), the input frames play c_t and a learned 2-layer MLP
on them plays f_t, which reproduces that relation; the multi-scale structure stays intact.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from modeling.ml.config import TopDownConfig
from modeling.ml.models.base import Batch, Memory, lengths_to_mask, masked_softmax, xavier_init
from modeling.ml.models.layers import LSTMDecoder, PackedBiLSTM, RecurrentCaptioner, initial_state


@dataclass
class Flow:
    """Attention-flow outputs for one batch."""

    flow: Tensor  # h^flow (B, T, 4D)
    similarity: Tensor  # S (B, T, N), eq. 5
    word_to_audio: Tensor  # a (B, T, N): softmax over words for each frame, eq. 6
    audio_to_word: Tensor  # b (B, T): softmax over frames of max_n S_tn, eq. 8


def attention_flow(
    h_audio: Tensor, h_words: Tensor, audio_mask: Tensor, word_mask: Tensor, w_alpha: nn.Linear
) -> Flow:
    """Aligned semantic attention, eq. 5-9.

    h_audio (B, T, D) = h^a2, h_words (B, N, D) = h^w, masks True on real positions,
    ``w_alpha`` a Linear(3D -> 1). Returns::

        S_tn       = W_a [h^a2_t ; h^w_n ; h^a2_t * h^w_n]                       (5)
        a_t        = softmax_n(S_t:),   h~w_t = sum_n a_tn h^w_n                  (6-7)
        b          = softmax_t(max_n S_tn),   h~a2 = sum_t b_t h^a2_t            (8-9)
        h^flow_t   = [h^a2_t ; h~w_t ; h^a2_t * h~w_t ; h^a2_t * h~a2]

    Padded words never receive weight; a clip without attribute words gets h~w = 0 and a uniform
    b over its frames.
    """
    t, n = h_audio.size(1), h_words.size(1)
    a_exp = h_audio.unsqueeze(2).expand(-1, -1, n, -1)
    w_exp = h_words.unsqueeze(1).expand(-1, t, -1, -1)
    similarity = w_alpha(torch.cat([a_exp, w_exp, a_exp * w_exp], dim=-1)).squeeze(-1)

    word_to_audio = masked_softmax(similarity, word_mask[:, None, :], dim=-1)
    attended_words = word_to_audio @ h_words

    row_max = similarity.masked_fill(~word_mask[:, None, :], float("-inf")).amax(dim=-1)
    row_max = row_max.masked_fill(~word_mask.any(dim=-1, keepdim=True), 0.0)
    audio_to_word = masked_softmax(row_max, audio_mask, dim=-1)
    attended_audio = (audio_to_word.unsqueeze(-1) * h_audio).sum(dim=1, keepdim=True)

    flow = torch.cat(
        [h_audio, attended_words, h_audio * attended_words, h_audio * attended_audio], dim=-1
    )
    return Flow(flow, similarity, word_to_audio, audio_to_word)


class TopDownCaptioner(RecurrentCaptioner):
    """Multi-scale biLSTM encoder, attention flow over attribute words, attentive LSTM decoder."""

    config: TopDownConfig

    def __init__(self, config: TopDownConfig) -> None:
        super().__init__()
        self.config = config
        e = config.encoder_dim
        mid_dim = config.mid_feature_dim or config.feature_dim
        self.dropout = nn.Dropout(config.dropout)
        # Derived high level (see module docstring) only when there is a single feature level.
        self.high_mlp = (
            nn.Sequential(
                nn.Linear(config.feature_dim, 2 * e),
                nn.ReLU(),
                nn.Dropout(config.dropout),
                nn.Linear(2 * e, 2 * e),
                nn.ReLU(),
            )
            if config.mid_feature_dim == 0
            else None
        )
        high_dim = 2 * e if self.high_mlp is not None else config.feature_dim
        self.high_encoder = PackedBiLSTM(high_dim, e)
        self.context = nn.Linear(2 * e, mid_dim)  # W_c, b_c (eq. 2)
        self.mid_encoder = PackedBiLSTM(mid_dim, e)
        self.to_h = nn.Linear(mid_dim, config.decoder_dim)
        self.to_c = nn.Linear(mid_dim, config.decoder_dim)
        if config.aligned_attention:
            self.word_encoder = PackedBiLSTM(config.embed_dim, e)
            self.w_alpha = nn.Linear(3 * 2 * e, 1, bias=False)  # W_alpha (eq. 5)
            key_dim = 4 * 2 * e
        else:
            key_dim = 2 * e
        self.decoder = LSTMDecoder(
            vocab_size=config.vocab_size,
            embed_dim=config.embed_dim,
            hidden_dim=config.decoder_dim,
            dropout=config.dropout,
            key_dim=key_dim,
        )
        xavier_init(self)

    def encode(self, batch: Batch) -> Memory:
        """-> {"h", "c": (B, 1, H), "keys": h^flow (B, T, 8E) or h^a2 (B, T, 2E), "mask" (B, T)}."""
        lengths = mid_lengths = batch["feature_lengths"]
        features = self.dropout(batch["features"])
        if self.high_mlp is not None:
            mid, high = features, self.high_mlp(features)
        else:
            if "mid_features" not in batch:
                raise ValueError(
                    "this TopDown config expects batch['mid_features'] (mid_feature_dim > 0)"
                )
            mid, high = self.dropout(batch["mid_features"]), features
            mid_lengths = batch.get("mid_feature_lengths", lengths)
        _, summary = self.high_encoder(high, lengths)
        h_ctxt = self.context(summary)
        h_a2, _ = self.mid_encoder(mid + h_ctxt.unsqueeze(1), mid_lengths)
        audio_mask = lengths_to_mask(mid_lengths, h_a2.size(1))
        memory = initial_state(h_ctxt, self.to_h, self.to_c)
        memory["mask"] = audio_mask
        if not self.config.aligned_attention:
            memory["keys"] = self.dropout(h_a2)
            return memory
        if "attributes" not in batch:
            raise ValueError("TopDown-AlignedAtt needs batch['attributes'] (attribute word ids)")
        attributes, attr_lengths = batch["attributes"], batch["attribute_lengths"]
        if attributes.size(1) == 0:  # no clip has attribute words: one <pad> column, masked
            attributes = attributes.new_zeros(attributes.size(0), 1)
        h_w, _ = self.word_encoder(self.dropout(self.decoder.embedding(attributes)), attr_lengths)
        word_mask = lengths_to_mask(attr_lengths, h_w.size(1))
        flow = attention_flow(h_a2, h_w, audio_mask, word_mask, self.w_alpha)
        memory["keys"] = self.dropout(flow.flow)
        return memory
