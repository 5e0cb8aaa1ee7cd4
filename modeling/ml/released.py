"""The authors' released weights, converted into Earmark's models (pure PyTorch, no Django).

``convert(kind, path, words=..., keyword_words=...)`` reads one released file and returns what
Earmark stores: an encoder state dict (``Converted.encoder_state``, saved as a weights file that
``model.encoder_weights`` / ``model.backbone_weights`` can name) or a captioner with its
vocabulary (``Converted.model``, saved with ``modeling.ml.checkpoint.save_checkpoint``).

Kinds, each with an explicit name map written below (no name guessing):

    panns_cnn14, panns_resnet38   PANNs ``main.py`` files ({"iteration", "model", "sampler"},
                                  numpy arrays inside) or a bare state dict
    act_encoder                   ACT's AudioSet-pretrained encoder (``audioset_deit.pth``)
    act                           a checkpoint ACT's ``train.py`` writes (the released ACT_s,
                                  ACT_m, ACT_l) + its word list (``words_list.p``)
    vact_concat                   a checkpoint V-ACT's ``train.py`` writes (audio_visual mode;
                                  none is released) + its word list
    maac                          a captioner state dict the MAAC code's ``train.py`` writes
                                  (``<epoch>.pt``) + its word list + ``TaggingToEmbs.p``

Files are read with ``torch.load(weights_only=True)`` plus an allow-list of the numpy
constructors PANNs' files need (``NUMPY_GLOBALS``), never by full unpickling; word lists the
same way (``read_word_list``). Every converted tensor is checked against the Earmark model's
own state dict, and a mismatch names the first key that does not fit.

Word lists: the released ids become Earmark's (<pad> 0, <bos> 1, <eos> 2, <unk> 3, then the
released words in their released order), and every released word keeps its own trained rows of
the embedding and output layers; ``<sos>`` is ``<bos>``. The added ``<pad>``/``<unk>`` rows the
released model never had get a zero embedding and an output bias of ``NEVER_PREDICTED``, so the
converted model's log-probabilities over the released words are the released ones.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from modeling.ml.config import ACTConfig
from modeling.ml.config_av import MAACConfig, VACTConfig
from modeling.ml.config_encoders import arch_config
from modeling.ml.config_released import NEEDS_KEYWORD_WORDS, NEEDS_WORDS, RELEASED_KINDS
from modeling.ml.models.base import Captioner
from modeling.ml.registry import build_model
from modeling.ml.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocabulary
from modeling.ml.weights_file import ALLOWED_NAMES, load_file

# Output bias of the rows added for <pad>/<unk>: exp(-1e4) is 0 in float32, so these words
# never take probability from the released ones.
NEVER_PREDICTED = -1.0e4


class ReleasedWeightsError(ValueError):
    """A released file that cannot be read, or does not fit the model it is converted to."""


# --------------------------------------------------------------------------- safe reading


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if f"{module}.{name}" not in ALLOWED_NAMES:
            raise pickle.UnpicklingError(f"GLOBAL {module}.{name} is not allowed")
        return super().find_class(module.replace("numpy.core", "numpy._core"), name)


def _read_pickle(path: Path) -> Any:
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(path.read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ReleasedWeightsError(
            f"{path}: not a pickle of plain lists, strings, numbers or numpy arrays ({exc})"
        ) from None


def read_word_list(path: Path | str) -> list[Any]:
    """A released list: a pickle (``words_list.p``, ``TaggingToEmbs.p``; plain data and numpy
    arrays only), a JSON list, or a text file with one entry per line."""
    path = Path(path)
    if not path.is_file():
        raise ReleasedWeightsError(f"{path}: no such file")
    if path.suffix in (".p", ".pkl", ".pickle"):
        data = _read_pickle(path)
    elif path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
    else:
        data = path.read_text(encoding="utf-8").split("\n")
        data = [line.strip() for line in data if line.strip()]
    if isinstance(data, np.ndarray):
        data = data.tolist()
    if not isinstance(data, list | tuple):
        raise ReleasedWeightsError(f"{path}: expected a list, found a {type(data).__name__}")
    return list(data)


def sha256_of(path: Path | str) -> str:
    return digest_of(path, "sha256")


def digest_of(path: Path | str, kind: str) -> str:
    """The file's hex digest of ``kind`` ("md5", "sha256"), read in 1 MiB chunks."""
    digest = hashlib.new(kind)
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- known releases


