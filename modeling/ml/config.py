"""Typed configurations for the captioners and the trainer (named presets: ``presets``).

Every model config is a flat dataclass; ``asdict(cfg)`` is what a checkpoint stores as
``model_args`` and what ``TrainingRun.config`` keeps, and ``config_from_dict`` rebuilds it strictly
(an unknown key is an error, never silently ignored). ``apply_overrides`` implements the
``--set key=value`` command-line style with dotted keys into nested dataclasses and type checking.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self, TypeVar

C = TypeVar("C")


class ConfigError(ValueError):
    """A config key or value is wrong; the message names the key."""


# --------------------------------------------------------------------------- model configs


@dataclass
class CaptionerConfig:
    """Fields every captioner has."""

    # V: number of words in the vocabulary; filled in from the Vocabulary when the model is built.
    vocab_size: int = 0
    # F: size of one input feature frame (e.g. 128 for VGGish embeddings, 64 for 64 log-mels).
    feature_dim: int = 128
    # Dropout probability used throughout the model (0 disables it).
    dropout: float = 0.2
    # Audio encoder between the features and the captioner (modeling.ml.encoders):
    # "trainable" feeds the features straight to the captioner's own trainable layers;
    # "vggish", "panns" (CNN14), "panns_resnet38", "ast" and "yamnet" put that pretrained
    # network in front, and the captioner then reads its embeddings. With an encoder,
    # feature_dim is still the size of the input frames (what the encoder reads).
    encoder: Literal["trainable", "vggish", "panns", "panns_resnet38", "ast", "yamnet"] = (
        "trainable"
    )
    # state_dict file of the pretrained encoder, read once when training starts (never
    # downloaded); required for any encoder but "trainable". The trained weights are then
    # part of the checkpoint, so inference does not need the file.
    encoder_weights: str = ""
    # Keep the pretrained encoder fixed (eval mode, no gradients); False fine-tunes it too.
    encoder_freeze: bool = True
    # Architecture options of the encoder (fields of its config in modeling.ml.encoders, e.g.
    # {"output": "fc2"} for VGGish); its input bins always follow feature_dim. JSON on the
    # command line: model.encoder_options={"output": "fc2"}.
    encoder_options: dict[str, Any] = field(default_factory=dict)

    # Hooks of the data pipeline (modeling.datasets), which asks the config what the model
    # reads beyond features and captions; a model that needs more overrides them.

    def attribute_words_from(self) -> Literal["retrieval", "labels"] | None:
        """Where each clip's attribute words (batch["attributes"]) come from; None: the model
        reads none."""
        return None

    def keyword_targets_size(self) -> int:
        """How many keywords the training captions should yield for per-clip keyword targets
        (batch["keyword_targets"]); 0: the model trains without them."""
        return 0

    def with_keywords_found(self, found: int) -> Self:
        """This config for a corpus whose captions held only ``found`` keywords."""
        return self

    def reads_two_levels(self) -> bool:
        """Whether the model reads a high and a mid feature level (batch["features"] and
        batch["mid_features"]) when its pretrained encoder provides both (TopDown)."""
        return False

    def word_vectors_file(self) -> str:
        """A word-vector file (fastText text format) to start the word embeddings from;
        "" when the model takes none."""
        return ""

    def check_training(self, train: TrainConfig) -> None:
        """Raise ConfigError for training settings this model cannot train with."""

    def adapted_training(self, train: TrainConfig) -> dict[str, tuple[Any, str]]:
        """Training settings a recipe sets that this config cannot use as they are:
        {train field: (the value to use, why)}; run setup applies them unless the run's
        settings name the field."""
        return {}


@dataclass
class NearestNeighbourConfig(CaptionerConfig):
    """1NN retrieval (Kim et al. 2019): no trainable parameters, only a bank of training clips."""

    # Longest retrieved caption kept in the bank, in tokens including <bos>/<eos>.
    max_caption_length: int = 32
    # How many of the neighbour's label words are kept as attribute words.
    max_attributes: int = 16


@dataclass
class LSTMConfig(CaptionerConfig):
    """LSTM baseline: a biLSTM summary of the clip is the decoder's initial state."""

    # Word embedding size (300 in the paper, matching word2vec/GloVe).
    embed_dim: int = 300
    # Hidden units per direction of the biLSTM audio encoder.
    encoder_dim: int = 256
    # Hidden units of the 1-layer LSTM decoder.
    decoder_dim: int = 512
    # Layer-normalise the decoder output before the word classifier (the paper's "layer norm").
    layer_norm: bool = True
    # Word vectors (fastText's text .vec format, embed_dim values per word) the word
    # embeddings start from, a file in ENCODER_WEIGHTS_DIR; "" starts them at random.
    word_vectors: str = ""

    def word_vectors_file(self) -> str:
        return self.word_vectors


