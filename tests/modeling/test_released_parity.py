"""Parity with the authors' released code, at the released sizes.

Each test writes a file in the released state-dict layout (names and shapes below, read from the
public repositories: XinhaoMei/ACT @ 6b04b29 models/AudioTransformer.py and TransModel.py,
liuxubo717/V-ACT @ ae8f32e models/TransModel.py, WangHelin1997/DCASE2021_Task6_PKU @ 1d36c81
encoder.py and model.py), with random values, converts it with ``modeling.ml.released``, and
compares Earmark's model with the released network's forward pass computed here from the file's
tensors with plain torch operations (never by calling the model under test).
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from modeling.ml.decoding import greedy
from modeling.ml.released import convert
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)

# released words: <sos> first and <eos> at 8, as ACT's words_list.p has them; no <pad>/<unk>
WORDS = ["<sos>", "a", "dog", "barks", "man", "speaks", "car", "passes", "<eos>", "rain", "falls"]
LOGIT_TOLERANCE = 1e-5


# released layouts (name -> shape) --------------------------------------------------------


def audio_transformer_layout(prefix: str = "encoder.") -> dict[str, tuple[int, ...]]:
    """AudioTransformer((4, 64), 527, 768, 12, 12, 3072): AudioTransformer.py:124-157."""
    layout: dict[str, tuple[int, ...]] = {
        "bn0.weight": (64,),
        "bn0.bias": (64,),
        "bn0.running_mean": (64,),
        "bn0.running_var": (64,),
        "bn0.num_batches_tracked": (),
        "patch_embed.proj.weight": (768, 256),
        "patch_embed.proj.bias": (768,),
        "pos_embedding": (1, 126, 768),
        "cls_token": (1, 1, 768),
        "mlp_head.0.weight": (768,),
        "mlp_head.0.bias": (768,),
        "mlp_head.1.weight": (527, 768),
        "mlp_head.1.bias": (527,),
    }
    for i in range(12):
        block = f"blocks.layers.{i}."
        layout |= {
            block + "0.norm.weight": (768,),
            block + "0.norm.bias": (768,),
            block + "0.fn.qkv.weight": (2304, 768),
            block + "0.fn.qkv.bias": (2304,),
            block + "0.fn.proj.0.weight": (768, 768),
            block + "0.fn.proj.0.bias": (768,),
            block + "1.norm.weight": (768,),
            block + "1.norm.bias": (768,),
            block + "1.fn.mlp.fc1.weight": (3072, 768),
            block + "1.fn.mlp.fc1.bias": (3072,),
            block + "1.fn.mlp.fc2.weight": (768, 3072),
            block + "1.fn.mlp.fc2.bias": (768,),
        }
    return {prefix + k: v for k, v in layout.items()}


def act_layout(ntoken: int, *, video: bool = False) -> dict[str, tuple[int, ...]]:
    """ACT with decoder nhid 512, 4 layers, 8 heads, 2048 feed-forward (TransModel.py:42-100,
    settings.yaml); V-ACT adds video_encoder_linear (TransModel.py@ae8f32e:98)."""
    layout = audio_transformer_layout() | {
        "encoder_linear.weight": (512, 527),
        "encoder_linear.bias": (512,),
        "pos_encoder.pe": (2000, 1, 512),
        "word_emb.weight": (ntoken, 512),
        "dec_fc.weight": (ntoken, 512),
        "dec_fc.bias": (ntoken,),
    }
    for i in range(4):
        layer = f"transformer_decoder.layers.{i}."
        for attention in ("self_attn", "multihead_attn"):
            layout |= {
                f"{layer}{attention}.in_proj_weight": (1536, 512),
                f"{layer}{attention}.in_proj_bias": (1536,),
                f"{layer}{attention}.out_proj.weight": (512, 512),
                f"{layer}{attention}.out_proj.bias": (512,),
            }
        layout |= {
            layer + "linear1.weight": (2048, 512),
            layer + "linear1.bias": (2048,),
            layer + "linear2.weight": (512, 2048),
            layer + "linear2.bias": (512,),
        }
        for norm in ("norm1", "norm2", "norm3"):
            layout |= {f"{layer}{norm}.weight": (512,), f"{layer}{norm}.bias": (512,)}
    if video:
        layout |= {"video_encoder_linear.weight": (512, 1024), "video_encoder_linear.bias": (512,)}
    return layout


def sinusoid(max_len: int, d: int) -> Tensor:
    """PositionalEncoding.pe (TransModel.py:24-36), (max_len, 1, d)."""
    position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    return pe.unsqueeze(1)


def random_state(layout: dict[str, tuple[int, ...]], seed: int) -> dict[str, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    state: dict[str, Tensor] = {}
    for name, shape in layout.items():
        if name.endswith("num_batches_tracked"):
            state[name] = torch.tensor(100)
        elif name.endswith("running_var"):
            state[name] = 0.5 + torch.rand(shape, generator=gen)
        elif name.endswith("pe"):
            state[name] = sinusoid(shape[0], shape[2])
        elif ("norm" in name or "bn" in name) and name.endswith("weight") and len(shape) == 1:
            state[name] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            fan_in = math.prod(shape[1:]) if len(shape) >= 2 else 1
            scale = 1.0 / math.sqrt(fan_in) if len(shape) >= 2 else 0.1
            state[name] = scale * torch.randn(shape, generator=gen)
    return state


def write_words(path: Path, words: list) -> Path:
    path.write_bytes(pickle.dumps(words, protocol=4))
    return path


# the released forward passes, from the file's tensors ------------------------------------


def layer_norm(x: Tensor, s: dict[str, Tensor], name: str) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], s[f"{name}.weight"], s[f"{name}.bias"], 1e-5)


def linear(x: Tensor, s: dict[str, Tensor], name: str) -> Tensor:
    return x @ s[f"{name}.weight"].T + s[f"{name}.bias"]


def attention(query: Tensor, keys: Tensor, w: Tensor, b: Tensor, heads: int, mask=None) -> Tensor:
    """Multi-head attention with packed [q; k; v] projections, (B, N, d) -> (B, N, d)
    before the output projection."""
    d = query.shape[-1]
    q = query @ w[:d].T + b[:d]
    k = keys @ w[d : 2 * d].T + b[d : 2 * d]
    v = keys @ w[2 * d :].T + b[2 * d :]

    def split(t: Tensor) -> Tensor:
        return t.reshape(t.shape[0], t.shape[1], heads, d // heads).transpose(1, 2)

    scores = split(q) @ split(k).transpose(-1, -2) / math.sqrt(d // heads)
    if mask is not None:
        scores = scores + mask
    out = torch.softmax(scores, dim=-1) @ split(v)
    return out.transpose(1, 2).reshape(query.shape)


def released_audio(s: dict[str, Tensor], spec: Tensor) -> Tensor:
    """AudioTransformer.forward in eval mode, then encoder_linear + ReLU (TransModel.encode)."""
    e = "encoder."
    x = (spec - s[e + "bn0.running_mean"]) / torch.sqrt(s[e + "bn0.running_var"] + 1e-5)
    x = x * s[e + "bn0.weight"] + s[e + "bn0.bias"]
    b, t, f = x.shape
    x = linear(x.reshape(b, t // 4, 4 * f), s, e + "patch_embed.proj")  # (p1 p2 c) patches
    x = torch.cat([s[e + "cls_token"].expand(b, -1, -1), x], dim=1)
    x = x + s[e + "pos_embedding"][:, : x.shape[1]]
    for i in range(12):
        block = f"{e}blocks.layers.{i}."
        h = layer_norm(x, s, block + "0.norm")
        h = attention(h, h, s[block + "0.fn.qkv.weight"], s[block + "0.fn.qkv.bias"], 12)
        x = x + linear(h, s, block + "0.fn.proj.0")
        h = layer_norm(x, s, block + "1.norm")
        x = x + linear(F.gelu(linear(h, s, block + "1.fn.mlp.fc1")), s, block + "1.fn.mlp.fc2")
    x = linear(layer_norm(x, s, e + "mlp_head.0"), s, e + "mlp_head.1")
    return torch.relu(linear(x, s, "encoder_linear"))


def released_decoder(s: dict[str, Tensor], memory: Tensor, tokens: Tensor) -> Tensor:
    """TransModel.decode: scaled embeddings + sinusoid, post-norm blocks, dec_fc."""
    length = tokens.shape[1]
    y = s["word_emb.weight"][tokens] * math.sqrt(512) + s["pos_encoder.pe"][:length, 0]
    causal = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
    for i in range(4):
        layer = f"transformer_decoder.layers.{i}."
        sa = attention(
            y,
            y,
            s[layer + "self_attn.in_proj_weight"],
            s[layer + "self_attn.in_proj_bias"],
            8,
            causal,
        )
        y = layer_norm(y + linear(sa, s, layer + "self_attn.out_proj"), s, layer + "norm1")
        ca = attention(
            y,
            memory,
            s[layer + "multihead_attn.in_proj_weight"],
            s[layer + "multihead_attn.in_proj_bias"],
            8,
        )
        y = layer_norm(y + linear(ca, s, layer + "multihead_attn.out_proj"), s, layer + "norm2")
        ff = linear(F.gelu(linear(y, s, layer + "linear1")), s, layer + "linear2")
        y = layer_norm(y + ff, s, layer + "norm3")
    return linear(y, s, "dec_fc")


def earmark_ids(vocab, tokens: Tensor) -> Tensor:
    return torch.tensor(
        [[vocab.id(WORDS[i].replace("<sos>", "<bos>")) for i in row] for row in tokens.tolist()]
    )


def released_columns(vocab) -> list[int]:
    """For each released id, the Earmark id of its word."""
    return [vocab.id(w.replace("<sos>", "<bos>")) for w in WORDS]


def reference_greedy(step, steps: int) -> list[int]:
    tokens = [0]  # <sos>
    for _ in range(steps):
        nxt = int(step(torch.tensor([tokens]))[0, -1].argmax())
        if nxt == WORDS.index("<eos>"):
            break
        tokens.append(nxt)
    return tokens[1:]


# ACT ---------------------------------------------------------------------------------------

TOKENS = torch.tensor([[0, 1, 2, 3, 8, 8], [0, 4, 5, 6, 7, 8]])


def _act_file(
    tmp_path: Path, *, video: bool = False, eos_bias: float = 0.0
) -> tuple[dict[str, Tensor], Path, Path]:
    state = random_state(act_layout(len(WORDS), video=video), seed=3)
    state["dec_fc.bias"][WORDS.index("<eos>")] += eos_bias
    path = tmp_path / ("vact.pth" if video else "ACTm.pth")
    torch.save({"model": state, "optimizer": {}, "beam_size": 3, "epoch": 25}, path)
    return state, path, write_words(tmp_path / "words_list.p", WORDS)


def test_act_logits_match_the_released_network(tmp_path):
    state, path, words = _act_file(tmp_path)
    converted = convert("act", path, words=words)
    model, vocab = converted.model, converted.vocab
    assert model is not None
    assert vocab is not None
    spec = torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(1)) * 10
    with torch.no_grad():
        expected = released_decoder(state, released_audio(state, spec), TOKENS)
        batch = {
            "features": spec,
            "feature_lengths": torch.tensor([32, 32]),
            "tokens": earmark_ids(vocab, TOKENS),
        }
        logits = model(batch)[..., released_columns(vocab)]
    torch.testing.assert_close(logits, expected, atol=LOGIT_TOLERANCE, rtol=LOGIT_TOLERANCE)


def test_a_converted_act_checkpoint_decodes_the_released_greedy_ids(tmp_path):
    # <eos> made unlikely so the caption runs to its length limit through several words
    state, path, words = _act_file(tmp_path, eos_bias=-3.0)
    converted = convert("act", path, words=words)
    model, vocab = converted.model, converted.vocab
    assert model is not None
    assert vocab is not None
    spec = torch.randn(1, 32, 64, generator=torch.Generator().manual_seed(2)) * 10
    with torch.no_grad():
        memory = released_audio(state, spec)
        expected = reference_greedy(lambda t: released_decoder(state, memory, t), 8)
        batch = {"features": spec, "feature_lengths": torch.tensor([32])}
        (hyp,) = greedy(model, batch, max_length=8)
    assert len(expected) >= 4
    assert [vocab.words[i] for i in hyp.tokens] == [WORDS[i] for i in expected]


def test_vact_concatenation_logits_match_the_released_network(tmp_path):
    state, path, words = _act_file(tmp_path, video=True)
    converted = convert("vact_concat", path, words=words)
    model, vocab = converted.model, converted.vocab
    assert model is not None
    assert vocab is not None
    gen = torch.Generator().manual_seed(4)
    spec, video = torch.randn(2, 32, 64, generator=gen) * 10, torch.randn(2, 3, 1024, generator=gen)
    with torch.no_grad():
        video_tokens = torch.relu(linear(video, state, "video_encoder_linear"))
        memory = torch.cat([video_tokens, released_audio(state, spec)], dim=1)  # [V ; A]
        expected = released_decoder(state, memory, TOKENS)
        batch = {
            "features": spec,
            "feature_lengths": torch.tensor([32, 32]),
            "video": video,
            "video_lengths": torch.tensor([3, 3]),
            "tokens": earmark_ids(vocab, TOKENS),
        }
        logits = model(batch)[..., released_columns(vocab)]
    torch.testing.assert_close(logits, expected, atol=LOGIT_TOLERANCE, rtol=LOGIT_TOLERANCE)


# MAAC --------------------------------------------------------------------------------------

MAAC_WORDS = ["<sos>", "a", "dog", "barks", "man", "speaks", "car", "passes", "rain", "<eos>"]
MAAC_WORDS += ["falls", "wind", "blows"]


def _conv_block_layout(name: str, cin: int, cout: int) -> dict[str, tuple[int, ...]]:
    layout: dict[str, tuple[int, ...]] = {
        f"{name}.conv1.weight": (cout, cin, 3, 3),
        f"{name}.conv2.weight": (cout, cout, 3, 3),
    }
    for bn in ("bn1", "bn2"):
        layout |= _bn_layout(f"{name}.{bn}", cout)
    return layout


def _bn_layout(name: str, width: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{name}.weight": (width,),
        f"{name}.bias": (width,),
        f"{name}.running_mean": (width,),
        f"{name}.running_var": (width,),
        f"{name}.num_batches_tracked": (),
    }


def resnet38_layout(prefix: str) -> dict[str, tuple[int, ...]]:
    """PANNs ResNet38 without its front end and heads, as the MAAC code builds it
    (encoder.py:309-320; _ResNet with 3-4-6-3 basic blocks of 64, 128, 256, 512 channels, a
    stride-2 stage opening with AvgPool2d + 1x1 conv + BatchNorm as its downsample)."""
    layout = _bn_layout("bn0", 64) | _conv_block_layout("conv_block1", 1, 64)
    inplanes = 64
    for stage, (blocks, planes) in enumerate(
        zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True), start=1
    ):
        for j in range(blocks):
            block = f"resnet.layer{stage}.{j}"
            cin = inplanes if j == 0 else planes
            layout[f"{block}.conv1.weight"] = (planes, cin, 3, 3)
            layout[f"{block}.conv2.weight"] = (planes, planes, 3, 3)
            layout |= _bn_layout(f"{block}.bn1", planes) | _bn_layout(f"{block}.bn2", planes)
            if j == 0 and stage > 1:
                layout[f"{block}.downsample.1.weight"] = (planes, inplanes, 1, 1)
                layout |= _bn_layout(f"{block}.downsample.2", planes)
        inplanes = planes
    layout |= _conv_block_layout("conv_block_after1", 512, 2048)
    return {prefix + k: v for k, v in layout.items()}


def maac_layout(ntoken: int) -> dict[str, tuple[int, ...]]:
    """AttModel(encoder_name="tag", tag_emb, preword_emb, no multiScale, no two_stage_cnn) as
    hparams.py sets it: Tag (encoder.py:501-548) and AttDecoder (model.py:131-204)."""
    layout = resnet38_layout("encoder.feature.") | {
        "encoder.fc1.weight": (2048, 2048),
        "encoder.fc1.bias": (2048,),
        "encoder.fc1_f1.weight": (2048, 128),
        "encoder.fc1_f1.bias": (2048,),
        "encoder.fc1_f2.weight": (2048, 256),
        "encoder.fc1_f2.bias": (2048,),
        "encoder.fc.weight": (300, 6144),
        "encoder.fc.bias": (300,),
        "decoder.linear_feature.weight": (512, 2048),
        "decoder.linear_feature.bias": (512,),
        "decoder.decode_step.weight_ih": (2048, 512),
        "decoder.decode_step.weight_hh": (2048, 512),
        "decoder.decode_step.bias_ih": (2048,),
        "decoder.decode_step.bias_hh": (2048,),
        "decoder.classifier.weight": (ntoken, 512),
        "decoder.classifier.bias": (ntoken,),
        "decoder.word_emb.weight": (ntoken, 512),
    }
    for attention in ("attention", "preword_attention", "taggingword_attention"):
        for proj in ("Q", "K", "V"):
            layout[f"decoder.{attention}.{proj}.weight"] = (512, 512)
            layout[f"decoder.{attention}.{proj}.bias"] = (512,)
        layout[f"decoder.{attention}.full_att.weight"] = (1, 512)
        layout[f"decoder.{attention}.full_att.bias"] = (1,)
    for square in ("init_h", "init_c", "f_beta", "f_beta_preword", "f_beta_taggingword"):
        layout[f"decoder.{square}.weight"] = (512, 512)
        layout[f"decoder.{square}.bias"] = (512,)
    return layout


def _bn(x: Tensor, s: dict[str, Tensor], name: str) -> Tensor:
    return F.batch_norm(
        x,
        s[f"{name}.running_mean"],
        s[f"{name}.running_var"],
        s[f"{name}.weight"],
        s[f"{name}.bias"],
        training=False,
        eps=1e-5,
    )


def _conv_block(x: Tensor, s: dict[str, Tensor], name: str, pool: int) -> Tensor:
    x = torch.relu(_bn(F.conv2d(x, s[f"{name}.conv1.weight"], padding=1), s, f"{name}.bn1"))
    x = torch.relu(_bn(F.conv2d(x, s[f"{name}.conv2.weight"], padding=1), s, f"{name}.bn2"))
    return F.avg_pool2d(x, pool)


def released_tag(s: dict[str, Tensor], spec: Tensor) -> tuple[Tensor, Tensor]:
    """Tag.forward in eval mode -> keyword probabilities (B, 300), last block (B, T', 2048)."""
    e = "encoder.feature."
    x = _bn(spec[:, None].transpose(1, 3), s, e + "bn0").transpose(1, 3)
    x = _conv_block(x, s, e + "conv_block1", 2)
    levels = []
    for stage, blocks in enumerate((3, 4, 6, 3), start=1):
        for j in range(blocks):
            block = f"{e}resnet.layer{stage}.{j}"
            stride = 2 if stage > 1 and j == 0 else 1
            out = F.avg_pool2d(x, 2) if stride == 2 else x
            out = torch.relu(
                _bn(F.conv2d(out, s[f"{block}.conv1.weight"], padding=1), s, f"{block}.bn1")
            )
            out = _bn(F.conv2d(out, s[f"{block}.conv2.weight"], padding=1), s, f"{block}.bn2")
            identity = x
            if stride == 2:
                identity = F.conv2d(F.avg_pool2d(x, 2), s[f"{block}.downsample.1.weight"])
                identity = _bn(identity, s, f"{block}.downsample.2")
            x = torch.relu(out + identity)
        levels.append(x)
    last = _conv_block(F.avg_pool2d(x, 2), s, e + "conv_block_after1", 1)
    pooled = []
    for name, level in (("fc1", last), ("fc1_f1", levels[1]), ("fc1_f2", levels[2])):
        frames = level.mean(dim=3)  # (B, C, T)
        summary = frames.amax(dim=2) + frames.mean(dim=2)
        pooled.append(torch.relu(linear(summary, s, f"encoder.{name}")))
    probabilities = torch.sigmoid(linear(torch.cat(pooled, dim=1), s, "encoder.fc"))
    return probabilities, last.mean(dim=3).transpose(1, 2)


def _gated_attention(s, name, gate, keys: Tensor, h: Tensor) -> Tensor:
    """Attention (model.py:50-68) times sigma(f_beta(h))."""
    scores = linear(
        torch.relu(linear(keys, s, f"{name}.K") + linear(h, s, f"{name}.Q")[:, None]),
        s,
        f"{name}.full_att",
    )
    alpha = torch.softmax(scores.squeeze(-1), dim=1)
    context = (linear(keys, s, f"{name}.V") * alpha[..., None]).sum(1)
    return torch.sigmoid(linear(h, s, gate)) * context


def released_maac(
    s: dict[str, Tensor], spec: Tensor, tokens: Tensor, tag_words: list[int]
) -> tuple[Tensor, Tensor]:
    """AttModel.forward with teacher forcing (AttDecoder.trainer, model.py:232-297) in eval
    mode -> keyword probabilities (B, 300) and logits (B, L, V)."""
    probabilities, last = released_tag(s, spec)
    d = "decoder."
    x = linear(last, s, d + "linear_feature")
    h, c = linear(x.mean(1), s, d + "init_h"), linear(x.mean(1), s, d + "init_c")
    emb = s[d + "word_emb.weight"]
    top = probabilities.topk(5).indices
    tags = emb[torch.tensor(tag_words)[top]]
    previous = torch.zeros(tokens.shape[0], 1, 512)
    word = emb[tokens[:, 0]]
    logits = []
    for t in range(tokens.shape[1]):
        o_x = _gated_attention(s, d + "attention", d + "f_beta", x, h)
        o_p = _gated_attention(s, d + "preword_attention", d + "f_beta_preword", previous, h)
        o_w = _gated_attention(s, d + "preword_attention", d + "f_beta_taggingword", tags, h)
        gates = linear(
            o_p + word + o_x + o_w,
            {"w.weight": s[d + "decode_step.weight_ih"], "w.bias": s[d + "decode_step.bias_ih"]},
            "w",
        )
        gates = gates + h @ s[d + "decode_step.weight_hh"].T + s[d + "decode_step.bias_hh"]
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        logits.append(linear(h, s, d + "classifier"))
        if t < tokens.shape[1] - 1:
            word = emb[tokens[:, t + 1]]
            previous = torch.cat([previous, word[:, None]], dim=1)
    return probabilities, torch.stack(logits, dim=1)


def test_maac_keywords_and_logits_match_the_released_network(tmp_path):
    state = random_state(maac_layout(len(MAAC_WORDS)), seed=5)
    path = tmp_path / "30.pt"
    torch.save(state, path)  # train.py:387 saves the bare state dict
    gen = torch.Generator().manual_seed(6)
    tag_words = torch.randint(1, len(MAAC_WORDS), (300,), generator=gen).tolist()
    words = write_words(tmp_path / "words_list.p", MAAC_WORDS)
    converted = convert(
        "maac",
        path,
        words=words,
        keyword_words=write_words(tmp_path / "TaggingToEmbs.p", tag_words),
    )
    model, vocab = converted.model, converted.vocab
    assert model is not None
    assert vocab is not None
    spec = torch.randn(1, 128, 64, generator=gen) * 10
    tokens = torch.tensor([[0, 1, 2, 3, 10, 9]])
    with torch.no_grad():
        probabilities, expected = released_maac(state, spec, tokens, tag_words)
        batch = {
            "features": spec,
            "feature_lengths": torch.tensor([128]),
            "tokens": torch.tensor(
                [
                    [vocab.id(MAAC_WORDS[i].replace("<sos>", "<bos>")) for i in row]
                    for row in tokens.tolist()
                ]
            ),
        }
        keywords = torch.sigmoid(model.keyword_logits(batch))  # type: ignore[operator]
        columns = [vocab.id(w.replace("<sos>", "<bos>")) for w in MAAC_WORDS]
        logits = model(batch)[..., columns]
    torch.testing.assert_close(keywords, probabilities, atol=LOGIT_TOLERANCE, rtol=LOGIT_TOLERANCE)
    torch.testing.assert_close(logits, expected, atol=LOGIT_TOLERANCE, rtol=LOGIT_TOLERANCE)
