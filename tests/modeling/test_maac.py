"""MAAC: keyword encoder, GLU attention, the shared semantic module and the LSTM decoder."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.config_av import MAACConfig
from modeling.ml.decoding import beam_search
from modeling.ml.encoders import PannsConfig, ResNet38
from modeling.ml.keywords import top_keywords
from modeling.ml.models.base import caption_loss, masked_mean
from modeling.ml.models.maac import GLUAttention, MAACCaptioner
from modeling.ml.presets import model_preset
from modeling.ml.registry import build_model
from tests.modeling.captioning import one_torch_thread, vocabulary  # noqa: F401 (autouse)
from tests.modeling.captioning_av import (
    assert_checkpoint_round_trip,
    av_batch,
    overfit,
    padded_pair,
    tiny_av_model,
)

N_KEYWORDS = 12  # the tiny preset's keyword vocabulary


def _model(vocab=None, **overrides):
    return tiny_av_model("maac", vocab or vocabulary(), **overrides)


def _caption_loss(model, batch):
    return caption_loss(model(batch), batch["tokens"])


def _with_targets(batch, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    targets = (torch.rand(batch["tokens"].size(0), N_KEYWORDS, generator=gen) < 0.3).float()
    return dict(batch, keyword_targets=targets)


# GLU attention (eq. 3-6) -------------------------------------------------------------------


def _hand_made_attention() -> GLUAttention:
    psi = GLUAttention(2, 2)
    with torch.no_grad():
        psi.feature.weight.copy_(torch.eye(2))  # F W_i = F
        psi.feature.bias.zero_()
        psi.state.weight.zero_()  # h W_s + b_s = (0, -1)
        psi.state.bias.copy_(torch.tensor([0.0, -1.0]))
        psi.score.weight.copy_(torch.tensor([[1.0, 1.0]]))  # A W_n = sum of A
        psi.score.bias.zero_()
    return psi


def test_glu_attention_follows_eq_3_to_6():
    psi = _hand_made_attention()
    features = torch.tensor([[[1.0, 3.0], [2.0, 0.0], [-1.0, -1.0]]])
    hidden = torch.tensor([[0.5, -2.0]])
    out, alpha = psi(features, torch.ones(1, 3, dtype=torch.bool), hidden)
    a = torch.relu(features + torch.tensor([0.0, -1.0]))  # eq. 3
    expected_alpha = torch.softmax(a.sum(-1), dim=-1)  # eq. 4: [3, 2, 0]
    torch.testing.assert_close(alpha, expected_alpha)
    context = (expected_alpha[..., None] * features).sum(1)  # eq. 5
    torch.testing.assert_close(out, context * torch.sigmoid(hidden))  # eq. 6: GLU([c ; h])


def test_glu_attention_ignores_masked_positions():
    psi = _hand_made_attention()
    features = torch.tensor([[[1.0, 3.0], [2.0, 0.0], [50.0, 50.0]]])
    mask = torch.tensor([[True, True, False]])
    out, alpha = psi(features, mask, torch.zeros(1, 2))
    assert alpha[0, 2] == 0.0
    short, _ = psi(features[:, :2], mask[:, :2], torch.zeros(1, 2))
    torch.testing.assert_close(out, short)


# the shared semantic module -----------------------------------------------------------------


@pytest.mark.parametrize("form", ["code", "paper"])
def test_one_semantic_module_reads_both_keywords_and_previous_words(form):
    vocab = vocabulary()
    model = _model(vocab, form=form).eval()
    data = av_batch(vocab)
    modules = [m for m in model.modules() if isinstance(m, GLUAttention)]
    assert modules == [model.acoustic_attention, model.semantic_attention]
    seen = []
    hook = model.semantic_attention.register_forward_hook(
        lambda module, inputs, output: seen.append(inputs[0])
    )
    with torch.no_grad():
        memory = model.encode(data)
        model.step(memory, data["tokens"][:, :3], None)
    hook.remove()
    keywords, words = seen
    assert torch.equal(keywords, memory["keywords"])  # W: (B, K, C)
    assert keywords.shape == (4, model.config.top_k, model.config.hidden_dim)
    previous = model.embedding(data["tokens"][:, :3])  # P: w_0 .. w_{t-1}
    if form == "code":  # the released memory opens with a zero vector, not <bos>
        previous[:, 0] = 0.0
    assert torch.equal(words, previous)


def test_semantic_parameters_shape_both_keyword_and_word_attention():
    # Perturbing Psi_s changes what the decoder gets from W and from P alike: with the
    # keywords' and the previous words' contributions isolated, both move.
    vocab = vocabulary()
    model = _model(vocab).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        memory = model.encode(data)
        words = model.embedding(data["tokens"][:, :2])
        mask = torch.ones(4, 2, dtype=torch.bool)
        keyword_mask = torch.ones(4, model.config.top_k, dtype=torch.bool)
        o_w, _ = model.semantic_attention(memory["keywords"], keyword_mask, memory["h"])
        o_p, _ = model.semantic_attention(words, mask, memory["h"])
        model.semantic_attention.feature.weight.mul_(3.0)
        o_w2, _ = model.semantic_attention(memory["keywords"], keyword_mask, memory["h"])
        o_p2, _ = model.semantic_attention(words, mask, memory["h"])
    assert not torch.allclose(o_w, o_w2)
    assert not torch.allclose(o_p, o_p2)


# keyword encoder ---------------------------------------------------------------------------


def test_keyword_encoder_scores_every_keyword():
    vocab = vocabulary()
    logits = _model(vocab).keyword_logits(av_batch(vocab))
    assert logits.shape == (4, N_KEYWORDS)


def test_keyword_pretraining_loss_falls_when_overfitting():
    vocab = vocabulary()
    model = _model(vocab)
    losses = overfit(model, _with_targets(av_batch(vocab)), lambda m, b: m.keyword_loss(b))
    assert losses[-1] < 0.3 * losses[0]


def test_keyword_targets_of_the_wrong_width_are_refused():
    vocab = vocabulary()
    data = dict(av_batch(vocab), keyword_targets=torch.zeros(4, 5))
    with pytest.raises(ValueError, match="has 5 columns, the model has num_keywords=12"):
        _model(vocab).keyword_loss(data)


def test_decoder_attends_to_the_top_k_predicted_keywords_unless_given():
    vocab = vocabulary()
    model = _model(vocab).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        predicted = top_keywords(model.keyword_logits(data), model.config.top_k)
        implicit = model(data)
        explicit = model(dict(data, keywords=predicted))
        other = model(dict(data, keywords=(predicted + 1) % N_KEYWORDS))
    torch.testing.assert_close(implicit, explicit)
    assert not torch.allclose(other, implicit)


def test_paper_initial_state_is_the_average_of_the_acoustic_features():
    vocab = vocabulary()
    model = _model(vocab, form="paper").eval()
    with torch.no_grad():
        memory = model.encode(av_batch(vocab))
    lengths = memory["acoustic_mask"].sum(1)
    torch.testing.assert_close(memory["h"], masked_mean(memory["acoustic"], lengths))
    assert not memory["c"].any()


def test_code_initial_state_is_learned_from_the_average_acoustic_feature():
    vocab = vocabulary()
    model = _model(vocab).eval()
    assert isinstance(model, MAACCaptioner)
    with torch.no_grad():
        memory = model.encode(av_batch(vocab))
        mean = masked_mean(memory["acoustic"], memory["acoustic_mask"].sum(1))
        torch.testing.assert_close(memory["h"], mean @ model.init_h.weight.T + model.init_h.bias)
        torch.testing.assert_close(memory["c"], mean @ model.init_c.weight.T + model.init_c.bias)


def test_code_attention_gates_a_value_projection_with_its_own_layer():
    psi = GLUAttention(2, 2, value=True)
    gate = torch.nn.Linear(2, 2)
    features, hidden = torch.randn(1, 3, 2), torch.randn(1, 2)
    with torch.no_grad():
        out, alpha = psi(features, torch.ones(1, 3, dtype=torch.bool), hidden, gate)
        assert psi.value is not None
        values = features @ psi.value.weight.T + psi.value.bias
        expected = torch.sigmoid(hidden @ gate.weight.T + gate.bias) * (
            alpha[..., None] * values
        ).sum(1)
    torch.testing.assert_close(out, expected)


def test_frozen_keyword_encoder_gets_no_gradient_and_keeps_its_statistics():
    vocab = vocabulary()
    model = _model(vocab).train()
    stats = model.keyword_encoder.backbone.blocks[0][1].running_mean.clone()
    _caption_loss(model, av_batch(vocab)).backward()
    assert all(p.grad is None for p in model.keyword_encoder.parameters())
    assert torch.equal(model.keyword_encoder.backbone.blocks[0][1].running_mean, stats)
    assert model.keyword_encoder.training  # its mode is restored after the frozen pass
    others = [n for n, p in model.named_parameters() if not n.startswith("keyword_encoder.")]
    assert [n for n in others if dict(model.named_parameters())[n].grad is None] == []


def test_unfrozen_model_trains_everything_with_caption_and_keyword_losses():
    vocab = vocabulary()
    model = _model(vocab, freeze_keyword_encoder=False)
    data = _with_targets(av_batch(vocab))
    (_caption_loss(model, data) + model.keyword_loss(data)).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


# captioner behaviour -------------------------------------------------------------------------


def test_forward_gives_next_word_logits_per_token():
    vocab = vocabulary()
    data = av_batch(vocab)
    logits = _model(vocab)(data)
    assert logits.shape == (4, data["tokens"].size(1), len(vocab))
    assert torch.isfinite(logits).all()


def test_padding_does_not_change_the_outputs():
    vocab = vocabulary()
    model = _model(vocab).eval()
    single, together, row = padded_pair(vocab)
    with torch.no_grad():
        expected = model(single)[0]
        got = model(together)[row, : expected.size(0)]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_loss_falls_when_overfitting_one_batch():
    vocab = vocabulary()
    model = _model(vocab, embedding_dropout=0.0, dropout=0.0)
    losses = overfit(model, av_batch(vocab), _caption_loss, steps=60)
    assert losses[-1] < 0.2 * losses[0]


def test_step_by_step_decoding_matches_teacher_forcing():
    vocab = vocabulary()
    model = _model(vocab).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        expected = torch.log_softmax(model(data), dim=-1)
        memory = model.encode(data)
        state = None
        for t in range(data["tokens"].size(1)):
            log_probs, state = model.step(memory, data["tokens"][:, : t + 1], state)
            real = data["tokens"][:, t] != 0
            torch.testing.assert_close(log_probs[real], expected[real, t], atol=1e-5, rtol=1e-4)


def test_beam_search_decodes_through_the_shared_module():
    vocab = vocabulary()
    beams = beam_search(_model(vocab), av_batch(vocab), beam_size=4, max_length=6)
    assert len(beams) == 4
    assert all(1 <= len(hyps) <= 4 for hyps in beams)


def test_training_mode_uses_the_paper_dropouts():
    vocab = vocabulary()
    model = _model(vocab)
    assert model.embedding_dropout.p == 0.5
    assert model.dropout.p == 0.25
    data = av_batch(vocab)
    assert not torch.equal(model(data), model(data))


def test_resnet38_backbone_loads_panns_weights_from_a_file(tmp_path):
    widths, layers = (4, 8, 8, 8, 8, 16), (1, 1, 2, 1)
    torch.manual_seed(5)
    panns = ResNet38(
        PannsConfig(n_mels=64, widths=widths, resnet_layers=layers, embedding_dim=16, classes=527)
    )
    path = tmp_path / "ResNet38_mAP=0.434.pth"
    torch.save({"model": panns.state_dict()}, path)
    config = model_preset("maac", "tiny")
    assert isinstance(config, MAACConfig)
    config.backbone, config.feature_dim = "resnet38", 64
    config.backbone_weights = str(path)
    config.panns_widths, config.panns_layers = widths, layers
    model = build_model("maac", config, vocab_size=len(vocabulary()))
    assert isinstance(model, MAACCaptioner)
    loaded = model.keyword_encoder.backbone.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in panns.state_dict().items())
    frames = torch.randn(2, 64, 64)
    batch = {"features": frames, "feature_lengths": torch.tensor([64, 40])}
    assert model.keyword_logits(batch).shape == (2, N_KEYWORDS)


@pytest.mark.parametrize("form", ["code", "paper"])
def test_the_resnet38_keyword_encoder_pools_layer2_layer3_and_the_last_block(form):
    config = model_preset("maac", "tiny")
    assert isinstance(config, MAACConfig)
    config.backbone, config.feature_dim, config.form = "resnet38", 64, form
    # distinct widths: layer2 6, layer3 10, layer4 12, conv_block_after1 18 channels
    config.panns_widths, config.panns_layers = (4, 6, 10, 12, 14, 18), (1, 1, 1, 1)
    model = build_model("maac", config, vocab_size=len(vocabulary())).eval()
    assert isinstance(model, MAACCaptioner)
    encoder = model.keyword_encoder
    backbone = encoder.backbone
    assert isinstance(backbone, ResNet38)
    assert [level.in_features for level in encoder.levels] == [6, 10, 18]
    outputs: dict[str, torch.Tensor] = {}
    level_inputs: list[torch.Tensor] = []
    blocks: list[tuple[str, torch.nn.Module]] = [
        ("layer2", backbone.resnet.get_submodule("layer2")),
        ("layer3", backbone.resnet.get_submodule("layer3")),
        ("last", backbone.conv_block_after1),
    ]
    for key, module in blocks:
        module.register_forward_hook(lambda _m, _a, out, key=key: outputs.__setitem__(key, out))
    for level in encoder.levels:
        level.register_forward_pre_hook(lambda _m, args: level_inputs.append(args[0]))

    lengths = torch.tensor([64, 64])
    with torch.no_grad():
        model.keyword_logits({"features": torch.randn(2, 64, 64), "feature_lengths": lengths})

    for pooled, key in zip(level_inputs, ("layer2", "layer3", "last"), strict=True):
        frames = outputs[key].mean(dim=3).transpose(1, 2)  # the block averaged over frequency
        if form == "paper":
            torch.testing.assert_close(pooled, frames.mean(dim=1))  # GAP over its (full) frames
        else:  # encoder.py:597-605: max + mean over time
            torch.testing.assert_close(pooled, frames.amax(dim=1) + frames.mean(dim=1))


def test_checkpoint_rebuilds_the_model(tmp_path):
    vocab = vocabulary()
    assert_checkpoint_round_trip("maac", _model(vocab), vocab, tmp_path / "model.pt")