@dataclass
class TempAttConfig(LSTMConfig):
    """TempAtt: the LSTM baseline plus Luong global attention over the encoder time steps."""


@dataclass
class TopDownConfig(CaptionerConfig):
    """TopDown multi-scale encoder with optional aligned semantic attention (attention flow)."""

    # Word embedding size, shared by decoder words and attribute words.
    embed_dim: int = 300
    # Hidden units per direction of each encoder biLSTM (high, mid and attribute-word levels).
    encoder_dim: int = 256
    # Size of the separate mid-level frames (batch["mid_features"], e.g. VGGish conv4). 0 means
    # there is a single feature level: the input frames are taken as the mid level c_t and the
    # high level f_t is derived from them by a learned 2-layer MLP, as VGGish's fc layers sit on
    # top of its conv4 block.
    mid_feature_dim: int = 0
    # Hidden units of the 1-layer LSTM decoder.
    decoder_dim: int = 512
    # Use attribute words through attention flow (TopDown-AlignedAtt); False gives plain TopDown.
    aligned_attention: bool = True
    # Where attribute words come from: the nearest training clip's labels ("retrieval", realistic)
    # or the clip's own ground-truth labels ("labels", an upper bound). The data pipeline fills
    # batch["attributes"] accordingly (nn_retrieval.with_retrieved_attributes does the lookup);
    # the model itself only reads the tensor.
    attribute_source: Literal["retrieval", "labels"] = "retrieval"
    # Word vectors the word embeddings start from (as LSTMConfig.word_vectors).
    word_vectors: str = ""

    def attribute_words_from(self) -> Literal["retrieval", "labels"] | None:
        return self.attribute_source if self.aligned_attention else None

    def reads_two_levels(self) -> bool:
        return True

    def word_vectors_file(self) -> str:
        return self.word_vectors


@dataclass
class ACTConfig(CaptionerConfig):
    """ACT (Liu et al. 2023): patch Transformer on log-mels + Transformer decoder."""

    # Log-mel bins per frame: 64 in the paper.
    feature_dim: int = 64
    # Frames per non-overlapping patch along time (the paper's 4x64 patches).
    patch_frames: int = 4
    # Longest input in frames; sizes the learnable positional embedding (10 s at hop 640 ~ 501).
    max_frames: int = 1024
    # Width of the ViT-style encoder blocks.
    encoder_dim: int = 768
    # Number of encoder blocks (12 in the paper).
    encoder_layers: int = 12
    # Attention heads per encoder block.
    encoder_heads: int = 12
    # d: width of the decoder; encoder outputs are projected to it (512 in the paper).
    decoder_dim: int = 512
    # Number of Transformer decoder blocks (4 for ACT-m).
    decoder_layers: int = 4
    # Attention heads per decoder block.
    decoder_heads: int = 8
    # Feed-forward width as a multiple of the block width.
    ff_mult: int = 4
    # Longest caption in tokens; sizes the decoder's learnable positional embedding.
    max_caption_length: int = 64
    # Which of the two published descriptions the network computes: "code" is the authors'
    # released code (XinhaoMei/ACT, models/AudioTransformer.py and TransModel.py: BatchNorm
    # over the mel bins, a CLS token, ReLU after the projection to d, post-norm decoder blocks
    # without a final norm), which the released checkpoints fit and the paper's numbers came
    # from; "paper" is the paper's text as Earmark first read it (no BatchNorm, no CLS, no
    # ReLU, pre-norm decoder with a final LayerNorm). Checkpoints written before this field
    # existed are the "paper" form (modeling.ml.checkpoint migrates them).
    form: Literal["code", "paper"] = "code"
    # A weights file from `manage.py import_weights act_encoder` (ACT's AudioSet-pretrained
    # encoder, in ENCODER_WEIGHTS_DIR): the patch encoder starts from it, and the projection to
    # d from a fresh linear layer on its AudioSet head, as the released encoder_linear sits on
    # mlp_head.1 (TransModel.py:118-121). Needs the code form at the file's sizes (the
    # released one: max_frames 500). Read when the model is built, like MAAC's
    # backbone_weights; "" starts from random weights.
    encoder_init: str = ""


