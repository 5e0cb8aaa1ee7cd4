"""LSTM baseline (Kim et al. 2019): a biLSTM summary of the clip starts a 1-layer LSTM decoder."""

from __future__ import annotations

from torch import nn

from modeling.ml.config import LSTMConfig
from modeling.ml.models.base import Batch, Memory, lengths_to_mask, xavier_init
from modeling.ml.models.layers import LSTMDecoder, PackedBiLSTM, RecurrentCaptioner, initial_state


class LSTMCaptioner(RecurrentCaptioner):
    """biLSTM encoder summary -> (h0, c0) of an LSTM decoder with dropout and layer norm.

    The decoder sees the audio only through its initial state, which is what makes this the
    weakest neural baseline: nothing reminds it of the clip as the caption grows.
    """

    def __init__(self, config: LSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = PackedBiLSTM(config.feature_dim, config.encoder_dim)
        self.to_h = nn.Linear(self.encoder.output_dim, config.decoder_dim)
        self.to_c = nn.Linear(self.encoder.output_dim, config.decoder_dim)
        self.decoder = LSTMDecoder(
            vocab_size=config.vocab_size,
            embed_dim=config.embed_dim,
            hidden_dim=config.decoder_dim,
            dropout=config.dropout,
            key_dim=self._key_dim(),
            layer_norm=config.layer_norm,
        )
        xavier_init(self)

    def _key_dim(self) -> int | None:
        return None

    def encode(self, batch: Batch) -> Memory:
        """features (B, T, F) -> {"h", "c": (B, 1, H)} (+ "keys" (B, T, 2E), "mask" (B, T))."""
        lengths = batch["feature_lengths"]
        outputs, summary = self.encoder(self.dropout(batch["features"]), lengths)
        memory = initial_state(summary, self.to_h, self.to_c)
        if self._key_dim() is not None:
            memory["keys"] = self.dropout(outputs)
            memory["mask"] = lengths_to_mask(lengths, outputs.size(1))
        return memory
