"""ACT (Mei et al. 2021): a patch Transformer over log-mels and a Transformer word decoder.

Two forms (``ACTConfig.form``). "code", the default, computes the authors' released network
(XinhaoMei/ACT @ 6b04b29), which the paper's numbers and the released checkpoints came from;
"paper" is the paper's text as Earmark first read it. Where they differ (file:line, released):

    BatchNorm over the 64 mel bins before patching   code only   AudioTransformer.py:133,161-164
    a CLS token before the patches                   code only   AudioTransformer.py:147,170-172
    ReLU after the projection to the decoder width   code only   TransModel.py:121
    decoder blocks                                   code: post-norm, no final norm
                                                     (TransModel.py:92-97, PyTorch's default
                                                     TransformerDecoderLayer); paper: pre-norm
                                                     and a final LayerNorm

Encoder: the (T, 64) log-mel is cut into non-overlapping patches of ``patch_frames`` x 64 along
time (4 x 64 in the paper), each flattened and linearly projected, plus a learnable positional
embedding (the CLS token takes position 0 in the code form), then ViT-style pre-norm blocks and
a LayerNorm (the code's ``mlp_head.0``). The code then maps each token to 527 AudioSet logits
(``mlp_head.1``) and those to d (``encoder_linear``): two linear layers in a row, which compute
one linear map, so here a single ``to_decoder`` layer holds their product (the converter in
``modeling.ml.released`` folds the released pair into it exactly).
Decoder: ACT-m, Transformer decoder blocks with causal self-attention and cross-attention to the
audio tokens. The code scales the word embeddings by sqrt(d) and adds fixed sinusoidal positions
(TransModel.py:24-39,136-137); here the embedding and a learned position table hold both (the
converter writes the scaled rows and the sinusoid into them; a model trained here learns them).
The released "beam search" (tools/beam.py) is a best-first search that stops at the first
finished caption (so it mostly returns the greedy caption); Earmark's ``beam_search`` is a real
beam, kept on purpose. The paper pretrains the encoder on AudioSet tagging; here it is trained
from scratch unless weights are loaded into it (``manage.py import_weights act_encoder``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from modeling.ml.config import ACTConfig
from modeling.ml.encoders import read_state_dict
from modeling.ml.models.base import Batch, Captioner, Memory, State, lengths_to_mask
from modeling.ml.vocab import PAD_ID


class PatchEncoder(nn.Module):
    """(B, T, F) log-mel frames -> (B, P, d) patch embeddings, P = ceil(T / patch_frames)."""

    def __init__(self, config: ACTConfig) -> None:
        super().__init__()
        self.patch_frames = config.patch_frames
        self.max_patches = math.ceil(config.max_frames / config.patch_frames)
        width = config.encoder_dim
        self.code_form = config.form == "code"
        # code: BatchNorm2d(64) over the mel bins of every frame (AudioTransformer.py:133)
        self.bn0 = nn.BatchNorm1d(config.feature_dim) if self.code_form else None
        self.project = nn.Linear(config.patch_frames * config.feature_dim, width)
        # code: a CLS token at position 0 ahead of the patches (AudioTransformer.py:146-147)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width)) if self.code_form else None
        slots = self.max_patches + (1 if self.code_form else 0)
        self.position = nn.Parameter(torch.zeros(1, slots, width))
        nn.init.trunc_normal_(self.position, std=0.02)
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)
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
        """-> tokens (B, P, width), mask (B, P) True on tokens holding real frames; in the code
        form P counts the CLS token first (always real)."""
        b, t, f = features.shape
        p = math.ceil(t / self.patch_frames)
        if p > self.max_patches:
            raise ValueError(
                f"clip of {t} frames exceeds max_frames={self.max_patches * self.patch_frames}"
            )
        frame_mask = lengths_to_mask(lengths, t)
        if self.bn0 is not None:
            # Statistics over the real frames only, so padding never shifts them; the code's
            # clips are all 10 s, where this is its BatchNorm2d over (B, 64, T, 1).
            normed = self.bn0(features[frame_mask])
            features = features.masked_scatter(frame_mask.unsqueeze(-1), normed)
        # Zero everything past each clip's end so a partly filled last patch looks the same
        # however much padding the batch added after it.
        x = features.masked_fill(~frame_mask.unsqueeze(-1), 0.0)
        x = nn.functional.pad(x, (0, 0, 0, p * self.patch_frames - t))
        x = x.reshape(b, p, self.patch_frames * f)
        x = self.project(x)
        patch_lengths = torch.div(
            lengths + self.patch_frames - 1, self.patch_frames, rounding_mode="floor"
        )
        mask = lengths_to_mask(patch_lengths, p)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1)
            mask = torch.cat([mask.new_ones(b, 1), mask], dim=1)
        x = self.dropout(x + self.position[:, : x.size(1)])
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
        self.decoder = transformer_decoder(config)
        self.out = nn.Linear(d, config.vocab_size)
        if config.encoder_init:
            start_from_audioset_encoder(self.encoder, self.to_decoder, config.encoder_init)

    @property
    def max_prefix_length(self) -> int | None:
        return self.config.max_caption_length

    def encode(self, batch: Batch) -> Memory:
        """-> {"audio": (B, P, d), "mask": (B, P)}."""
        patches, mask = self.encoder(batch["features"], batch["feature_lengths"])
        audio = self.to_decoder(patches)
        if self.config.form == "code":
            audio = torch.relu(audio)  # TransModel.py:121
        return {"audio": audio, "mask": mask}

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


def transformer_decoder(config: ACTConfig, *, final_norm: bool = True) -> nn.TransformerDecoder:
    """ACT's decoder blocks (V-ACT's baselines share them). The code form is the released one,
    PyTorch's default post-norm ``TransformerDecoderLayer`` without a final norm
    (TransModel.py:92-97); the paper form is pre-norm with a final LayerNorm (unless
    ``final_norm`` is off, for a caller that adds its own)."""
    d = config.decoder_dim
    code = config.form == "code"
    block = nn.TransformerDecoderLayer(
        d,
        config.decoder_heads,
        config.ff_mult * d,
        config.dropout,
        activation="gelu",
        batch_first=True,
        norm_first=not code,
    )
    return nn.TransformerDecoder(
        block, config.decoder_layers, norm=nn.LayerNorm(d) if final_norm and not code else None
    )


def start_from_audioset_encoder(encoder: PatchEncoder, to_decoder: nn.Linear, path: str) -> None:
    """Load ``manage.py import_weights act_encoder``'s file into ``encoder`` and start
    ``to_decoder`` as the released code does: a freshly initialised ``encoder_linear`` after
    the pretrained AudioSet head ``mlp_head.1`` (the two folded into one linear map)."""
    if encoder.cls_token is None:
        raise ValueError("model.encoder_init: the AudioSet encoder needs model.form=code")
    state = read_state_dict(path)
    head_weight, head_bias = state.pop("head.weight", None), state.pop("head.bias", None)
    if head_weight is None or head_bias is None:
        raise ValueError(f"{path}: not an imported ACT encoder (no head.weight / head.bias)")
    own = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}
    for key, value in own.items():
        if key not in state:
            raise ValueError(f"{path}: nothing for {key!r}")
        if state[key].shape != value.shape:
            hint = " (the released encoder: model.max_frames=500)" if "position" in key else ""
            raise ValueError(
                f"{path}: {key!r} has shape {tuple(state[key].shape)}, the model "
                f"{tuple(value.shape)}{hint}"
            )
    extra = sorted(set(state) - set(own))
    if extra:
        raise ValueError(f"{path}: {extra[0]!r} has no place in the patch encoder")
    encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in state.items()})
    if head_weight.shape[1] != encoder.project.out_features:
        raise ValueError(f"{path}: head.weight does not read the encoder's width")
    fresh = nn.Linear(head_weight.shape[0], to_decoder.out_features)
    with torch.no_grad():
        to_decoder.weight.copy_(fresh.weight @ head_weight)
        to_decoder.bias.copy_(fresh.weight @ head_bias + fresh.bias)