# Adam's rate for a BiLSTM captioner that reads filterbanks instead of pretrained embeddings.
BILSTM_FILTERBANK_LR = 1e-3


@dataclass
class BiLSTMConfig(CaptionerConfig):
    """Light-weight BiLSTM encoder + temporal-attention LSTM decoder (MODELS.md section 4)."""

    # YAMNet penultimate layer is 1024-d (AST [CLS] would be 768).
    feature_dim: int = 1024
    # Hidden units per direction of the stacked biLSTM encoder.
    encoder_dim: int = 256
    # Number of stacked biLSTM layers.
    encoder_layers: int = 2
    # Word embedding size.
    embed_dim: int = 256
    # Hidden units of the LSTM decoder.
    decoder_dim: int = 512
    # Width of the additive temporal attention (W_e, W_h map to this size).
    attention_dim: int = 256

    def adapted_training(self, train: TrainConfig) -> dict[str, tuple[Any, str]]:
        # The paper's 1e-4 trains a BiLSTM over frozen audio-event embeddings that already
        # name the events; over filterbanks it has to learn the detector too, which 1e-4
        # does not do in a run's steps (benchmarks/RESULTS.md, 2026-11-27).
        if self.encoder == "trainable" and train.lr < BILSTM_FILTERBANK_LR:
            return {
                "lr": (
                    BILSTM_FILTERBANK_LR,
                    "no pretrained audio-event embeddings (model.encoder yamnet or ast): the "
                    "BiLSTM learns from filterbanks, too slowly at the paper's rate "
                    "(SynthScenes, 1,000 clips, 30 epochs: CIDEr-D 0.434 at 1e-4, 1.242 at 1e-3)",
                )
            }
        return {}


# --------------------------------------------------------------------------- text and training


@dataclass
class VocabConfig:
    """How the word vocabulary is built from the training captions."""

    # Keep a word only if it occurs at least this often in the training captions (10 for BiLSTM).
    min_count: int = 1
    # Longest caption in words; longer ones are truncated (20 for BiLSTM). <bos>/<eos> not counted.
    max_length: int = 30


@dataclass
class DecodingConfig:
    """How a trained run captions clips."""

    # Beam width of the val/test scores when training ends, and of suggestions unless they
    # ask for another (1 decodes greedily).
    beam_size: int = 3
    # Beam hypotheses are ranked by log-probability / (tokens emitted) ** length_penalty:
    # 1.0 the mean per token (every recipe but maac-code), 0 the raw sum; MAAC's released
    # code ranks by logp / len ** 1.15 (model.py, translate_beam_search's alpha).
    length_penalty: float = 1.0


