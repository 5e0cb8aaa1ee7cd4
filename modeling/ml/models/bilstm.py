"""Light-weight BiLSTM captioner on pretrained audio-event embeddings (MODELS.md section 4).

Encoder: 2 stacked bidirectional LSTMs over the embedding matrix M (T, F); all time steps form
E (T, 2H). Decoder: an LSTM with temporal attention (eq. 1-3)::

    alpha  = ReLU(E W_e + h_{t-1} W_h)        (T, A)     (1)
    A      = softmax_t(alpha W_a)             (T,)       (2)
    E_attn = sum_t A_t E_t                    (2H,)      (3)

and the next word comes from the previous word's embedding together with E_attn.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from modeling.ml.config import BiLSTMConfig
from modeling.ml.models.base import (
    Batch,
    Captioner,
    Memory,
    State,
    lengths_to_mask,
    masked_mean,
    masked_softmax,
    xavier_init,
)
from modeling.ml.models.layers import PackedBiLSTM
from modeling.ml.vocab import PAD_ID


class TemporalAttention(nn.Module):
    """Eq. 1-3: additive attention of the previous decoder state over the encoder steps."""

    def __init__(self, key_dim: int, query_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.w_e = nn.Linear(key_dim, attention_dim, bias=False)
        self.w_h = nn.Linear(query_dim, attention_dim)
        self.w_a = nn.Linear(attention_dim, 1, bias=False)

    def forward(
        self, keys: Tensor, projected_keys: Tensor, mask: Tensor, query: Tensor
    ) -> tuple[Tensor, Tensor]:
        """keys E (B, T, K), projected_keys E W_e (B, T, A), mask (B, T), query h_{t-1} (B, Q)
        -> context E_attn (B, K), weights A (B, T)."""
        alpha = torch.relu(projected_keys + self.w_h(query).unsqueeze(1))
        weights = masked_softmax(self.w_a(alpha).squeeze(-1), mask, dim=-1)
        return (weights.unsqueeze(-1) * keys).sum(dim=1), weights


class BiLSTMCaptioner(Captioner):
    """2 stacked biLSTMs -> E; LSTM decoder fed [Emb(w_{t-1}) ; E_attn] at every step.

    The decoder's initial state comes from the mean of E over the clip (the description does
    not fix it; zeros would make the first attention step ignore the decoder entirely).
    """

    config: BiLSTMConfig

    def __init__(self, config: BiLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = PackedBiLSTM(
            config.feature_dim,
            config.encoder_dim,
            num_layers=config.encoder_layers,
            dropout=config.dropout,
        )
        key_dim = self.encoder.output_dim
        self.to_h = nn.Linear(key_dim, config.decoder_dim)
        self.to_c = nn.Linear(key_dim, config.decoder_dim)
        self.attention = TemporalAttention(key_dim, config.decoder_dim, config.attention_dim)
        self.embedding = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=PAD_ID)
        self.cell = nn.LSTMCell(config.embed_dim + key_dim, config.decoder_dim)
        self.out = nn.Linear(config.decoder_dim, config.vocab_size)
        xavier_init(self)

    def encode(self, batch: Batch) -> Memory:
        """-> {"keys": E (B, T, 2H), "projected": E W_e (B, T, A), "mask": (B, T),
        "h", "c": (B, H)}."""
        lengths = batch["feature_lengths"]
        keys, _ = self.encoder(self.dropout(batch["features"]), lengths)
        summary = masked_mean(keys, lengths)
        return {
            "keys": keys,
            "projected": self.attention.w_e(keys),  # E W_e does not change between words
            "mask": lengths_to_mask(lengths, keys.size(1)),
            "h": torch.tanh(self.to_h(summary)),
            "c": torch.tanh(self.to_c(summary)),
        }

    def _step_logits(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        context, _ = self.attention(memory["keys"], memory["projected"], memory["mask"], state["h"])
        x = torch.cat([self.dropout(self.embedding(words)), context], dim=-1)
        h, c = self.cell(x, (state["h"], state["c"]))
        return self.out(self.dropout(h)), {"h": h, "c": c}

    def forward(self, batch: Batch) -> Tensor:
        # Attention reads h_{t-1}, so teacher forcing has to walk the caption word by word.
        memory = self.encode(batch)
        state: State = {"h": memory["h"], "c": memory["c"]}
        logits = []
        for i in range(batch["tokens"].size(1)):
            step_logits, state = self._step_logits(memory, batch["tokens"][:, i], state)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        if state is None:
            state = {"h": memory["h"], "c": memory["c"]}
        logits, state = self._step_logits(memory, tokens[:, -1], state)
        return torch.log_softmax(logits.float(), dim=-1), state