@dataclass(frozen=True)
class Release:
    """A file the authors published. ``size`` and ``checksum`` are None where no published
    figure was found: such a file is checked by its tensors' names and shapes only. The
    checksum is of the kind its publisher gives (Zenodo lists MD5s), never one computed here
    from a download."""

    name: str
    kind: str
    url: str
    licence: str
    # the file name a download has, where the authors name it; None where they do not, and
    # then a file is matched to the release by its size and checksum only
    file_name: str | None = None
    size: int | None = None
    checksum: str | None = None
    checksum_kind: Literal["md5", "sha256"] = "md5"


_NO_LICENCE = "none stated (the repository has no licence file)"
# Zenodo record 3987831's licence (CC BY 4.0); the code's: audioset_tagging_cnn LICENSE.MIT
_PANNS_LICENCE = (
    "weights CC BY 4.0 (Zenodo record 3987831); code MIT (qiuqiangkong/audioset_tagging_cnn)"
)
RELEASES: tuple[Release, ...] = (
    # MD5 as Zenodo publishes it for record 3987831 (https://zenodo.org/records/3987831),
    # carried by Labbeti/dcase2022task6a (dcase2022task6a/nn/urls.py, "Hash type: md5") and
    # Labbeti/dcase2021task6 (aac/models/pann/urls.py); size 327,428,481 bytes as the record
    # lists it, recorded alike by several projects that pin this file.
    Release(
        "PANNs Cnn14 (mAP 0.431)",
        "panns_cnn14",
        "https://zenodo.org/record/3987831/files/Cnn14_mAP%3D0.431.pth",
        _PANNS_LICENCE,
        file_name="Cnn14_mAP=0.431.pth",
        size=327_428_481,
        checksum="541141fa2ee191a88f24a3219fff024e",
    ),
    # MD5 as Zenodo publishes it for record 3987831, carried by Labbeti/dcase2022task6a
    # (dcase2022task6a/nn/urls.py); no published size found, so none is checked.
    Release(
        "PANNs ResNet38 (mAP 0.434)",
        "panns_resnet38",
        "https://zenodo.org/record/3987831/files/ResNet38_mAP%3D0.434.pth",
        _PANNS_LICENCE,
        file_name="ResNet38_mAP=0.434.pth",
        checksum="bf12f36aaabac4e0855e22d3c3239c1b",
    ),
    # ACT's files (XinhaoMei/ACT README links, Google Drive): no size or checksum published.
    Release(
        "ACT DeiT encoder pretrained on AudioSet",
        "act_encoder",
        "https://drive.google.com/file/d/1QgQLbeBHwly5UN_V15mSJZ812h6QIgFe/view",
        _NO_LICENCE,
        # the path settings.yaml's path.encoder names
        file_name="audioset_deit.pth",
    ),
    Release(
        "ACT_m (SPIDEr 0.4178)",
        "act",
        "https://drive.google.com/file/d/1nYym4APxEX4aiHINEykUIPyoHvXIjJRF/view",
        _NO_LICENCE,
        # the path settings.yaml's path.eval_model names
        file_name="ACTm.pth",
    ),
    Release(
        "ACT_s (SPIDEr 0.4244)",
        "act",
        "https://drive.google.com/file/d/1c1b1Q6hAprt-CCu4VtMSb4Jqk604-RHi/view",
        _NO_LICENCE,
    ),
    Release(
        "ACT_l (SPIDEr 0.4257)",
        "act",
        "https://drive.google.com/file/d/1fF4_XnheFiz_tPaRVdz4q5eUUi8infg_/view",
        _NO_LICENCE,
    ),
)
# MAAC (WangHelin1997/DCASE2021_Task6_PKU) and V-ACT (liuxubo717/V-ACT) publish no weights:
# their files are the ones their training scripts write, checked by names and shapes.


