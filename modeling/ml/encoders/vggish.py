"""VGGish, the audio embedder of Hershey et al. (2017).

Layer-for-layer the network of torchvggish (harritaylor/torchvggish), whose converted
state_dict (`features.N.*`, `embeddings.N.*`) loads as is; PCA post-processing is not applied.
Input: non-overlapping 96-frame x 64-band patches of the `features.VGGISH` front end, which
follows VGGish's (magnitude STFT, HTK mels, log + 0.01) with torchaudio's filterbank rather
than VGGish's own NumPy code.
"""

from __future__ import annotations

from torch import Tensor, nn

from modeling.ml.config_encoders import VGGishConfig, vggish_output_dim
from modeling.ml.encoders.framing import check_input, windows


class VGGish(nn.Module):
    """VGGish (Hershey et al., 2017), torchvggish parameter names. Output per 0.96 s patch:
    the 128-d embedding, the 4096-d fc2 activations (AudioCaps' "high level"), or the conv4
    map averaged over frequency: 6 steps of 512-d per patch (AudioCaps' "mid level")."""

    def __init__(self, config: VGGishConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or VGGishConfig()
        if config.output not in ("embedding", "fc2", "conv4"):
            raise ValueError(f"VGGish output {config.output!r}: use embedding, fc2 or conv4")
        c = config.channels
        layers: list[nn.Module] = []
        previous = 1
        # VGG "A" layout: conv, pool, conv, pool, conv conv, pool, conv conv, pool
        for i, width in enumerate(c):
            layers += [nn.Conv2d(previous, width, 3, padding=1), nn.ReLU(inplace=True)]
            if i in (0, 1, 3, 5):
                layers.append(nn.MaxPool2d(2, 2))
            previous = width
        self.features = nn.Sequential(*layers)
        t, f = config.patch_frames // 16, config.n_mels // 16
        self.embeddings = nn.Sequential(
            nn.Linear(c[-1] * t * f, config.hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.hidden, config.hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.hidden, config.embedding_dim),
            nn.ReLU(inplace=True),
        )

    @property
    def output_dim(self) -> int:
        return vggish_output_dim(self.config)

    def _conv(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, int]:
        """-> conv4 maps (B*N, C, T/16, F/16) of the N patches per clip, patch counts (B,), N."""
        cfg = self.config
        check_input(features, lengths, cfg.n_mels, "VGGish")
        patches, counts, n = windows(features, lengths, cfg.patch_frames, cfg.patch_frames)
        return self.features(patches[:, None]), counts, n

    @staticmethod
    def _conv4_steps(x: Tensor, counts: Tensor, batch: int, n: int) -> tuple[Tensor, Tensor]:
        steps = x.shape[2]
        return x.mean(dim=3).transpose(1, 2).reshape(batch, n * steps, -1), counts * steps

    def _dense(self, x: Tensor, layers: int | None, batch: int, n: int) -> Tensor:
        x = x.permute(0, 2, 3, 1).flatten(1)  # TF's NHWC flatten order, as torchvggish
        x = self.embeddings[:layers](x) if layers is not None else self.embeddings(x)
        return x.reshape(batch, n, -1)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x, counts, n = self._conv(features, lengths)
        batch = features.shape[0]
        if self.config.output == "conv4":
            return self._conv4_steps(x, counts, batch, n)
        return self._dense(x, 4 if self.config.output == "fc2" else None, batch, n), counts

    def forward_levels(
        self, features: Tensor, lengths: Tensor
    ) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
        """AudioCaps' two levels from one pass, whatever ``output`` says: the high level fc2
        ((B, N, hidden), lengths) and the mid level conv4 ((B, 6N, C), lengths)."""
        x, counts, n = self._conv(features, lengths)
        batch = features.shape[0]
        return (self._dense(x, 4, batch, n), counts), self._conv4_steps(x, counts, batch, n)
