"""Named presets of every model config and of the training loop, and each model's recipe.

Model presets: "paper" follows MODELS.md, "small" trains on CPU in minutes, "tiny" is for unit
tests (seconds). Training presets are named after the paper whose recipe they follow. A
``Recipe`` is how a paper trains its model: its training preset, vocabulary, input features,
decoding and the model settings it needs; ``default_recipe(model_name)`` is what a run of that
model gets unless its settings say otherwise (``modeling.planning.run_spec`` applies it and
records it in the run; benchmarks read it too). The tables are complete once this module is
imported (nothing adds to them later), so ``model_preset("maac")`` works in a fresh
interpreter. Read them through ``model_preset``, ``train_preset`` and ``default_recipe``, which
return copies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from modeling.ml.config import (
    ACTConfig,
    BiLSTMConfig,
    CaptionerConfig,
    ConfigError,
    DecodingConfig,
    LSTMConfig,
    NearestNeighbourConfig,
    TempAttConfig,
    TopDownConfig,
    TrainConfig,
    VocabConfig,
)
from modeling.ml.config_av import AVConfig, MAACConfig, VACTConfig

# ACT's sizes, shared by the V-ACT family (whose configs extend ACT's)
_SMALL_ACT: dict[str, Any] = {
    "encoder_dim": 192,
    "encoder_layers": 4,
    "encoder_heads": 4,
    "decoder_dim": 192,
    "decoder_heads": 4,
    "decoder_layers": 2,
    "dropout": 0.1,
}
_TINY_ACT: dict[str, Any] = {
    "feature_dim": 8,
    "patch_frames": 2,
    "max_frames": 64,
    "encoder_dim": 16,
    "encoder_layers": 1,
    "encoder_heads": 2,
    "decoder_dim": 16,
    "decoder_layers": 1,
    "decoder_heads": 2,
    "ff_mult": 2,
    "max_caption_length": 16,
}


def _vact_presets() -> dict[str, CaptionerConfig]:
    return {
        "paper": VACTConfig(),
        "small": VACTConfig(**_SMALL_ACT),
        "tiny": VACTConfig(video_dim=6, max_video_frames=16, **_TINY_ACT),
    }


MODEL_PRESETS: dict[str, dict[str, CaptionerConfig]] = {
    "nn": {
        "paper": NearestNeighbourConfig(),
        "small": NearestNeighbourConfig(),
        "tiny": NearestNeighbourConfig(feature_dim=8, max_caption_length=12, max_attributes=4),
    },
    "lstm": {
        "paper": LSTMConfig(),
        "small": LSTMConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": LSTMConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "tempatt": {
        "paper": TempAttConfig(),
        "small": TempAttConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": TempAttConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "topdown": {
        "paper": TopDownConfig(),
        "small": TopDownConfig(embed_dim=128, encoder_dim=128, decoder_dim=256),
        "tiny": TopDownConfig(feature_dim=8, embed_dim=16, encoder_dim=12, decoder_dim=24),
    },
    "act": {
        "paper": ACTConfig(),
        "small": ACTConfig(**_SMALL_ACT),
        "tiny": ACTConfig(**_TINY_ACT),
    },
    "bilstm": {
        "paper": BiLSTMConfig(),
        "small": BiLSTMConfig(
            feature_dim=128, encoder_dim=128, embed_dim=128, decoder_dim=256, attention_dim=128
        ),
        "tiny": BiLSTMConfig(
            feature_dim=8, encoder_dim=12, embed_dim=16, decoder_dim=24, attention_dim=12
        ),
    },
    "vact": _vact_presets(),
    "vact_video": _vact_presets(),
    "vact_concat": _vact_presets(),
    "video_only": _vact_presets(),
    "maac": {
        "paper": MAACConfig(),
        "small": MAACConfig(
            num_keywords=100,
            cnn_channels=(32, 64, 128, 128, 256),
            level_dim=128,
            hidden_dim=256,
            attention_dim=128,
        ),
        "tiny": MAACConfig(
            feature_dim=8,
            num_keywords=12,
            top_k=3,
            cnn_channels=(4, 4, 8, 8, 8),
            level_dim=8,
            hidden_dim=16,
            attention_dim=8,
        ),
    },
    "crossmodal": {
        "paper": AVConfig(),
        "small": AVConfig(
            width=192,
            audio_layers=4,
            audio_heads=4,
            fusion_layers=2,
            fusion_heads=4,
            decoder_layers=2,
            decoder_heads=4,
            dropout=0.1,
        ),
        "tiny": AVConfig(
            feature_dim=8,
            max_frames=32,
            audio_pool=2,
            width=16,
            audio_layers=1,
            audio_heads=2,
            video_dim=6,
            max_video_tokens=16,
            fusion_layers=2,
            fusion_heads=2,
            decoder_layers=1,
            decoder_heads=2,
            ff_mult=2,
            max_caption_length=16,
        ),
    },
}

# SpecAugment as PANNs and ACT's code apply it: two time masks of up to 64 frames and two
# frequency masks of up to 8 bins on every clip.
_PANNS_SPEC_AUGMENT: dict[str, Any] = {
    "spec_augment": True,
    "spec_time_mask": 64,
    "spec_time_masks": 2,
    "spec_freq_mask": 8,
    "spec_freq_masks": 2,
}

# MAAC's paper recipe; "maac-code" in TRAIN_PRESETS is this with the code's settings.
_MAAC_PAPER = TrainConfig(
    pretrain_frozen_epochs=80,
    pretrain_frozen_lr=1e-3,
    pretrain_epochs=25,
    pretrain_lr=5e-4,
    pretrain_mixup_alpha=1.0,
    pretrain_spec_augment_pp="mixture",
    spec_pp_time_mask=64,
    spec_pp_time_masks=3,
    spec_pp_freq_mask=5,
    spec_pp_freq_masks=2,
    lr=3e-4,
    epochs=30,
    batch_size=32,
    lr_decay_per_epoch=0.98,
    label_smoothing=0.1,
    early_stopping_patience=None,
    scst_epochs=55,
    scst_lr=5e-5,
    scst_from="last",
    **_PANNS_SPEC_AUGMENT,
)

# ACT's released-code recipe; V-ACT's code differs only in its epochs (see TRAIN_PRESETS).
_ACT_CODE = TrainConfig(
    lr=1e-4,
    epochs=30,
    warmup_epochs=5.0,
    warmup_per_epoch=True,
    lr_milestones=(15, 25),
    lr_milestone_factor=0.1,
    batch_size=32,
    label_smoothing=0.1,
    weight_decay=1e-6,
    grad_clip=2.0,
    early_stopping_patience=None,
    **_PANNS_SPEC_AUGMENT,
)

TRAIN_PRESETS: dict[str, TrainConfig] = {
    # Kim et al.: Adam (0.9/0.999/1e-8), no label smoothing; lr, epochs and batch size are not
    # in MODELS.md: 1e-3 (the usual LSTM choice), 30 epochs, 32.
    "audiocaps": TrainConfig(lr=1e-3, epochs=30, batch_size=32, label_smoothing=0.0),
    # Liu et al.: Adam 1e-4, linear warm-up over the first 5 of 15 epochs, batch 32, label
    # smoothing, SpecAugment (their code's masks, zero-valued there, the clip's mean here).
    # All 15 epochs run (the best validated one is kept): no early stopping.
    # Source of each setting -- paper: Adam 1e-4, 5 warm-up epochs, 15 epochs (V-ACT's
    # released settings.yaml too), batch 32, label smoothing 0.1. Released code
    # (XinhaoMei/ACT train.py:245-258, settings.yaml): the SpecAugment masks. Adapted: the
    # warm-up steps per batch (the code's GradualWarmupScheduler steps per epoch), the rate
    # stays constant after it (the code's StepLR(10, 0.1) cuts it at epochs 15 and 25 of
    # ACT's 30), no weight decay (code: 1e-6), gradient clip 1.0 (code: 2), the checkpoint
    # chosen by greedy CIDEr-D (code: beam-3 SPIDEr). The model itself is the released
    # network (model.form=code). The released code's settings are the "act-code" and
    # "vact-code" recipes.
    "act": TrainConfig(
        lr=1e-4,
        epochs=15,
        warmup_epochs=5.0,
        batch_size=32,
        label_smoothing=0.1,
        early_stopping_patience=None,
        **_PANNS_SPEC_AUGMENT,
    ),
    # BiLSTM: Adam 1e-4, batch 32, lr halved after 3 epochs without validation-BLEU gain,
    # plain cross-entropy, SpecAugment with one time mask <= 192 frames and one frequency mask
    # <= 48 bins on 40 % of the clips. Epochs are not given: 30.
    "bilstm": TrainConfig(
        lr=1e-4,
        epochs=30,
        batch_size=32,
        plateau_patience=3,
        plateau_factor=0.5,
        plateau_metric="BLEU-4",
        label_smoothing=0.0,
        spec_augment=True,
        spec_time_mask=192,
        spec_time_masks=1,
        spec_freq_mask=48,
        spec_freq_masks=1,
        spec_p=0.4,
    ),
    # MAAC as one run, as the paper describes its stages: the keyword encoder (BCE) 80 epochs
    # at 1e-3 with the pretrained backbone frozen, then 25 at 5e-4 all of it, with mixup
    # (alpha 1) and SpecAugment++ mixture stripes (time <= 64 x 3, frequency <= 5 x 2);
    # captions 30 epochs at 3e-4 (Adam, batch 32, x 0.98 per epoch, label smoothing,
    # SpecAugment); then SCST on CIDEr-D for 55 epochs at 5e-5 from the 30th caption epoch.
    # The caption stage runs all its epochs (no early stopping) so that SCST starts where the
    # paper's did.
    # Source of each setting -- paper: the stages, epochs and rates above, mixup, label
    # smoothing. Released code (WangHelin1997/DCASE2021_Task6_PKU; README, hparams.py,
    # Tag_train.py): the 80 + 25 keyword epochs, the SpecAugment++ stripe sizes, caption
    # batch 32, 3e-4, x 0.98 per epoch. Adapted: SpecAugment in the caption stage uses
    # PANNs' masks (the code: p 0.2, time < 30, frequency < 15), keyword pre-training
    # batches are the caption batch size (code: 64, then 16), gradient clip 1.0 (code:
    # 2.5), no weight decay (code: 1e-6), no scheduled sampling, beam scores ranked by the
    # mean per token (code: logp / len^1.15). The code's SCST differs from the paper's
    # (10 epochs at 1e-6 after a 15-epoch whole-model fine-tune); this follows the paper.
    # The model itself is the released network (model.form=code). The code's own recipe,
    # all of the above as it trains, is "maac-code" below.
    "maac": _MAAC_PAPER,
    # MAAC as its released code trains it (WangHelin1997/DCASE2021_Task6_PKU): per setting,
    # the source, and where Earmark adapts it, why.
    #   keyword pre-training, backbone frozen: 80 epochs at 1e-3, batch 64 -- code
    #     (Tag_train.py: 1e-3, batch 64; it saves TagModel_80 which the next part loads)
    #   keyword pre-training, whole encoder: 25 epochs at 5e-4, batch 16 -- code (Tag_train.py)
    #   mixup alpha 1, SpecAugment++ mixture stripes in pre-training -- paper and code
    #   pre-training Adam with amsgrad and x 0.98 per epoch, no clipping -- code; adapted:
    #     one optimiser (amsgrad on, weight decay 1e-6, clip 2.5) serves every stage here,
    #     where the code's caption scripts use plain Adam with weight decay 1e-6 and clip 2.5
    #   captions: 30 epochs at 3e-4, batch 32, x 0.98 per epoch, label smoothing 0.1, keyword
    #     encoder frozen -- code (run.py, train.py, hparams.py) and paper
    #   gradient clip 2.5, Adam weight decay 1e-6 -- code (hparams.clip_grad, train.py)
    #   scheduled sampling rising to 0.3 over each caption stage -- code (model.py
    #     linear_decay(epoch, max_epoch, rate=.7)); adapted: drawn per word on the
    #     teacher-forced predictions (two passes), the code draws one coin per time step for
    #     the batch inside its recurrent loop
    #   SpecAugment in the caption stages: p 0.2, time masks < 30 frames, frequency masks < 15
    #     bins -- code (data_handling collate, spec_augment); adapted: one mask of each
    #     (the count is in the code's data_augmentation/SpecAugment.py, not read here)
    #   whole-model fine-tune: 15 epochs at 2e-5, batch 8, x 0.98, from the 30th caption
    #     epoch -- code (run.py second part, finetune.py)
    #   SCST: 10 epochs at 1e-6, x 0.98 -- code (run_rl.py); adapted: it starts from the best
    #     validated caption or fine-tune epoch (the code names the fine-tune's epoch 8 by
    #     hand), batch 32 as the code's train_rl.py default
    #   beam 4 ranked by logp / len^1.15 -- code (train.py test mode beam_size=4, model.py
    #     translate_beam_search alpha=1.15); Earmark's beam is a real beam and feeds the
    #     previous words (the code's beam does not: a bug not copied)
    "maac-code": dataclasses.replace(
        _MAAC_PAPER,
        pretrain_frozen_batch_size=64,
        pretrain_batch_size=16,
        grad_clip=2.5,
        weight_decay=1e-6,
        amsgrad=True,
        scheduled_sampling=0.3,
        finetune_epochs=15,
        finetune_lr=2e-5,
        finetune_batch_size=8,
        scst_epochs=10,
        scst_lr=1e-6,
        scst_from="best",
        spec_augment=True,
        spec_time_mask=29,
        spec_time_masks=1,
        spec_freq_mask=14,
        spec_freq_masks=1,
        spec_p=0.2,
    ),
    # ACT as its released code trains it (XinhaoMei/ACT settings/settings.yaml, train.py):
    #   Adam 1e-4, batch 32, label smoothing 0.1, the SpecAugment masks -- paper and code
    #   30 epochs -- code (settings.yaml training.epochs; the paper: 15)
    #   warm-up over 5 epochs, stepped once an epoch -- code (GradualWarmupScheduler
    #     total_epoch=5, stepped per epoch)
    #   x 0.1 from epoch 15 and again from epoch 25 -- code (StepLR(10, 0.1) behind the
    #     warm-up, scheduler_warmup.step(epoch) at each epoch's start)
    #   weight decay 1e-6 -- code (train.py Adam); gradient clip 2 -- code (clip_grad)
    #   every epoch runs, the best validated one kept -- code; adapted: validation scores
    #     greedy CIDEr-D (the code picks by beam-3 SPIDEr, which each validation would
    #     have to decode with beam search and SPICE's Java for)
    "act-code": _ACT_CODE,
    # V-ACT as its released code trains it (liuxubo717/V-ACT settings/settings.yaml,
    # train.py): ACT's code's optimiser and schedule (the same Adam with weight decay 1e-6,
    # GradualWarmupScheduler(5) and StepLR(10, 0.1)), gradient clip 2 -- code; 15 epochs --
    # code and paper, so the StepLR cut comes at the 15th, the last epoch; selection by
    # beam-3 SPIDEr -- code, adapted to greedy CIDEr-D as for act-code.
    "vact-code": dataclasses.replace(_ACT_CODE, epochs=15, lr_milestones=(15,)),
    # Shen et al.: modality-balanced pre-training (the model's mbp), then fine-tuning without
    # it at 1e-5; a linear decay after a 10 % warm-up in each, run to its end (no early
    # stopping). The pre-training rate and both stages' epochs are not in MODELS.md: 1e-4, 20
    # and 10.
    "av": TrainConfig(
        pretrain_epochs=20,
        pretrain_lr=1e-4,
        lr=1e-5,
        epochs=10,
        batch_size=32,
        warmup_fraction=0.1,
        lr_schedule="linear_decay",
        early_stopping_patience=None,
    ),
    # Unit tests: a handful of steps on CPU, no early stopping.
    "tiny": TrainConfig(
        epochs=2,
        batch_size=4,
        lr=3e-3,
        label_smoothing=0.0,
        early_stopping_patience=None,
        amp=False,
        log_every_steps=1,
    ),
}


@dataclass(frozen=True)
class Recipe:
    """How a paper trains its model; a run of that model gets it unless its settings (or the
    size preset) say otherwise."""

    # what the run page calls it
    paper: str
    # TRAIN_PRESETS key
    train: str
    # modeling.ml.features preset the model reads (a pretrained encoder brings its own front
    # end: modeling.ml.encoders.PRETRAINED)
    features: str
    vocab: VocabConfig = field(default_factory=VocabConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    # model config fields the recipe sets, whatever the size preset
    model: dict[str, Any] = field(default_factory=dict)
    # what the paper did that a run of this recipe does not, and why
    notes: tuple[str, ...] = ()
    # False for a model without training (1NN: a bank of the training clips)
    trains: bool = True

    def train_config(self) -> TrainConfig:
        return train_preset(self.train)


_AUDIOCAPS = Recipe(
    paper="Kim et al., NAACL 2019 (AudioCaps)",
    train="audiocaps",
    features="act",
    notes=(
        "The paper's features are VGGish embeddings (fc2 and conv4 for TopDown), which need "
        "weights: set model.encoder=vggish and model.encoder_weights; without them the model "
        "reads ACT's log-mels.",
        "MODELS.md gives no learning rate, epochs, batch size or beam width for these models: "
        "1e-3, 30, 32 and beam 3 are Earmark's choices.",
        "Word vectors: set model.word_vectors to a fastText .vec file (300-d) in the weights "
        "folder; without one the embeddings start at random.",
    ),
)
_ACT = Recipe(
    paper="Liu et al., Interspeech 2023 (ACT)",
    train="act",
    features="act",
    notes=(
        "The paper's audio encoder is pre-trained on AudioSet tagging; no such weights here, "
        "so it trains from scratch with the captioner.",
    ),
)
_VACT = dataclasses.replace(
    _ACT,
    paper="Liu et al., Interspeech 2023 (V-ACT)",
    notes=(
        *_ACT.notes,
        "The paper's video features come from a frozen S3D; set video.encoder=s3d and "
        "video.weights, else a trainable CNN reads the frames.",
    ),
)

RECIPES: dict[str, Recipe] = {
    "nn": dataclasses.replace(
        _AUDIOCAPS,
        paper="Kim et al., NAACL 2019 (1NN retrieval)",
        decoding=DecodingConfig(beam_size=1),
        notes=(_AUDIOCAPS.notes[0],),
        trains=False,
    ),
    "lstm": _AUDIOCAPS,
    "tempatt": _AUDIOCAPS,
    "topdown": _AUDIOCAPS,
    "act": _ACT,
    "vact": _VACT,
    "vact_video": _VACT,
    "vact_concat": _VACT,
    "video_only": _VACT,
    "bilstm": Recipe(
        paper="Bhosale et al., 2022 (BiLSTM on audio-event embeddings)",
        train="bilstm",
        features="bilstm",
        vocab=VocabConfig(min_count=10, max_length=20),
        notes=(
            "The paper's frozen YAMNet or AST embedder needs weights: set model.encoder=yamnet "
            "or ast (AST gives its [CLS] output by default) and model.encoder_weights; without "
            "one the BiLSTM reads AST-style fbank frames, for which its SpecAugment is sized, "
            "and trains at 1e-3 (the paper's 1e-4 is for the embeddings: see the run's "
            "changes).",
            "The validation BLEU that halves the learning rate is BLEU-4; the number of "
            "SpecAugment masks (one each) and the epochs (30) are not in MODELS.md.",
        ),
    ),
    "maac": Recipe(
        paper="Ye et al., DCASE 2021 (MAAC)",
        train="maac",
        features="panns",
        decoding=DecodingConfig(beam_size=4),
        notes=(
            "The keyword encoder's backbone is PANNs ResNet38, which needs weights: set "
            "model.backbone=resnet38 and model.backbone_weights. Without them the trainable "
            "CNN backbone starts at random, so there is nothing to keep frozen and the 80 "
            "frozen-backbone epochs are skipped.",
        ),
    ),
    "crossmodal": Recipe(
        paper="Shen et al., CVPR 2023 (audio-visual captioner, MBP)",
        train="av",
        features="av",
        decoding=DecodingConfig(beam_size=5),
        model={"mbp": True},
        notes=(
            "The paper pre-trains on a larger corpus and also predicts the next caption "
            "(BOS2); here pre-training reads the run's own captions, current caption only.",
            "The paper's video tokens come from Video Swin; set video.encoder=swin3d_t and "
            "video.weights, else a trainable CNN reads the frames.",
            "MODELS.md's SpecAugment for this encoder (frequency masks of 128 bins) is left "
            "off: it exceeds the 64 mel bins it reads.",
        ),
    ),
}


_VACT_MODELS = ("vact", "vact_video", "vact_concat", "video_only")

# Recipes named by their source that a run may choose instead of its model's default (the
# run form's "Recipe", the API's "recipe", ``modeling.planning.run_plan(recipe=...)``):
# name -> (the models it trains, the recipe). Each model's default recipe is named after
# the model ("maac" is MAAC's paper recipe).
NAMED_RECIPES: dict[str, tuple[tuple[str, ...], Recipe]] = {
    "maac-code": (
        ("maac",),
        dataclasses.replace(
            RECIPES["maac"],
            paper="Ye et al., DCASE 2021 (MAAC), as its released code trains it",
            train="maac-code",
            decoding=DecodingConfig(beam_size=4, length_penalty=1.15),
            notes=(
                *RECIPES["maac"].notes,
                "Every setting follows WangHelin1997/DCASE2021_Task6_PKU's scripts (see "
                "TRAIN_PRESETS['maac-code'] for each one's source); adapted: one Adam "
                "(amsgrad, weight decay 1e-6, clip 2.5) for every stage, scheduled sampling "
                "drawn per word on teacher-forced predictions, one SpecAugment mask of each "
                "kind, SCST from the best validated epoch.",
            ),
        ),
    ),
    "act-code": (
        ("act",),
        dataclasses.replace(
            _ACT,
            paper="Liu et al., Interspeech 2023 (ACT), as its released code trains it",
            train="act-code",
            notes=(
                *_ACT.notes,
                "XinhaoMei/ACT's settings.yaml and train.py: 30 epochs, warm-up per epoch, "
                "x 0.1 from epochs 15 and 25, weight decay 1e-6, clip 2; the best epoch is "
                "chosen by greedy CIDEr-D here (the code: beam-3 SPIDEr).",
            ),
        ),
    ),
    "vact-code": (
        _VACT_MODELS,
        dataclasses.replace(
            _VACT,
            paper="Liu et al., Interspeech 2023 (V-ACT), as its released code trains it",
            train="vact-code",
            notes=(
                *_VACT.notes,
                "liuxubo717/V-ACT's settings.yaml and train.py: ACT's code's optimiser and "
                "schedule over 15 epochs (x 0.1 in the last), weight decay 1e-6, clip 2; the "
                "released code trains the concatenation model only.",
            ),
        ),
    ),
}


def recipe_names(model_name: str) -> list[str]:
    """The recipes a run of ``model_name`` may name: its default (named after the model)
    first, then those named by source."""
    return [model_name] + [
        name for name, (models, _) in NAMED_RECIPES.items() if model_name in models
    ]


def named_recipe(model_name: str, name: str = "") -> Recipe:
    """The recipe ``name`` for a run of ``model_name`` (a fresh copy); "" or the model's
    own name is its default recipe."""
    if not name or name == model_name:
        return default_recipe(model_name)
    if name not in NAMED_RECIPES:
        known = ", ".join(recipe_names(model_name))
        raise ConfigError(f"no recipe '{name}' (recipes for model '{model_name}': {known})")
    models, recipe = NAMED_RECIPES[name]
    if model_name not in models:
        raise ConfigError(
            f"recipe '{name}' trains {', '.join(models)}, not '{model_name}' "
            f"(recipes for it: {', '.join(recipe_names(model_name))})"
        )
    return _copy(recipe)


def default_recipe(model_name: str) -> Recipe:
    """The recipe a run of ``model_name`` trains with by default (a fresh copy)."""
    try:
        recipe = RECIPES[model_name]
    except KeyError:
        known = ", ".join(sorted(RECIPES))
        raise ConfigError(f"no recipe for model '{model_name}' (known models: {known})") from None
    return _copy(recipe)


def _copy(recipe: Recipe) -> Recipe:
    return dataclasses.replace(
        recipe,
        vocab=dataclasses.replace(recipe.vocab),
        decoding=dataclasses.replace(recipe.decoding),
        model=dict(recipe.model),
    )


def scaled_epochs(train: TrainConfig, epochs: int) -> TrainConfig:
    """``train`` with ``epochs`` caption epochs and its other stages and warm-up scaled by the
    same factor (a stage the recipe has keeps at least one epoch): the recipe on a budget."""
    if epochs < 1:
        raise ConfigError(f"epochs: must be at least 1, got {epochs}")
    factor = epochs / train.epochs

    def scale(value: int) -> int:
        return max(1, round(value * factor)) if value else 0

    return dataclasses.replace(
        train,
        epochs=epochs,
        pretrain_frozen_epochs=scale(train.pretrain_frozen_epochs),
        pretrain_epochs=scale(train.pretrain_epochs),
        finetune_epochs=scale(train.finetune_epochs),
        scst_epochs=scale(train.scst_epochs),
        warmup_epochs=min(float(epochs), train.warmup_epochs * factor),
        lr_milestones=tuple(max(1, round(m * factor)) for m in train.lr_milestones),
    )


def describe(recipe: Recipe) -> str:
    """One line a person reads: the recipe's stages, optimiser, augmentation and decoding."""
    if not recipe.trains:
        return f"no training: a bank of the training clips' {recipe.features} features."
    train = recipe.train_config()
    stages = []
    if train.pretrain_frozen_epochs or train.pretrain_epochs:
        steps = []
        if train.pretrain_frozen_epochs:
            rate = train.pretrain_frozen_lr or train.pretrain_lr or train.lr
            steps.append(
                f"{train.pretrain_frozen_epochs} epochs at {_rate(rate)} with the backbone frozen"
            )
        if train.pretrain_epochs:
            rate = train.pretrain_lr or train.lr
            steps.append(f"{train.pretrain_epochs} epochs at {_rate(rate)}")
        extras = ["MBP"] if recipe.model.get("mbp") else []
        if train.pretrain_mixup_alpha:
            extras.append(f"mixup (alpha {_number(train.pretrain_mixup_alpha)})")
        if train.pretrain_spec_augment_pp != "off":
            extras.append(f"SpecAugment++ ({train.pretrain_spec_augment_pp})")
        with_extras = f" with {', '.join(extras)}" if extras else ""
        stages.append(f"pre-training {', then '.join(steps)}{with_extras}")
    caption = f"captions {train.epochs} epochs at {_rate(train.lr)}"
    if train.warmup_epochs:
        caption += f" ({_number(train.warmup_epochs)} warm-up)"
    if train.lr_decay_per_epoch != 1.0:
        caption += f" x{_number(train.lr_decay_per_epoch)} per epoch"
    if train.plateau_patience is not None:
        watched = train.plateau_metric or "the score"
        caption += (
            f", x{_number(train.plateau_factor)} after {train.plateau_patience} epochs "
            f"without {watched} gain"
        )
    if train.warmup_per_epoch and train.warmup_epochs:
        caption = caption.replace(" warm-up)", " warm-up epochs)")
    if train.lr_milestones:
        caption += f", x{_number(train.lr_milestone_factor)} from epoch " + " and ".join(
            str(m) for m in train.lr_milestones
        )
    if train.scheduled_sampling:
        caption += f", scheduled sampling up to {_number(train.scheduled_sampling)}"
    stages.append(caption)
    if train.finetune_epochs:
        stages.append(
            f"whole-model fine-tune {train.finetune_epochs} epochs at "
            f"{_rate(train.finetune_lr)}"
            + (f", batch {train.finetune_batch_size}" if train.finetune_batch_size else "")
        )
    if train.scst_epochs:
        stages.append(
            f"SCST {train.scst_epochs} epochs at {_rate(train.scst_lr)} "
            f"from the {train.scst_from} caption epoch"
        )
    optimiser = (
        f"{train.optimizer.capitalize()} (betas {_number(train.betas[0])}/"
        f"{_number(train.betas[1])}, eps {_rate(train.eps)}"
    )
    if train.amsgrad:
        optimiser += ", amsgrad"
    if train.weight_decay:
        optimiser += f", weight decay {_rate(train.weight_decay)}"
    details = [optimiser + ")", f"batch {train.batch_size}"]
    sizes = [
        f"{size} in {what}"
        for size, what in (
            (train.pretrain_frozen_batch_size, "frozen pre-training"),
            (train.pretrain_batch_size, "pre-training"),
        )
        if size
    ]
    if sizes:
        details[-1] += f" ({', '.join(sizes)})"
    if train.grad_clip is not None:
        details.append(f"gradient clip {_number(train.grad_clip)}")
    if train.warmup_fraction or train.lr_schedule != "constant":
        shape = "linear decay" if train.lr_schedule == "linear_decay" else "constant rate"
        warm = f"{train.warmup_fraction:.0%} warm-up, " if train.warmup_fraction else ""
        details.append(f"{warm}{shape} in every stage")
    details.append(
        f"label smoothing {_number(train.label_smoothing)}"
        if train.label_smoothing
        else "no label smoothing"
    )
    if train.spec_augment:
        share = f", p {_number(train.spec_p)}" if train.spec_p != 1.0 else ""
        details.append(
            f"SpecAugment (time <= {train.spec_time_mask} x {train.spec_time_masks}, "
            f"frequency <= {train.spec_freq_mask} x {train.spec_freq_masks}{share})"
        )
    if recipe.vocab.min_count > 1 or recipe.vocab.max_length != VocabConfig().max_length:
        details.append(
            f"words seen >= {recipe.vocab.min_count} times, captions <= "
            f"{recipe.vocab.max_length} words"
        )
    details.append(f"{recipe.features} features")
    beam = f"beam {recipe.decoding.beam_size}"
    if recipe.decoding.length_penalty != 1.0:
        beam += f" ranked by logp / len^{_number(recipe.decoding.length_penalty)}"
    details.append("greedy decoding" if recipe.decoding.beam_size == 1 else beam)
    return "; ".join(stages) + ". " + ", ".join(details) + "."


def _rate(value: float) -> str:
    return f"{value:.0e}".replace("e-0", "e-").replace("e+00", "")


def _number(value: float) -> str:
    return f"{value:g}"


def model_preset(model_name: str, preset: str = "paper") -> CaptionerConfig:
    """A fresh copy of a named preset; the error lists what exists."""
    try:
        presets = MODEL_PRESETS[model_name]
    except KeyError:
        known = ", ".join(sorted(MODEL_PRESETS))
        raise ConfigError(f"no presets for model '{model_name}' (known models: {known})") from None
    try:
        return dataclasses.replace(presets[preset])
    except KeyError:
        known = ", ".join(sorted(presets))
        raise ConfigError(
            f"model '{model_name}' has no preset '{preset}' (known: {known})"
        ) from None


def train_preset(preset: str = "audiocaps") -> TrainConfig:
    """A fresh copy of a named training preset."""
    try:
        return dataclasses.replace(TRAIN_PRESETS[preset])
    except KeyError:
        known = ", ".join(sorted(TRAIN_PRESETS))
        raise ConfigError(f"no training preset '{preset}' (known: {known})") from None