def check_release(kind: str, path: Path | str) -> Release | None:
    """The known release this file is: the one its name claims, after checking the size and
    checksum the table has for it (a contradiction is refused naming both values), else one
    whose published size and checksum it has under another name; None for a file the table
    does not know (it is then checked by its tensors' names and shapes alone)."""
    path = Path(path)
    size = path.stat().st_size
    for release in RELEASES:
        if release.file_name is None or release.file_name != path.name:
            continue
        if release.kind != kind:
            raise ReleasedWeightsError(
                f"{path.name} is the released {release.kind!r} file ({release.name}), not {kind!r}"
            )
        if release.size is not None and size != release.size:
            raise ReleasedWeightsError(
                f"{path}: {size} bytes, but the release {release.name} ({release.url}) has "
                f"{release.size}: not the published file (a partial or altered download?)"
            )
        if release.checksum is not None:
            found = digest_of(path, release.checksum_kind)
            if found != release.checksum:
                raise ReleasedWeightsError(
                    f"{path}: {release.checksum_kind.upper()} {found}, but the release "
                    f"{release.name} ({release.url}) has {release.checksum}: not the "
                    "published file"
                )
        return release
    for release in RELEASES:
        if release.kind != kind or release.checksum is None or release.size != size:
            continue
        if digest_of(path, release.checksum_kind) == release.checksum:
            return release
    return None


# --------------------------------------------------------------------------- name maps


@dataclass
class Converted:
    """What a conversion produced: an encoder state dict, or a captioner and its vocabulary."""

    kind: str
    release: Release | None = None
    encoder_state: dict[str, Tensor] | None = None
    model_name: str = ""
    model: Captioner | None = None
    vocab: Vocabulary | None = None
    notes: list[str] = field(default_factory=list)


class _Source:
    """The released state dict, read key by key; ``unused`` is what was never taken."""

    def __init__(self, state: Mapping[str, Any], path: Path) -> None:
        self.state = {k.removeprefix("module."): v for k, v in state.items()}
        self.path = path
        self.taken: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.state

    def take(self, key: str, shape: Sequence[int] | None = None) -> Tensor:
        if key not in self.state:
            raise ReleasedWeightsError(f"{self.path}: the released key {key!r} is missing")
        value = self.state[key]
        if not isinstance(value, Tensor):
            raise ReleasedWeightsError(f"{self.path}: {key!r} is not a tensor")
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ReleasedWeightsError(
                f"{self.path}: {key!r} has shape {tuple(value.shape)}, expected {tuple(shape)}"
            )
        self.taken.add(key)
        return value

    def drop(self, prefix: str) -> None:
        self.taken.update(k for k in self.state if k.startswith(prefix))

    def check_all_used(self) -> None:
        unused = sorted(set(self.state) - self.taken)
        if unused:
            raise ReleasedWeightsError(
                f"{self.path}: the released key {unused[0]!r} has no place in the model"
                + (f" (+{len(unused) - 1} more)" if len(unused) > 1 else "")
            )


def _state_dict_of(data: Any, path: Path) -> dict[str, Any]:
    if isinstance(data, Mapping) and isinstance(data.get("model"), Mapping):
        data = data["model"]
    if not isinstance(data, Mapping) or not data:
        raise ReleasedWeightsError(f"{path}: holds no state dict")
    return dict(data)


def _fit(model: torch.nn.Module, state: Mapping[str, Tensor], path: Path) -> None:
    """Load ``state`` strictly; the first key that does not fit is named."""
    own = model.state_dict()
    for key, value in own.items():
        if key not in state:
            raise ReleasedWeightsError(f"{path}: nothing in the file for {key!r}")
        if tuple(state[key].shape) != tuple(value.shape):
            raise ReleasedWeightsError(
                f"{path}: {key!r} converts to shape {tuple(state[key].shape)}, "
                f"the model has {tuple(value.shape)}"
            )
    extra = sorted(set(state) - set(own))
    if extra:
        raise ReleasedWeightsError(f"{path}: {extra[0]!r} has no place in the model")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()}, strict=True)


# --------------------------------------------------------------------------- vocabulary


def released_vocabulary(words: Sequence[Any], path: Path) -> tuple[Vocabulary, list[int | None]]:
    """Earmark's vocabulary of a released word list, and for each Earmark id the released id
    whose rows it takes (None for an added <pad>/<unk>)."""
    if not all(isinstance(w, str) for w in words):
        raise ReleasedWeightsError(f"{path}: the word list holds entries that are not words")
    released = {w: i for i, w in enumerate(words)}
    if len(released) != len(words):
        raise ReleasedWeightsError(f"{path}: the word list repeats words")
    for needed in ("<sos>", "<eos>"):
        if needed not in released:
            raise ReleasedWeightsError(f"{path}: the word list has no {needed}")
    specials = {PAD: released.get(PAD), BOS: released["<sos>"], EOS: released["<eos>"]}
    specials[UNK] = released.get(UNK)
    others = [w for w in words if w not in ("<sos>", "<eos>", PAD, UNK, BOS)]
    vocab = Vocabulary([*SPECIALS, *others], max_length=30)
    rows = [specials[s] for s in SPECIALS] + [released[w] for w in others]
    return vocab, rows