@dataclass
class TrainConfig:
    """Model-agnostic training loop settings."""

    # Passes over the training set.
    epochs: int = 15
    # Captions per batch.
    batch_size: int = 32
    # "adam" or "adamw" (decoupled weight decay).
    optimizer: Literal["adam", "adamw"] = "adam"
    # Peak learning rate (reached after warm-up).
    lr: float = 1e-4
    # Adam beta1, beta2.
    betas: tuple[float, float] = (0.9, 0.999)
    # Adam epsilon.
    eps: float = 1e-8
    # Weight decay (L2 for adam, decoupled for adamw).
    weight_decay: float = 0.0
    # Adam's AMSGrad variant (MAAC's released code trains with it and weight decay 1e-6).
    amsgrad: bool = False
    # Linear warm-up from 0 over this many epochs of caption training (ACT: 5 of 15);
    # fractional epochs allowed.
    warmup_epochs: float = 0.0
    # Warm-up by whole epochs (epoch i of caption training at (i + 1) / warmup_epochs of the
    # rate, as ACT's code steps GradualWarmupScheduler once an epoch) instead of per batch.
    warmup_per_epoch: bool = False
    # Caption epochs (counted from 1) from which on the rate is multiplied by
    # lr_milestone_factor once more: (15, 25) runs epochs 15-24 at a tenth and 25- at a
    # hundredth, as ACT's code's StepLR(10, 0.1) behind its 5-epoch warm-up does
    # (scheduler_warmup.step(epoch) at each epoch's start); () keeps the rate.
    lr_milestones: tuple[int, ...] = ()
    lr_milestone_factor: float = 0.1
    # Linear warm-up from 0 over this share of every stage's steps (the AV captioner: 0.1);
    # use this or warmup_epochs.
    warmup_fraction: float = 0.0
    # The learning rate within each stage after its warm-up: "constant" (times the per-epoch
    # decay and plateau cuts), or "linear_decay" down to 0 at the stage's last step (the AV
    # captioner).
    lr_schedule: Literal["constant", "linear_decay"] = "constant"
    # Multiply the learning rate by this after every epoch (MAAC: 0.98; 1.0 keeps it constant).
    lr_decay_per_epoch: float = 1.0
    # Halve-on-plateau: after this many validations without improvement multiply the learning
    # rate by plateau_factor (BiLSTM: 3 epochs, 0.5). None disables it.
    plateau_patience: int | None = None
    # Factor applied to the learning rate on a plateau.
    plateau_factor: float = 0.5
    # The validation figure plateaus are judged on: "" the validation score (CIDEr-D in the
    # app), or a metric the score function also reports, e.g. "BLEU-4" (the BiLSTM paper).
    plateau_metric: str = ""
    # Clip the global gradient norm to this value; None disables clipping.
    grad_clip: float | None = 1.0
    # Cross-entropy label smoothing (0 disables it).
    label_smoothing: float = 0.1
    # Stop after this many validations without a better score; None trains all epochs.
    early_stopping_patience: int | None = 5
    # Validate (and maybe save the best checkpoint) every this many epochs.
    validate_every: int = 1
    # Also save the "last" checkpoint every this many steps (a crash then loses little);
    # None saves it once per epoch.
    checkpoint_every_steps: int | None = None
    # Call progress callbacks every this many optimisation steps.
    log_every_steps: int = 10
    # Mixed precision on CUDA (bfloat16 where supported, else float16 with loss scaling).
    amp: bool = True
    # "auto" picks cuda when available, else cpu; or any torch device string ("cuda:1", "cpu").
    device: str = "auto"
    # Seed for parameters, dropout and batch order; the same seed gives the same run.
    seed: int = 0
    # DataLoader worker processes (0 loads batches in the training process).
    num_workers: int = 0
    # Length bucketing: sort captions by clip length inside pools of this many batches, so a
    # batch pads little while the order stays random between pools.
    bucket_batches: int = 50
    # Epochs of the model's own pre-training stage before caption training (MAAC: the keyword
    # encoder's BCE, 25 epochs fine-tuning the whole encoder; the AV captioner: MBP); 0 skips
    # it. Only models with a ``pretrain_loss`` have such a stage.
    pretrain_epochs: int = 0
    # Learning rate of the pre-training stage (None: lr).
    pretrain_lr: float | None = None
    # Epochs of pre-training before those, with the model's pretrained backbone frozen (MAAC:
    # 80, the ResNet38 fixed while the keyword heads learn); 0 skips them. Only models with
    # ``pretrain_frozen_parameters`` have such a stage.
    pretrain_frozen_epochs: int = 0
    # Learning rate of the frozen-backbone pre-training (None: pretrain_lr, else lr).
    pretrain_frozen_lr: float | None = None
    # Mixup (Zhang et al. 2018) in the pre-training stages: each clip's features and
    # keyword targets are mixed with another clip's of the batch, lambda ~ Beta(alpha, alpha)
    # (MAAC: 1.0, as PANNs); 0 disables it.
    pretrain_mixup_alpha: float = 0.0
    # SpecAugment++ (Wang et al. 2021) in the pre-training stages: stripes of time frames and
    # frequency bins of each clip's features replaced by "mixture" (the mean of the clip and
    # another clip of the batch, MAAC's choice) or "cut" (the other clip's); "off" disables it.
    pretrain_spec_augment_pp: Literal["off", "mixture", "cut"] = "off"
    # Widest SpecAugment++ time stripe, in feature frames, and stripes per clip (MAAC: 64, 3).
    spec_pp_time_mask: int = 64
    spec_pp_time_masks: int = 3
    # Widest SpecAugment++ frequency stripe, in bins, and stripes per clip (MAAC: 5, 2).
    spec_pp_freq_mask: int = 5
    spec_pp_freq_masks: int = 2
    # Epochs of self-critical fine-tuning (modeling.ml.scst) after caption training, on the
    # reward the caller supplies (CIDEr-D in the app); 0 skips it. Starts from the best
    # caption-training weights.
    scst_epochs: int = 0
    # Learning rate of the self-critical stage (MAAC: 5e-5); decays per epoch like lr.
    scst_lr: float = 5e-5
    # The weights the self-critical stage starts from: the "best" validated caption
    # training, or the "last" caption epoch's (MAAC: from its 30th CE epoch).
    scst_from: Literal["best", "last"] = "best"
    # Captions sampled per clip in the self-critical stage (each against the greedy baseline).
    scst_samples: int = 1
    # Epochs of a second caption (cross-entropy) stage after caption training and before
    # SCST, on the whole model: a model that keeps a part fixed while captions train (MAAC's
    # keyword encoder) trains all of it here (its ``set_whole_model`` hook). 0 skips it.
    # MAAC's released code: 15 epochs at 2e-5, batch 8 (run.py, finetune.py).
    finetune_epochs: int = 0
    # Learning rate of that stage; decays per epoch like lr.
    finetune_lr: float = 2e-5
    # Batch sizes per stage (None: batch_size): the frozen-backbone and whole pre-training
    # (clips per batch; MAAC's code: 64 and 16, Tag_train.py), the fine-tune stage (8).
    pretrain_frozen_batch_size: int | None = None
    pretrain_batch_size: int | None = None
    finetune_batch_size: int | None = None
    # Scheduled sampling (Bengio et al. 2015) in the cross-entropy stages (captions and
    # fine-tune): each input word after <bos> is replaced, with probability p, by the
    # model's own prediction of it; p rises linearly over each such stage's epochs to this
    # value at its last epoch (p = max * (i + 1) / E in epoch i of E), as MAAC's released code
    # lowers its teacher-forcing ratio from 1 to 0.7 (model.py: linear_decay(epoch,
    # max_epoch, rate=.7)). 0 disables it (plain teacher forcing). See
    # ``modeling.ml.scheduled_sampling``.
    scheduled_sampling: float = 0.0
    # SpecAugment (Park et al. 2019) on the input features of every training batch, drawn
    # afresh each step; validation, scoring and inference never see it.
    spec_augment: bool = False
    # Widest time mask, in feature frames (40 = 0.8 s of 50 frames/s log-mel).
    spec_time_mask: int = 40
    # Widest frequency mask, in feature bins.
    spec_freq_mask: int = 8
    # Time masks per clip.
    spec_time_masks: int = 2
    # Frequency masks per clip.
    spec_freq_masks: int = 2
    # Share of the clips in a batch that are augmented at all.
    spec_p: float = 1.0


