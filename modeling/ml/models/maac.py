"""MAAC (DCASE 2021): a keyword encoder and a multi-modal attention LSTM decoder.

Two forms (``MAACConfig.form``). "code", the default, is the authors' released network
(WangHelin1997/DCASE2021_Task6_PKU @ 1d36c81): the paper's numbers came from it and the
authors' checkpoints only fit it (``modeling.ml.released`` converts them). "paper" follows the
paper's equations where the code differs. Per step of the network, paper | code (file:line):

Keyword encoder (eq. 1-2): a CNN backbone (the paper's PANNs ResNet38, or a trainable small CNN
with the same ``forward_blocks`` interface) gives frame-level features after its 3rd, 4th and
last blocks (ResNet38: layer2, layer3, conv_block_after1), each averaged over frequency; then

    paper:  f_k = Linear_k(GAP_t(x_k))
    code:   f_k = ReLU(Linear_k(max_t x_k + mean_t x_k))   encoder.py:595-611 (Tag.forward)

and ``y = sigma(Linear([f1; f2; f3]))`` scores the N keywords, trained with BCE
(``MAACCaptioner.keyword_loss``) before the captioner, then frozen while it trains. (The code
concatenates [f_last; f_2; f_3]; the converter permutes the classifier's columns.)

Decoder: acoustic features X (a linear layer on the last block), the embeddings W of the top K
predicted keywords and the embeddings P of the previous words, all C-dimensional, are read by
attention modules Psi (eq. 3-6) given the previous LSTM state h::

    A = ReLU((F W_i + b_i) + (h W_s + b_s))    alpha = softmax(A W_n + b_n)
    paper:  o = GLU([sum alpha F ; h]) = (sum alpha F) * sigma(h)
    code:   o = sigma(f_beta(h)) * sum alpha V(F)    model.py:50-68 (Attention), 259-273

with a gate layer f_beta per input (acoustic, keyword, previous word) but, as in the paper, ONE
semantic module Psi_s for both W and P (model.py:268 reads the tags with preword_attention).
Initial state: paper ``h_0 = GAP(X), c_0 = 0``; code ``h_0 = init_h(mean X), c_0 =
init_c(mean X)`` (model.py:170-171, 206-216). The previous-word memory P starts with the
``<bos>`` embedding (paper) or a zero vector (code, model.py:249), then holds w_1 .. w_{t}.
``h_t = LSTM(h_{t-1}, o_x + o_w + o_p + Emb(w_{t-1}))``, ``v_t = softmax(Linear(h_t))`` (eq. 7).
Dropout 0.5 on the word embeddings (and on the keyword embeddings in the paper form; the code
takes them detached, without dropout) and 0.25 before the classifier. Keyword embeddings are a
table of their own here; the code looks keywords up in the caption word table
(``TaggingToEmbs.p``), which the converter copies rows from.

Released-code behaviour not reproduced (bugs): its beam search never feeds the previous words
to the semantic attention (model.py:444-596), and its SCST mask counts tokens after the first
``<eos>``; Earmark's decoding and ``modeling.ml.scst`` do both as the paper describes.
Self-critical fine-tuning is ``modeling.ml.scst``.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from modeling.ml.config_av import MAACConfig
from modeling.ml.encoders import PannsConfig, ResNet38, load_weights
from modeling.ml.keywords import top_keywords
from modeling.ml.models.base import (
    Batch,
    Captioner,
    Memory,
    State,
    lengths_to_mask,
    masked_mean,
    masked_softmax,
)
from modeling.ml.vocab import PAD_ID

# keyword encoder ---------------------------------------------------------------------------


class KeywordCNN(nn.Module):
    """Trainable small CNN on log-mels with ResNet38's multi-level interface.

    Conv-BN-ReLU blocks, each pooling frequency by 2 (and time by 2 in the first
    ``time_pools``); padded frames are zeroed before every convolution, so in eval mode a clip's
    outputs do not depend on what it is batched with.
    """

    def __init__(self, n_mels: int, channels: tuple[int, ...], time_pools: int) -> None:
        super().__init__()
        if len(channels) < 4:
            raise ValueError(f"the keyword CNN needs at least 4 blocks, got {len(channels)}")
        self.time_pools = time_pools
        self.n_mels = n_mels
        previous = 1
        blocks = []
        for width in channels:
            blocks.append(
                nn.Sequential(
                    nn.Conv2d(previous, width, 3, padding=1, bias=False),
                    nn.BatchNorm2d(width),
                    nn.ReLU(inplace=True),
                )
            )
            previous = width
        self.blocks = nn.ModuleList(blocks)
        self.level_dims = (channels[2], channels[3], channels[-1])

    @property
    def reduction(self) -> int:
        return 2**self.time_pools

    def forward_blocks(self, features: Tensor, lengths: Tensor) -> list[tuple[Tensor, Tensor]]:
        """(B, T, n_mels) -> [(B, T_k, C_k), lengths_k] after the 3rd, 4th and last blocks,
        each averaged over frequency."""
        if features.dim() != 3 or features.size(2) != self.n_mels:
            raise ValueError(
                f"keyword CNN expects (B, T, {self.n_mels}) features, got {tuple(features.shape)}"
            )
        if int(lengths.min()) < self.reduction:
            raise ValueError(f"keyword CNN: every clip needs at least {self.reduction} frames")
        x = features[:, None]
        outputs = []
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = x * lengths_to_mask(lengths, x.size(2))[:, None, :, None]
            x = block(x)
            time_pool = 2 if i < self.time_pools else 1
            x = F.max_pool2d(x, (time_pool, 2 if x.size(3) >= 2 else 1))
            lengths = lengths // time_pool
            if i in (2, 3, last):
                outputs.append((x.mean(dim=3).transpose(1, 2), lengths))
        return outputs


class KeywordEncoder(nn.Module):
    """Multi-level keyword tagger: GAP of three backbone levels -> f1, f2, f3 -> N logits."""

    def __init__(self, config: MAACConfig) -> None:
        super().__init__()
        if config.backbone == "cnn":
            self.backbone: KeywordCNN | ResNet38 = KeywordCNN(
                config.feature_dim, config.cnn_channels, config.cnn_time_pools
            )
            level_dims = self.backbone.level_dims
        elif config.backbone == "resnet38":
            panns = PannsConfig(
                n_mels=config.feature_dim,
                widths=config.panns_widths,
                resnet_layers=config.panns_layers,
                embedding_dim=config.panns_widths[-1],
            )
            self.backbone = ResNet38(panns)
            if config.backbone_weights:
                load_weights(self.backbone, config.backbone_weights, name="resnet38")
            level_dims = self.backbone.level_dims
        else:
            raise ValueError(f"unknown keyword-encoder backbone {config.backbone!r}")
        self.levels = nn.ModuleList(nn.Linear(dim, config.level_dim) for dim in level_dims)
        self.classifier = nn.Linear(len(level_dims) * config.level_dim, config.num_keywords)
        self.last_dim = level_dims[-1]
        self.code_form = config.form == "code"

    def _level(self, level: nn.Module, x: Tensor, lengths: Tensor) -> Tensor:
        if not self.code_form:
            return level(masked_mean(x, lengths))  # paper: GAP
        # encoder.py:597-611: max + mean over time, dropout 0.2, ReLU after the linear layer
        valid = lengths_to_mask(lengths, x.size(1)).unsqueeze(-1)
        pooled = x.masked_fill(~valid, float("-inf")).amax(dim=1) + masked_mean(x, lengths)
        return torch.relu(level(F.dropout(pooled, p=0.2, training=self.training)))

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """-> keyword logits (B, N) (eq. 1 before the sigmoid), last-block frames (B, T', C),
        their lengths (B,)."""
        blocks = self.backbone.forward_blocks(features, lengths)
        pooled = [
            self._level(level, x, n) for level, (x, n) in zip(self.levels, blocks, strict=True)
        ]
        last, last_lengths = blocks[-1]
        return self.classifier(torch.cat(pooled, dim=-1)), last, last_lengths


# decoder -----------------------------------------------------------------------------------


class GLUAttention(nn.Module):
    """Psi (eq. 3-6): additive attention over F given the LSTM state h, gated.

    ``value=True`` is the released code's form (model.py:50-68, ``Attention``): the context is
    sum alpha V(F) with a value projection V, and the caller passes the gate layer f_beta.
    """

    def __init__(self, dim: int, attention_dim: int, *, value: bool = False) -> None:
        super().__init__()
        self.feature = nn.Linear(dim, attention_dim)  # W_i, b_i (code: K)
        self.state = nn.Linear(dim, attention_dim)  # W_s, b_s (code: Q)
        self.score = nn.Linear(attention_dim, 1)  # W_n, b_n (code: full_att)
        self.value = nn.Linear(dim, dim) if value else None  # code: V

    def forward(
        self, features: Tensor, mask: Tensor, hidden: Tensor, gate: nn.Linear | None = None
    ) -> tuple[Tensor, Tensor]:
        """features F (B, N, C), mask (B, N), hidden h (B, C) -> o (B, C), alpha (B, N).

        Without ``gate``: o = GLU([sum alpha F ; h]) (eq. 5-6); with it: o = sigma(gate(h)) *
        context (model.py:260-273)."""
        a = torch.relu(self.feature(features) + self.state(hidden).unsqueeze(1))  # eq. 3
        alpha = masked_softmax(self.score(a).squeeze(-1), mask)  # eq. 4
        values = self.value(features) if self.value is not None else features
        context = torch.einsum("bn,bnc->bc", alpha, values)
        if gate is not None:
            return torch.sigmoid(gate(hidden)) * context, alpha
        return F.glu(torch.cat([context, hidden], dim=-1), dim=-1), alpha  # eq. 5-6


class MAACCaptioner(Captioner):
    """Keyword encoder + acoustic/semantic GLU attention + LSTM decoder."""

    config: MAACConfig

    def __init__(self, config: MAACConfig) -> None:
        super().__init__()
        self.config = config
        c = config.hidden_dim
        if not 1 <= config.top_k <= config.num_keywords:
            raise ValueError(
                f"top_k={config.top_k} must be between 1 and num_keywords={config.num_keywords}"
            )
        self.keyword_encoder = KeywordEncoder(config)
        # True while the trainer's fine-tune stage trains the whole model (set_whole_model)
        self.whole_model = False
        self.acoustic = nn.Linear(self.keyword_encoder.last_dim, c)  # X = linear(last block)
        self.keyword_embedding = nn.Embedding(config.num_keywords, c)
        self.embedding = nn.Embedding(config.vocab_size, c, padding_idx=PAD_ID)
        code = config.form == "code"
        self.code_form = code
        self.acoustic_attention = GLUAttention(c, config.attention_dim, value=code)  # Psi_x
        # Psi_s, for W and P
        self.semantic_attention = GLUAttention(c, config.attention_dim, value=code)
        if code:
            # f_beta, f_beta_taggingword, f_beta_preword and init_h, init_c (model.py:154-189)
            self.acoustic_gate = nn.Linear(c, c)
            self.keyword_gate = nn.Linear(c, c)
            self.word_gate = nn.Linear(c, c)
            self.init_h = nn.Linear(c, c)
            self.init_c = nn.Linear(c, c)
        self.lstm = nn.LSTMCell(c, c)
        self.embedding_dropout = nn.Dropout(config.embedding_dropout)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(c, config.vocab_size)

    # -------------------------------------------------------------- keyword encoder

    def keyword_logits(self, batch: Batch) -> Tensor:
        """(B, N) keyword logits, with gradients (for pre-training and analysis)."""
        logits, _, _ = self.keyword_encoder(batch["features"], batch["feature_lengths"])
        return logits

    def keyword_loss(self, batch: Batch) -> Tensor:
        """BCE of the keyword encoder against batch["keyword_targets"] (B, N) multi-hot (eq. 2).

        The pre-training stage: optimise the keyword encoder's parameters on this (the backbone's
        too, or leave them out of the optimiser to train the head on a frozen PANNs backbone).
        """
        if "keyword_targets" not in batch:
            raise ValueError("keyword pre-training needs batch['keyword_targets'] (B, N) multi-hot")
        targets = batch["keyword_targets"].float()
        if targets.shape[-1] != self.config.num_keywords:
            raise ValueError(
                f"keyword_targets has {targets.shape[-1]} columns, "
                f"the model has num_keywords={self.config.num_keywords}"
            )
        return F.binary_cross_entropy_with_logits(self.keyword_logits(batch), targets)

    def pretrain_loss(self, batch: Batch, *, label_smoothing: float = 0.0) -> Tensor:
        """The trainer's pre-training stages (``train.pretrain_frozen_epochs``,
        ``train.pretrain_epochs``): ``keyword_loss``. ``label_smoothing`` is for captions;
        the keyword targets are taken as they are (mixup softens them)."""
        return self.keyword_loss(batch)

    def pretrain_frozen_parameters(self) -> Iterator[nn.Parameter]:
        """The keyword encoder's backbone, fixed while pre-training starts on the heads
        (MAAC keeps its pretrained ResNet38 frozen for 80 epochs)."""
        return self.keyword_encoder.backbone.parameters()

    def set_whole_model(self, enabled: bool) -> None:
        """The trainer's fine-tune stage hook: while enabled the keyword encoder trains with
        the captioner even when ``freeze_keyword_encoder`` keeps it fixed in caption
        training (MAAC's released code: train.py run without --freeze_cnn, finetune.py)."""
        self.whole_model = enabled

    def _keyword_encoder_outputs(self, batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
        features, lengths = batch["features"], batch["feature_lengths"]
        if not self.config.freeze_keyword_encoder or self.whole_model:
            return self.keyword_encoder(features, lengths)
        # Frozen while the captioner trains: no gradients, BatchNorm statistics as pre-trained.
        was_training = self.keyword_encoder.training
        self.keyword_encoder.eval()
        try:
            with torch.no_grad():
                return self.keyword_encoder(features, lengths)
        finally:
            self.keyword_encoder.train(was_training)

    # -------------------------------------------------------------- captioner

    def encode(self, batch: Batch) -> Memory:
        """-> acoustic X (B, T', C) and mask, keyword embeddings W (B, K, C), h0 and c0 (B, C)."""
        logits, last, last_lengths = self._keyword_encoder_outputs(batch)
        keywords = batch.get("keywords")
        if keywords is None:
            keywords = top_keywords(logits, self.config.top_k)
        acoustic = self.acoustic(last)
        mask = lengths_to_mask(last_lengths, acoustic.size(1))
        mean = masked_mean(acoustic, last_lengths)
        keyword_vectors = self.keyword_embedding(keywords)
        if self.code_form:
            # model.py:206-216 (init_hidden_state); the tags are read detached, no dropout
            h0, c0 = self.init_h(mean), self.init_c(mean)
        else:
            h0, c0 = mean, torch.zeros_like(mean)  # h_0 = GAP(X)
            keyword_vectors = self.embedding_dropout(keyword_vectors)
        return {
            "acoustic": acoustic,
            "acoustic_mask": mask,
            "keywords": keyword_vectors,
            "h": h0,
            "c": c0,
        }

    def _step(
        self, memory: Memory, words: Tensor, word_mask: Tensor, h: Tensor, c: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """One LSTM step; ``words`` (B, t, C) are the embeddings of w_0 .. w_{t-1}."""
        code = self.code_form
        o_x, _ = self.acoustic_attention(
            memory["acoustic"], memory["acoustic_mask"], h, self.acoustic_gate if code else None
        )
        keyword_mask = torch.ones(
            memory["keywords"].shape[:2], dtype=torch.bool, device=words.device
        )
        o_w, _ = self.semantic_attention(
            memory["keywords"], keyword_mask, h, self.keyword_gate if code else None
        )
        previous = words
        if code:  # model.py:249: the memory opens with a zero vector where <bos> would be
            previous = torch.cat([torch.zeros_like(words[:, :1]), words[:, 1:]], dim=1)
        o_p, _ = self.semantic_attention(previous, word_mask, h, self.word_gate if code else None)
        h, c = self.lstm(o_x + o_w + o_p + words[:, -1], (h, c))
        return self.out(self.dropout(h)), h, c

    def forward(self, batch: Batch) -> Tensor:
        memory = self.encode(batch)
        tokens = batch["tokens"]
        words = self.embedding_dropout(self.embedding(tokens))
        word_mask = tokens != PAD_ID
        h, c = memory["h"], memory["c"]
        logits = []
        for t in range(tokens.size(1)):
            step_logits, h, c = self._step(memory, words[:, : t + 1], word_mask[:, : t + 1], h, c)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)

    def step(self, memory: Memory, tokens: Tensor, state: State | None) -> tuple[Tensor, State]:
        if state is None:
            state = {"h": memory["h"], "c": memory["c"]}
        words = self.embedding_dropout(self.embedding(tokens))
        logits, h, c = self._step(memory, words, tokens != PAD_ID, state["h"], state["c"])
        return torch.log_softmax(logits.float(), dim=-1), {"h": h, "c": c}