def _embedding_rows(weight: Tensor, rows: list[int | None]) -> Tensor:
    out = weight.new_zeros(len(rows), weight.size(1))
    for i, row in enumerate(rows):
        if row is not None:
            out[i] = weight[row]
    return out


def _output_rows(weight: Tensor, bias: Tensor, rows: list[int | None]) -> tuple[Tensor, Tensor]:
    w = weight.new_zeros(len(rows), weight.size(1))
    b = bias.new_full((len(rows),), NEVER_PREDICTED)
    for i, row in enumerate(rows):
        if row is not None:
            w[i], b[i] = weight[row], bias[row]
    return w, b


# --------------------------------------------------------------------------- PANNs


def _panns(kind: str, path: Path, data: Any) -> Converted:
    from modeling.ml.encoders import ENCODERS

    name = {"panns_cnn14": "cnn14", "panns_resnet38": "resnet38"}[kind]
    source = _Source(_state_dict_of(data, path), path)
    network = ENCODERS[name][0](arch_config(name, {}, 64))
    # torchlibrosa's STFT and mel weights: Earmark computes the features itself
    source.drop("spectrogram_extractor.")
    source.drop("logmel_extractor.")
    state = {key: source.take(key, value.shape) for key, value in network.state_dict().items()}
    source.check_all_used()
    _fit(network, state, path)
    return Converted(kind=kind, encoder_state=network.state_dict())


# --------------------------------------------------------------------------- ACT, V-ACT


def _audio_transformer(
    source: _Source, prefix: str, config: ACTConfig
) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """ACT's AudioTransformer (AudioTransformer.py:124-179) -> Earmark's PatchEncoder state
    (without the prefix) and the AudioSet head (mlp_head.1) weight and bias."""
    width = config.encoder_dim
    out: dict[str, Tensor] = {}
    for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
        out[f"bn0.{name}"] = source.take(f"{prefix}bn0.{name}")
    out["project.weight"] = source.take(f"{prefix}patch_embed.proj.weight")
    out["project.bias"] = source.take(f"{prefix}patch_embed.proj.bias")
    out["cls_token"] = source.take(f"{prefix}cls_token", (1, 1, width))
    out["position"] = source.take(f"{prefix}pos_embedding")
    for i in range(config.encoder_layers):
        released, mine = f"{prefix}blocks.layers.{i}.", f"blocks.layers.{i}."
        pairs = {
            "0.norm.weight": "norm1.weight",
            "0.norm.bias": "norm1.bias",
            "0.fn.qkv.weight": "self_attn.in_proj_weight",
            "0.fn.qkv.bias": "self_attn.in_proj_bias",
            "0.fn.proj.0.weight": "self_attn.out_proj.weight",
            "0.fn.proj.0.bias": "self_attn.out_proj.bias",
            "1.norm.weight": "norm2.weight",
            "1.norm.bias": "norm2.bias",
            "1.fn.mlp.fc1.weight": "linear1.weight",
            "1.fn.mlp.fc1.bias": "linear1.bias",
            "1.fn.mlp.fc2.weight": "linear2.weight",
            "1.fn.mlp.fc2.bias": "linear2.bias",
        }
        for theirs, ours in pairs.items():
            out[mine + ours] = source.take(released + theirs)
    out["blocks.norm.weight"] = source.take(f"{prefix}mlp_head.0.weight", (width,))
    out["blocks.norm.bias"] = source.take(f"{prefix}mlp_head.0.bias", (width,))
    head_w = source.take(f"{prefix}mlp_head.1.weight")
    head_b = source.take(f"{prefix}mlp_head.1.bias")
    return out, head_w, head_b


def _count_layers(source: _Source, pattern: str) -> int:
    found = {int(m.group(1)) for k in source.state if (m := re.match(pattern, k))}
    return max(found) + 1 if found else 0