@dataclass
class RunConfig:
    """Everything that defines a training run; what ``--set`` overrides address."""

    # Registry name of the model ("lstm", "tempatt", "topdown", "act", "bilstm", "nn").
    model_name: str = "lstm"
    # The model's own config dataclass.
    model: CaptionerConfig = field(default_factory=LSTMConfig)
    # Vocabulary building settings.
    vocab: VocabConfig = field(default_factory=VocabConfig)
    # Training loop settings.
    train: TrainConfig = field(default_factory=TrainConfig)
    # Decoding settings of the trained model.
    decoding: DecodingConfig = field(default_factory=DecodingConfig)


def check_train_config(config: TrainConfig) -> None:
    """Raise ConfigError for training settings no run can use (checked when a run is
    started, before anything trains)."""
    if config.warmup_epochs and config.warmup_fraction:
        raise ConfigError(
            "config keys 'train.warmup_epochs' and 'train.warmup_fraction': set one of them"
        )
    if not 0.0 <= config.warmup_fraction < 1.0:
        raise ConfigError(
            f"config key 'train.warmup_fraction': must be in [0, 1), got {config.warmup_fraction}"
        )
    if config.pretrain_mixup_alpha < 0:
        raise ConfigError(
            "config key 'train.pretrain_mixup_alpha': must be >= 0, "
            f"got {config.pretrain_mixup_alpha}"
        )
    if not 0.0 <= config.scheduled_sampling <= 1.0:
        raise ConfigError(
            "config key 'train.scheduled_sampling': must be in [0, 1], "
            f"got {config.scheduled_sampling}"
        )
    for key in ("pretrain_frozen_batch_size", "pretrain_batch_size", "finetune_batch_size"):
        size = getattr(config, key)
        if size is not None and size < 1:
            raise ConfigError(f"config key 'train.{key}': must be at least 1, got {size}")
    stripes = {
        "finetune_epochs": config.finetune_epochs,
        "spec_pp_time_mask": config.spec_pp_time_mask,
        "spec_pp_time_masks": config.spec_pp_time_masks,
        "spec_pp_freq_mask": config.spec_pp_freq_mask,
        "spec_pp_freq_masks": config.spec_pp_freq_masks,
        "pretrain_frozen_epochs": config.pretrain_frozen_epochs,
    }
    for key, value in stripes.items():
        if value < 0:
            raise ConfigError(f"config key 'train.{key}': must be >= 0, got {value}")
    if config.spec_augment:
        sizes = {
            "spec_time_mask": config.spec_time_mask,
            "spec_freq_mask": config.spec_freq_mask,
            "spec_time_masks": config.spec_time_masks,
            "spec_freq_masks": config.spec_freq_masks,
        }
        for key, value in sizes.items():
            if value < 0:
                raise ConfigError(f"config key 'train.{key}': must be >= 0, got {value}")
        if not 0.0 <= config.spec_p <= 1.0:
            raise ConfigError(f"config key 'train.spec_p': must be in [0, 1], got {config.spec_p}")


