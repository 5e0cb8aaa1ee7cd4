"""AST, the Audio Spectrogram Transformer (Gong et al. 2021).

The distilled-DeiT ViT of the AST paper, with the parameter names of timm 0.4.5's
`vit_deit_base_distilled` under `v.` (including DeiT's unused ImageNet heads) plus `mlp_head`,
which is what AST's code saves; the DataParallel `module.` prefix is stripped. Written from the
paper and timm's layout and not checked against a downloaded checkpoint here: the strict load
reports any difference by name. Input is Kaldi fbank (`features.AST`) normalised with AST's
AudioSet mean/std. Positional embeddings are sized for `max_frames`; a checkpoint trained with
another length will not load (no interpolation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_encoders import ASTConfig
from modeling.ml.encoders.framing import check_input, windows


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _PatchEmbed(nn.Module):
    def __init__(self, patch: int, fstride: int, tstride: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(1, dim, kernel_size=patch, stride=(fstride, tstride))


class _DeiT(nn.Module):
    def __init__(self, config: ASTConfig, n_patches: int) -> None:
        super().__init__()
        self.patch_embed = _PatchEmbed(config.patch, config.fstride, config.tstride, config.dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 2, config.dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.dist_token, std=0.02)
        self.blocks = nn.ModuleList(
            _Block(config.dim, config.heads, config.mlp_ratio) for _ in range(config.depth)
        )
        self.norm = nn.LayerNorm(config.dim, eps=1e-6)
        self.head = nn.Linear(config.dim, config.deit_classes)
        self.head_dist = nn.Linear(config.dim, config.deit_classes)


class AST(nn.Module):
    """Audio Spectrogram Transformer (Gong et al., 2021). Published parameter names
    (`v.*`, `mlp_head.*`). Clips longer than `max_frames` are cut into windows of
    `max_frames` with 50 % overlap; shorter ones are zero-padded as AST does."""

    def __init__(self, config: ASTConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or ASTConfig()
        if config.output not in ("frames", "cls"):
            raise ValueError(f"AST output {config.output!r}: use frames or cls")
        self.f_dim = (config.n_mels - config.patch) // config.fstride + 1
        self.t_dim = (config.max_frames - config.patch) // config.tstride + 1
        self.v = _DeiT(config, self.f_dim * self.t_dim)
        self.mlp_head = nn.Sequential(
            nn.LayerNorm(config.dim), nn.Linear(config.dim, config.classes)
        )

    @property
    def output_dim(self) -> int:
        return self.config.dim

    def _tokens(self, windows: Tensor) -> Tensor:
        cfg = self.config
        x = (windows - cfg.norm_mean) / (cfg.norm_std * 2)
        x = self.v.patch_embed.proj(x.transpose(1, 2)[:, None])  # (N, D, f_dim, t_dim)
        x = x.flatten(2).transpose(1, 2)
        extra = torch.cat([self.v.cls_token, self.v.dist_token], dim=1).expand(x.shape[0], -1, -1)
        x = torch.cat([extra, x], dim=1) + self.v.pos_embed
        for block in self.v.blocks:
            x = block(x)
        return self.v.norm(x)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        cfg = self.config
        check_input(features, lengths, cfg.n_mels, "AST")
        batch = features.shape[0]
        window = cfg.max_frames
        hop = window // 2 if cfg.output == "cls" else window
        if features.shape[1] > window and cfg.output == "frames":
            raise ValueError(
                f"AST output 'frames' takes at most {window} frames, got {features.shape[1]}"
            )
        patches, counts, n = windows(features, lengths, window, hop)
        tokens = self._tokens(patches)  # (B*N, 2 + f*t, D)
        if cfg.output == "cls":
            cls = (tokens[:, 0] + tokens[:, 1]) / 2
            return cls.reshape(batch, n, -1), counts
        grid = tokens[:, 2:].reshape(batch, self.f_dim, self.t_dim, -1).mean(dim=1)
        steps = ((lengths - cfg.patch) // cfg.tstride + 1).clamp(min=1, max=self.t_dim)
        return grid, steps
