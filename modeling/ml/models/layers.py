"""Building blocks shared by the recurrent captioners (LSTM, TempAtt, TopDown)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from modeling.ml.models.base import Batch, Captioner, Memory, State, masked_softmax
from modeling.ml.vocab import PAD_ID, Vocabulary
from modeling.ml.word_vectors import load_word_vectors


class PackedBiLSTM(nn.Module):
    """Bidirectional LSTM over padded sequences that never reads the padding.

    Packing is what makes the outputs independent of how much a clip was padded: the backward
    direction of an unpacked LSTM would start in the zeros after the clip's end.
    """

    def __init__(
        self, input_dim: int, hidden_dim: int, *, num_layers: int = 1, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.lstm = nn.LSTM(
            input_dim,
            hidden_dim,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_dim = 2 * hidden_dim

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, T, D_in), lengths (B,) -> outputs (B, T, 2H) zero on padding, summary (B, 2H).

        The summary is ``[->h_T ; <-h_1]``: the forward direction's state after the clip's last
        real frame and the backward direction's state after its first frame (AudioCaps eq. 1).
        Lengths of 0 are read as 1 (a <pad> step) so empty attribute lists stay valid.
        """
        packed = pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        out, (h_n, _) = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        return out, torch.cat([h_n[-2], h_n[-1]], dim=-1)


class LuongAttention(nn.Module):
    """Luong "global" attention with the "general" score (Luong et al. 2015, eq. 5-8).

    score(h_m, k_s) = h_m^T W_a k_s;  c_m = sum_s softmax(score) k_s;
    a_m = tanh(W_c [c_m ; h_m])  (TopDown eq. 10-12 use the same form).
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.score = nn.Linear(key_dim, query_dim, bias=False)  # W_a applied to the keys
        self.combine = nn.Linear(key_dim + query_dim, query_dim, bias=False)  # W_c

    def forward(self, query: Tensor, keys: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, L, Dq), keys (B, T, Dk), mask (B, T)
        -> attended (B, L, Dq), weights (B, L, T)."""
        scores = query @ self.score(keys).transpose(1, 2)
        weights = masked_softmax(scores, mask[:, None, :], dim=-1)
        context = weights @ keys
        return torch.tanh(self.combine(torch.cat([context, query], dim=-1))), weights


class LSTMDecoder(nn.Module):
    """1-layer LSTM word decoder, optionally with Luong attention over a memory.

    Teacher forcing runs the LSTM over the whole caption at once; attention does not feed back
    into the LSTM input (no "input feeding"), which keeps training parallel over time.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        dropout: float,
        key_dim: int | None = None,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.attention = LuongAttention(hidden_dim, key_dim) if key_dim else None
        self.norm = nn.LayerNorm(hidden_dim) if layer_norm else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim, vocab_size)  # W_o

    def forward(
        self,
        tokens: Tensor,
        state: tuple[Tensor, Tensor],
        keys: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """tokens (B, L), state (h, c) each (1, B, H) -> logits (B, L, V), new state."""
        x = self.dropout(self.embedding(tokens))
        h, state = self.lstm(x, state)
        if self.attention is not None:
            if keys is None or mask is None:
                raise ValueError("an attending decoder needs keys and a mask")
            h, _ = self.attention(h, keys, mask)
        return self.out(self.dropout(self.norm(h))), state


def initial_state(summary: Tensor, to_h: nn.Linear, to_c: nn.Linear) -> dict[str, Tensor]:
    """Decoder (h0, c0) from an encoder summary (B, D), kept batch-first as (B, 1, H)."""
    return {
        "h": torch.tanh(to_h(summary)).unsqueeze(1),
        "c": torch.tanh(to_c(summary)).unsqueeze(1),
    }


def lstm_state(state: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """Batch-first (B, 1, H) state -> the (1, B, H) pair nn.LSTM wants."""
    return state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous()


def batch_first_state(state: tuple[Tensor, Tensor]) -> dict[str, Tensor]:
    return {"h": state[0].transpose(0, 1), "c": state[1].transpose(0, 1)}


class RecurrentCaptioner(Captioner):
    """Shared forward/step for captioners whose memory is an LSTMDecoder's inputs.

    Subclasses build ``self.decoder`` and implement ``encode`` returning "h", "c" (B, 1, H) and,
    when the decoder attends, "keys" (B, T, Dk) and "mask" (B, T).
    """

    decoder: LSTMDecoder

    def load_word_vectors(self, path: str | Path, vocab: Vocabulary) -> int:
        """The decoder's word embeddings (TopDown's attribute words share them) start from
        the file's vectors (``modeling.ml.word_vectors``)."""
        return load_word_vectors(self.decoder.embedding, vocab, path)

    def forward(self, batch: Batch) -> Tensor:
        memory = self.encode(batch)
        logits, _ = self.decoder(
            batch["tokens"], lstm_state(memory), memory.get("keys"), memory.get("mask")
        )
        return logits

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        if state is None:
            state = {"h": memory["h"], "c": memory["c"]}
        logits, new_state = self.decoder(
            tokens[:, -1:], lstm_state(state), memory.get("keys"), memory.get("mask")
        )
        return torch.log_softmax(logits[:, 0].float(), dim=-1), batch_first_state(new_state)