def _act_config(source: _Source, cls: type[ACTConfig], path: Path) -> ACTConfig:
    """The released sizes, read off the shapes (heads are not in the weights: the released
    settings' 12 encoder and 8 decoder heads)."""
    project = source.state.get("encoder.patch_embed.proj.weight")
    position = source.state.get("encoder.pos_embedding")
    word = source.state.get("word_emb.weight")
    ff = source.state.get("transformer_decoder.layers.0.linear1.weight")
    if not all(isinstance(t, Tensor) for t in (project, position, word, ff)):
        raise ReleasedWeightsError(
            f"{path}: not an ACT checkpoint (needs encoder.patch_embed.proj.weight, "
            "encoder.pos_embedding, word_emb.weight, transformer_decoder.layers.0.linear1.weight)"
        )
    assert isinstance(project, Tensor)
    assert isinstance(position, Tensor)
    assert isinstance(word, Tensor)
    assert isinstance(ff, Tensor)
    width, patch_dim = project.shape
    d = word.shape[1]
    feature_dim = 64
    patch_frames = patch_dim // feature_dim
    return cls(
        feature_dim=feature_dim,
        patch_frames=patch_frames,
        max_frames=patch_frames * (position.shape[1] - 1),
        encoder_dim=width,
        encoder_layers=_count_layers(source, r"encoder\.blocks\.layers\.(\d+)\."),
        encoder_heads=12,
        decoder_dim=d,
        decoder_layers=_count_layers(source, r"transformer_decoder\.layers\.(\d+)\."),
        decoder_heads=8,
        ff_mult=ff.shape[0] // d,
        max_caption_length=64,
        dropout=0.2,
        form="code",
    )


def _act_family(
    kind: str, path: Path, data: Any, words: Sequence[Any], words_path: Path
) -> Converted:
    source = _Source(_state_dict_of(data, path), path)
    cls: type[ACTConfig] = VACTConfig if kind == "vact_concat" else ACTConfig
    config = _act_config(source, cls, path)
    vocab, rows = released_vocabulary(words, words_path)
    vocab_rows = source.state["word_emb.weight"]
    assert isinstance(vocab_rows, Tensor)
    if vocab_rows.shape[0] != len(words):
        raise ReleasedWeightsError(
            f"{path}: word_emb.weight has {vocab_rows.shape[0]} rows, the word list "
            f"{words_path.name} has {len(words)} words"
        )
    encoder, head_w, head_b = _audio_transformer(source, "encoder.", config)
    state = {f"encoder.{k}": v for k, v in encoder.items()}
    # encoder_linear(mlp_head.1(x)): two linear maps in a row are one (TransModel.py:118-121)
    linear_w = source.take("encoder_linear.weight", (config.decoder_dim, head_w.shape[0]))
    linear_b = source.take("encoder_linear.bias")
    state["to_decoder.weight"] = (linear_w.double() @ head_w.double()).float()
    state["to_decoder.bias"] = (linear_w.double() @ head_b.double() + linear_b.double()).float()
    # word_emb(w) * sqrt(d) + pe[position] (TransModel.py:136-137)
    scale = math.sqrt(config.decoder_dim)
    state["embedding.weight"] = _embedding_rows(source.take("word_emb.weight"), rows) * scale
    pe = source.take("pos_encoder.pe")
    state["position"] = pe[: config.max_caption_length, 0].unsqueeze(0).clone()
    for key, _value in source.state.items():
        if key.startswith("transformer_decoder."):
            state[key.replace("transformer_decoder.", "decoder.", 1)] = source.take(key)
    state["out.weight"], state["out.bias"] = _output_rows(
        source.take("dec_fc.weight"), source.take("dec_fc.bias"), rows
    )
    if kind == "vact_concat":
        video_w = source.take("video_encoder_linear.weight")
        assert isinstance(config, VACTConfig)
        config.video_dim = video_w.shape[1]
        state["video_encoder.project.weight"] = video_w
        state["video_encoder.project.bias"] = source.take("video_encoder_linear.bias")
    source.check_all_used()
    model = build_model(kind, config, vocab_size=len(vocab))
    _fit(model, state, path)
    return Converted(
        kind=kind,
        model_name=kind,
        model=model.eval(),
        vocab=vocab,
        notes=[
            f"mlp_head.1 and encoder_linear folded into to_decoder ({head_w.shape[0]} -> "
            f"{config.decoder_dim})",
            "word_emb scaled by sqrt(d) and pos_encoder.pe written into the embedding and "
            "position tables",
        ],
    )


