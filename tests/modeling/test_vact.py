"""V-ACT and its baselines: AdaAVA-audio, AdaAVA-video, concatenation and video-only."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.config_av import VACTConfig
from modeling.ml.decoding import beam_search, greedy
from modeling.ml.models.adaava import AdaAVADecoderLayer
from modeling.ml.models.base import caption_loss
from modeling.ml.presets import model_preset
from modeling.ml.registry import build_model
from modeling.ml.vocab import EOS_ID
from tests.modeling.captioning import one_torch_thread, vocabulary  # noqa: F401 (autouse)
from tests.modeling.captioning_av import (
    assert_checkpoint_round_trip,
    av_batch,
    overfit,
    padded_pair,
    tiny_av_model,
)

NAMES = ["vact", "vact_video", "vact_concat", "video_only"]


def _loss(model, batch):
    return caption_loss(model(batch), batch["tokens"])


@pytest.mark.parametrize("name", NAMES)
def test_forward_gives_next_word_logits_per_token(name):
    vocab = vocabulary()
    data = av_batch(vocab)
    logits = tiny_av_model(name, vocab)(data)
    assert logits.shape == (4, data["tokens"].size(1), len(vocab))
    assert torch.isfinite(logits).all()  # row 2 has no video at all


@pytest.mark.parametrize("name", NAMES)
def test_backward_reaches_every_parameter(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab)
    _loss(model, av_batch(vocab)).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_padding_does_not_change_the_outputs(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab).eval()
    single, together, row = padded_pair(vocab)
    with torch.no_grad():
        expected = model(single)[0]
        got = model(together)[row, : expected.size(0)]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_loss_falls_when_overfitting_one_batch(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab, dropout=0.0)
    losses = overfit(model, av_batch(vocab), _loss)
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.parametrize("name", NAMES)
def test_step_by_step_decoding_matches_teacher_forcing(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        expected = torch.log_softmax(model(data), dim=-1)
        memory = model.encode(data)
        for t in range(data["tokens"].size(1)):
            log_probs, _ = model.step(memory, data["tokens"][:, : t + 1], None)
            real = data["tokens"][:, t] != 0
            torch.testing.assert_close(log_probs[real], expected[real, t], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_beam_search_and_greedy_decode_through_the_shared_module(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab)
    data = av_batch(vocab)
    beams = beam_search(model, data, beam_size=3, max_length=6)
    assert len(beams) == 4
    assert all(1 <= len(hyps) <= 3 for hyps in beams)
    assert all(len(h.tokens) <= 6 and EOS_ID not in h.tokens for hyps in beams for h in hyps)
    # A beam of one is the greedy caption (a wider beam need not beat greedy: it may prune
    # greedy's path before its end).
    best = beam_search(model, data, beam_size=1, max_length=6, length_penalty=0.0)
    for hyps, single in zip(best, greedy(model, data, max_length=6), strict=True):
        assert hyps[0].tokens == single.tokens
        assert hyps[0].log_prob == pytest.approx(single.log_prob, abs=1e-4)


def test_video_only_model_never_reads_the_audio():
    vocab = vocabulary()
    model = tiny_av_model("video_only", vocab).eval()
    data = av_batch(vocab)
    changed = dict(data, features=torch.randn_like(data["features"]))
    with torch.no_grad():
        torch.testing.assert_close(model(changed), model(data))
    assert not hasattr(model, "encoder")


@pytest.mark.parametrize("name", ["vact", "vact_video", "vact_concat"])
def test_audio_visual_models_read_both_modalities(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab, beta=0.0).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        base = model(data)
        audio_changed = model(dict(data, features=torch.randn_like(data["features"])))
        video_changed = model(dict(data, video=torch.randn_like(data["video"])))
    assert not torch.allclose(audio_changed, base)
    assert not torch.allclose(video_changed[[0, 1, 3]], base[[0, 1, 3]])


@pytest.mark.parametrize(("name", "guide"), [("vact", "audio"), ("vact_video", "video")])
def test_registry_name_fixes_the_adaava_guide_and_config_sets_beta(name, guide):
    config = model_preset(name, "tiny")
    assert isinstance(config, VACTConfig)
    config.beta = 0.3
    model = build_model(name, config, vocab_size=12)
    layers = [m for m in model.modules() if isinstance(m, AdaAVADecoderLayer)]
    assert len(layers) == config.decoder_layers
    assert all(layer.adaava.guide == guide and layer.adaava.beta == 0.3 for layer in layers)


@pytest.mark.parametrize("name", ["vact_concat", "video_only"])
def test_baselines_have_no_adaava(name):
    model = tiny_av_model(name, vocabulary())
    assert not any(isinstance(m, AdaAVADecoderLayer) for m in model.modules())


def test_adaava_with_beta_one_ignores_audio_and_video():
    # Both masks off in every block: the decoder can only see the words.
    vocab = vocabulary()
    model = tiny_av_model("vact", vocab, beta=1.0).eval()
    data = av_batch(vocab)
    changed = dict(
        data, features=torch.randn_like(data["features"]), video=torch.randn_like(data["video"])
    )
    with torch.no_grad():
        torch.testing.assert_close(model(changed), model(data))


def test_batch_without_video_is_refused_with_a_clear_message():
    vocab = vocabulary()
    data = av_batch(vocab)
    del data["video"]
    with pytest.raises(ValueError, match=r"needs batch\['video'\]"):
        tiny_av_model("vact", vocab)(data)


def test_trainable_video_frame_encoder_option_stays_padding_invariant():
    vocab = vocabulary()
    model = tiny_av_model("vact", vocab, video_layers=1).eval()
    single, together, row = padded_pair(vocab)
    with torch.no_grad():
        expected = model(single)[0]
        got = model(together)[row, : expected.size(0)]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_rebuilds_the_model_it_names(name, tmp_path):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab, beta=0.2)
    assert_checkpoint_round_trip(name, model, vocab, tmp_path / "model.pt")