def check_decoding_config(config: DecodingConfig) -> None:
    """Raise ConfigError for decoding settings no run can use."""
    if not 1 <= config.beam_size <= 10:
        raise ConfigError(
            f"config key 'decoding.beam_size': must be between 1 and 10, got {config.beam_size}"
        )
    if not 0.0 <= config.length_penalty <= 3.0:
        raise ConfigError(
            "config key 'decoding.length_penalty': must be between 0 and 3, "
            f"got {config.length_penalty}"
        )


# --------------------------------------------------------------------------- dicts and overrides


def recorded_model_args(cls: type[CaptionerConfig], data: Mapping[str, Any]) -> dict[str, Any]:
    """A model config as recorded (a checkpoint's model_args, a run's stored config) with the
    fields later versions added filled in as that version computed them.

    ``form`` (MAAC, ACT, V-ACT): its default became the released code's network, but a record
    written before the field existed describes the paper form, and its weights only fit that.
    """
    data = dict(data)
    names = {f.name for f in dataclasses.fields(cls)}
    if "form" in names and "form" not in data:
        data["form"] = "paper"
    return data


def config_from_dict(cls: type[C], data: Mapping[str, Any], *, where: str = "") -> C:
    """Rebuild ``cls`` from ``asdict`` output (e.g. a checkpoint's model_args), strictly.

    Unknown keys are an error naming the key; values are type-checked like overrides, and JSON
    lists become tuples where the field is a tuple.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{where}{key}"
        if key not in names:
            raise ConfigError(
                f"unknown config key '{path}' for {cls.__name__} "
                f"(known: {', '.join(sorted(names))})"
            )
        kwargs[key] = _coerce(value, hints[key], path)
    return cls(**kwargs)


def apply_overrides(config: C, overrides: Mapping[str, Any] | Iterable[str]) -> C:
    """Return a copy of ``config`` with dotted-key overrides applied.

    ``overrides`` is either ``["train.lr=3e-4", "model.dropout=0.1"]`` (the ``--set`` form, values
    parsed from text) or a mapping ``{"train.lr": 3e-4}``. A key that does not exist or a value of
    the wrong type raises ConfigError naming the key.
    """
    pairs: list[tuple[str, Any]] = []
    if isinstance(overrides, Mapping):
        pairs = list(overrides.items())
    else:
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override '{item}' is not of the form key=value")
            pairs.append((key.strip(), value.strip()))
    for key, value in pairs:
        config = _set_path(config, key.split("."), value, key)
    return config


def _set_path(obj: Any, parts: list[str], value: Any, full_key: str) -> Any:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise ConfigError(f"config key '{full_key}': '{parts[0]}' is inside a non-config value")
    head, rest = parts[0], parts[1:]
    fields = {f.name for f in dataclasses.fields(obj)}
    if head not in fields:
        known = ", ".join(sorted(fields))
        raise ConfigError(
            f"unknown config key '{full_key}': {type(obj).__name__} has no '{head}' "
            f"(known: {known})"
        )
    current = getattr(obj, head)
    if rest:
        new = _set_path(current, rest, value, full_key)
    elif dataclasses.is_dataclass(current):
        raise ConfigError(f"config key '{full_key}' is a section; set one of its fields instead")
    else:
        new = _coerce(value, typing.get_type_hints(type(obj))[head], full_key)
    return dataclasses.replace(obj, **{head: new})


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Convert ``value`` (text from the command line, or JSON data) to ``hint`` or raise."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        is_none = value is None or (isinstance(value, str) and value.lower() in {"none", "null"})
        if is_none and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"config key '{key}': bad value {value!r}")
    if origin is Literal:
        if value in args:
            return value
        raise ConfigError(
            f"config key '{key}': {value!r} is not one of {', '.join(repr(a) for a in args)}"
        )
    if origin is tuple:
        items = value
        if isinstance(value, str):
            items = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(items, list | tuple):
            raise ConfigError(f"config key '{key}': expected a tuple, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], key) for v in items)
        if len(items) != len(args):
            raise ConfigError(f"config key '{key}': expected {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, key) for v, a in zip(items, args, strict=True))
    if origin is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise ConfigError(f"config key '{key}': not a JSON object ({exc})") from None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"config key '{key}': expected a JSON object, got {value!r}")
        return dict(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested config section
        if isinstance(value, hint):
            return value
        if isinstance(value, Mapping):
            return config_from_dict(hint, value, where=f"{key}.")
        raise ConfigError(f"config key '{key}': expected a {hint.__name__} mapping")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ConfigError(f"config key '{key}': expected true/false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"config key '{key}': expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"config key '{key}': expected an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"config key '{key}': expected a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"config key '{key}': expected text, got {value!r}")
    raise ConfigError(f"config key '{key}': unsupported field type {hint!r}")