def _act_encoder(path: Path, data: Any) -> Converted:
    source = _Source(_state_dict_of(data, path), path)
    project = source.state.get("patch_embed.proj.weight")
    if not isinstance(project, Tensor):
        raise ReleasedWeightsError(
            f"{path}: not ACT's AudioTransformer (no 'patch_embed.proj.weight')"
        )
    config = ACTConfig(
        encoder_dim=project.shape[0],
        encoder_layers=_count_layers(source, r"blocks\.layers\.(\d+)\."),
        patch_frames=project.shape[1] // 64,
        form="code",
    )
    encoder, head_w, head_b = _audio_transformer(source, "", config)
    source.check_all_used()
    state = {f"encoder.{k}": v for k, v in encoder.items()}
    state["head.weight"], state["head.bias"] = head_w, head_b
    return Converted(kind="act_encoder", encoder_state=state)


# --------------------------------------------------------------------------- MAAC


def _maac(
    path: Path,
    data: Any,
    words: Sequence[Any],
    words_path: Path,
    keyword_words: Sequence[Any],
    keyword_path: Path,
) -> Converted:
    source = _Source(_state_dict_of(data, path), path)
    if any(k.startswith("encoder_fixed.") for k in source.state):
        raise ReleasedWeightsError(
            f"{path}: trained with two_stage_cnn (a second keyword network, encoder_fixed.*), "
            "which Earmark's MAAC does not have"
        )
    if source.has("decoder.attention1.K.weight"):
        raise ReleasedWeightsError(
            f"{path}: trained with multiScale decoder attention (decoder.attention1.*), "
            "which Earmark's MAAC does not have"
        )
    word_key = (
        "decoder.word_emb.embedding.weight"
        if source.has("decoder.word_emb.embedding.weight")
        else "decoder.word_emb.weight"
    )
    word_emb = source.take(word_key)
    vocab, rows = released_vocabulary(words, words_path)
    if word_emb.shape[0] != len(words):
        raise ReleasedWeightsError(
            f"{path}: {word_key} has {word_emb.shape[0]} rows, the word list "
            f"{words_path.name} has {len(words)} words"
        )
    fc = source.take("encoder.fc.weight")
    level_dim = fc.shape[1] // 3
    c = word_emb.shape[1]
    if not all(isinstance(i, int) and 0 <= i < len(words) for i in keyword_words):
        raise ReleasedWeightsError(
            f"{keyword_path}: expected word ids below {len(words)} (TaggingToEmbs.p)"
        )
    if len(keyword_words) != fc.shape[0]:
        raise ReleasedWeightsError(
            f"{keyword_path}: {len(keyword_words)} keywords, the tagger scores {fc.shape[0]}"
        )
    config = MAACConfig(
        num_keywords=fc.shape[0],
        top_k=5,  # model.py:256: GetTag(topk=5)
        backbone="resnet38",
        level_dim=level_dim,
        hidden_dim=c,
        attention_dim=source.take("decoder.attention.K.weight").shape[0],
        form="code",
    )
    model = build_model("maac", config, vocab_size=len(vocab))
    state: dict[str, Tensor] = {}
    backbone = model.state_dict()
    for key, value in backbone.items():
        if key.startswith("keyword_encoder.backbone."):
            theirs = "encoder.feature." + key.removeprefix("keyword_encoder.backbone.")
            if key.endswith(("fc1.weight", "fc1.bias", "fc_audioset.weight", "fc_audioset.bias")):
                # PANNs' embedding and AudioSet layers, which the MAAC trunk lacks: the keyword
                # encoder never reads them (forward_blocks stops before them)
                state[key] = torch.zeros_like(value)
                continue
            state[key] = source.take(theirs, value.shape)
    # Tag: fc1 on the last block, fc1_f1 on layer2, fc1_f2 on layer3 (encoder.py:545-548)
    for ours, theirs in (("0", "fc1_f1"), ("1", "fc1_f2"), ("2", "fc1")):
        state[f"keyword_encoder.levels.{ours}.weight"] = source.take(f"encoder.{theirs}.weight")
        state[f"keyword_encoder.levels.{ours}.bias"] = source.take(f"encoder.{theirs}.bias")
    # the code concatenates [last; layer2; layer3] (encoder.py:613), Earmark [layer2; layer3; last]
    n = level_dim
    state["keyword_encoder.classifier.weight"] = torch.cat(
        [fc[:, n : 2 * n], fc[:, 2 * n :], fc[:, :n]], dim=1
    )
    state["keyword_encoder.classifier.bias"] = source.take("encoder.fc.bias")
    pairs = {
        "acoustic": "decoder.linear_feature",
        "acoustic_attention.feature": "decoder.attention.K",
        "acoustic_attention.state": "decoder.attention.Q",
        "acoustic_attention.value": "decoder.attention.V",
        "acoustic_attention.score": "decoder.attention.full_att",
        "semantic_attention.feature": "decoder.preword_attention.K",
        "semantic_attention.state": "decoder.preword_attention.Q",
        "semantic_attention.value": "decoder.preword_attention.V",
        "semantic_attention.score": "decoder.preword_attention.full_att",
        "acoustic_gate": "decoder.f_beta",
        "keyword_gate": "decoder.f_beta_taggingword",
        "word_gate": "decoder.f_beta_preword",
        "init_h": "decoder.init_h",
        "init_c": "decoder.init_c",
    }
    for ours, theirs in pairs.items():
        state[f"{ours}.weight"] = source.take(f"{theirs}.weight")
        state[f"{ours}.bias"] = source.take(f"{theirs}.bias")
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        state[f"lstm.{name}"] = source.take(f"decoder.decode_step.{name}")
    state["embedding.weight"] = _embedding_rows(word_emb, rows)
    # GetTag looks keywords up in the caption word table (model.py:218-230)
    state["keyword_embedding.weight"] = word_emb[torch.tensor(keyword_words)].clone()
    state["out.weight"], state["out.bias"] = _output_rows(
        source.take("decoder.classifier.weight"), source.take("decoder.classifier.bias"), rows
    )
    # built but never called: the code reads the tags with preword_attention (model.py:268)
    source.drop("decoder.taggingword_attention.")
    source.check_all_used()
    _fit(model, state, path)
    return Converted(
        kind="maac",
        model_name="maac",
        model=model.eval(),
        vocab=vocab,
        notes=["keyword embeddings copied from the caption word table (TaggingToEmbs.p)"],
    )


