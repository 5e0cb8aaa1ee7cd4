"""Configs and presets of the audio-visual and keyword captioners (MODELS.md sections 2, 3, 5).

They live beside ``modeling.ml.config`` rather than in it (V-ACT extends ``ACTConfig``); their
presets are in ``modeling.ml.presets`` with every other model's.

The batch keys these models read on top of ``modeling.ml.models.base``::

    "video"            (B, Tv, Fv) float, frame (or spatio-temporal token) features
    "video_lengths"    (B,) long; 0 marks a clip without video (its video context is zero)
    "keywords"         (B, K) long keyword ids (MAAC; optional, else predicted in-model)
    "keyword_targets"  (B, N_kw) float multi-hot (MAAC keyword-encoder pre-training)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from modeling.ml.config import (
    ACTConfig,
    CaptionerConfig,
    ConfigError,
    NearestNeighbourConfig,
    TrainConfig,
)


@dataclass
class VACTConfig(ACTConfig):
    """V-ACT (Liu et al. 2023): ACT plus video; the fusion is fixed by the registry name.

    "vact" is AdaAVA guided by audio (eq. 3), "vact_video" AdaAVA guided by video (eq. 7),
    "vact_concat" one cross-attention over audio and video concatenated, "video_only" ACT's
    decoder over video alone (no audio encoder is built).
    """

    # Fv: size of one precomputed video feature frame (S3D's 1024-d chunk embedding); with
    # video_frame_size > 0, the size the trainable frame CNN maps each frame to.
    video_dim: int = 1024
    # 0: batch["video"] holds precomputed features. S > 0: it holds raw S x S RGB frames
    # (modeling.ml.video "frames", 3 S^2 values in [0, 1]) encoded by a trainable FrameCNN.
    video_frame_size: int = 0
    # Trainable frame encoder over the precomputed video features: 0 is the paper's single
    # linear layer to d; n > 0 adds n Transformer encoder blocks after it (for features that
    # were not produced by a strong pretrained video encoder).
    video_layers: int = 0
    # Longest video in feature frames; sizes the video positional embedding when video_layers > 0.
    max_video_frames: int = 256
    # beta: the masking threshold of eq. 4-5 (M_a = 1[A_conf > beta], M_v = 1[1 - A_conf > beta]).
    beta: float = 0.13
    # Shape of A_conf: "vector" gives one confidence per latent dimension (FC: 2d -> d), so
    # the masks remove redundant dimensions of the latent space; "scalar" one confidence per
    # word position (FC: 2d -> 1) broadcast over the dimensions.
    confidence: Literal["vector", "scalar"] = "vector"


@dataclass
class MAACConfig(CaptionerConfig):
    """MAAC (DCASE 2021): keyword encoder + multi-modal attention LSTM decoder."""

    # Log-mel bins per frame (PANNs: 64).
    feature_dim: int = 64
    # N: size of the keyword vocabulary (modeling.ml.keywords); 300 in the paper.
    num_keywords: int = 300
    # K: how many top predicted keywords the decoder attends to.
    top_k: int = 5
    # Keyword-encoder backbone: "cnn" is a trainable small CNN with the same multi-level
    # interface; "resnet38" is PANNs ResNet38, which needs backbone_weights.
    backbone: Literal["cnn", "resnet38"] = "cnn"
    # PANNs checkpoint file for backbone="resnet38" ("" = random init, for tests only).
    backbone_weights: str = ""
    # ResNet38 architecture (PANNs: these defaults; a published checkpoint needs them).
    panns_widths: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)
    panns_layers: tuple[int, ...] = (3, 4, 6, 3)
    # Conv block widths of the small CNN; features are taken after the 3rd, 4th and last block.
    cnn_channels: tuple[int, ...] = (64, 128, 256, 512, 1024)
    # The first this many CNN blocks halve time (time reduction 2 ** cnn_time_pools).
    cnn_time_pools: int = 2
    # Size of each of f1, f2, f3 (the per-level linear layers of the keyword encoder).
    level_dim: int = 512
    # Keyword encoder frozen while the captioner trains (after its BCE pre-training).
    freeze_keyword_encoder: bool = True
    # C: width of the projected acoustic features, keyword and word embeddings, and the LSTM.
    hidden_dim: int = 512
    # Hidden size of the attention modules' ReLU layer (W_i, W_s map to it).
    attention_dim: int = 512
    # Dropout on the word and keyword embeddings.
    embedding_dropout: float = 0.5
    # Dropout before the word classifier.
    dropout: float = 0.25
    # "code" computes the authors' released network (WangHelin1997/DCASE2021_Task6_PKU,
    # encoder.py Tag and model.py AttDecoder), which their checkpoints fit and the paper's
    # numbers came from: keyword pooling max + mean over time with a ReLU after each level's
    # linear layer, h0 and c0 from learned layers on the mean acoustic feature, attention
    # contexts sum(alpha * V(F)) gated by sigma(f_beta(h)) with a gate layer per attention, and
    # a zero vector (not <bos>) opening the previous-word memory. "paper" follows the paper's
    # equations as written (GAP, no ReLU, h0 = GAP(X) and c0 = 0, sum(alpha * F) * sigma(h),
    # <bos> in the memory). Checkpoints written before this field existed are "paper".
    form: Literal["code", "paper"] = "code"

    def keyword_targets_size(self) -> int:
        return self.num_keywords

    def adapted_training(self, train: TrainConfig) -> dict[str, tuple[Any, str]]:
        if train.pretrain_frozen_epochs and not self.backbone_weights:
            return {
                "pretrain_frozen_epochs": (
                    0,
                    "the keyword encoder's backbone has no pretrained weights "
                    "(model.backbone_weights) to keep frozen",
                )
            }
        return {}

    def with_keywords_found(self, found: int) -> MAACConfig:
        return dataclasses.replace(self, num_keywords=found, top_k=min(self.top_k, found))


@dataclass
class AVConfig(CaptionerConfig):
    """Audio-visual captioner with a cross-modal encoder (Shen et al. 2023)."""

    # Log-mel bins per frame.
    feature_dim: int = 64
    # Frames per audio patch: 1 is the paper's 1-D (time-only) layout, a patch is one frame.
    patch_frames: int = 1
    # Longest audio in frames; longer clips are linearly down-sampled to it (256 in the paper).
    max_frames: int = 256
    # Average-pool the audio encoder output over time by this factor (256 -> N_a = 64 tokens).
    audio_pool: int = 4
    # D: width of the audio encoder, the cross-modal encoder and the decoder.
    width: int = 768
    # Audio Transformer blocks and heads (12 and 12).
    audio_layers: int = 12
    audio_heads: int = 12
    # Fv: size of one video token feature (Video Swin: 1024-d); with video_frame_size > 0,
    # the size the trainable frame CNN maps each frame to.
    video_dim: int = 1024
    # 0: batch["video"] holds precomputed tokens. S > 0: it holds raw S x S RGB frames
    # (modeling.ml.video "frames", 3 S^2 values in [0, 1]) encoded by a trainable FrameCNN.
    video_frame_size: int = 0
    # Longest video in tokens (8 x 7 x 7 = 392); sizes the video position embedding.
    max_video_tokens: int = 392
    # Cross-modal encoder: "merged" (eq. 9), "cross" (eq. 10), "global_cross" (eq. 11) or
    # "local_global" (eq. 12: the mean of a local fusion and a global cross fusion per layer).
    fusion: Literal["merged", "cross", "global_cross", "local_global"] = "local_global"
    # The local half of "local_global" (merged was the paper's best).
    local_fusion: Literal["merged", "cross"] = "merged"
    # Cross-modal encoder blocks and heads (3 and 12).
    fusion_layers: int = 3
    fusion_heads: int = 12
    # Transformer decoder blocks and heads (3; heads as the encoder).
    decoder_layers: int = 3
    decoder_heads: int = 12
    # Feed-forward width as a multiple of D.
    ff_mult: int = 4
    # Longest caption in tokens; sizes the decoder's positional embedding.
    max_caption_length: int = 64
    # Modality-balanced pre-training (eq. 2-6): the pre-training stage's loss
    # (train.pretrain_epochs) adds w_a L_a + w_v L_v; fine-tuning never does.
    mbp: bool = False
    # alpha of eq. 6 (softmax temperature on the squared loss gaps).
    mbp_alpha: float = 10.0
    # beta of eq. 5 (moving-average factor of the weights).
    mbp_beta: float = 0.99

    def check_training(self, train: TrainConfig) -> None:
        if self.mbp and train.pretrain_epochs == 0:
            raise ConfigError(
                "config key 'model.mbp': MBP is a pre-training loss; set "
                "train.pretrain_epochs > 0 (fine-tuning trains without it)"
            )


# The configs of the models that read video (registry.uses_video): they take raw frames
# (video_frame_size > 0) or precomputed features of video_dim.
VideoCaptionerConfig = VACTConfig | AVConfig
# The configs whose max_caption_length bounds a caption (it sizes a positional embedding, or
# the 1NN bank); whoever sets up a run gives it room for the vocabulary's longest caption.
CaptionLengthConfig = NearestNeighbourConfig | ACTConfig | AVConfig
