"""TempAtt (Kim et al. 2019): the LSTM baseline plus Luong global attention over the frames."""

from __future__ import annotations

from modeling.ml.config import TempAttConfig
from modeling.ml.models.lstm import LSTMCaptioner


class TempAttCaptioner(LSTMCaptioner):
    """Same encoder and decoder as the LSTM baseline; at every word the decoder state attends
    over all biLSTM time steps (Luong "general" score), so the clip stays in view.
    """

    config: TempAttConfig

    def __init__(self, config: TempAttConfig) -> None:
        super().__init__(config)

    def _key_dim(self) -> int | None:
        return 2 * self.config.encoder_dim