# --------------------------------------------------------------------------- entry point

KINDS = RELEASED_KINDS


def convert(
    kind: str,
    path: Path | str,
    *,
    words: Path | str | None = None,
    keyword_words: Path | str | None = None,
) -> Converted:
    """Read the released ``path`` of ``kind`` (a ``KINDS`` key) and convert it."""
    if kind not in KINDS:
        raise ReleasedWeightsError(f"unknown kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    path = Path(path)
    if kind in NEEDS_WORDS and words is None:
        raise ReleasedWeightsError(f"kind {kind!r} needs the released word list (words_list.p)")
    if kind in NEEDS_KEYWORD_WORDS and keyword_words is None:
        raise ReleasedWeightsError("kind 'maac' needs the keyword-to-word list (TaggingToEmbs.p)")
    if not path.is_file():
        raise ReleasedWeightsError(f"{path}: no such file")
    release = check_release(kind, path)
    try:
        data = load_file(path)
    except ValueError as exc:
        raise ReleasedWeightsError(str(exc)) from None
    converters: dict[str, Callable[[], Converted]] = {
        "panns_cnn14": lambda: _panns(kind, path, data),
        "panns_resnet38": lambda: _panns(kind, path, data),
        "act_encoder": lambda: _act_encoder(path, data),
    }
    if words is not None:
        words_path = Path(words)
        word_list = read_word_list(words_path)
        converters["act"] = lambda: _act_family(kind, path, data, word_list, words_path)
        converters["vact_concat"] = converters["act"]
        if keyword_words is not None:
            keyword_path = Path(keyword_words)
            keyword_list = read_word_list(keyword_path)
            converters["maac"] = lambda: _maac(
                path, data, word_list, words_path, keyword_list, keyword_path
            )
    converted = converters[kind]()
    converted.release = release
    return converted
