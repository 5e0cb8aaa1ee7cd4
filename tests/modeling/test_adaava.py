"""AdaAVA equation by equation (Liu et al. 2023, eq. 1-7) on hand-made tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from modeling.ml.models.adaava import AdaAVA, AdaAVADecoderLayer, adaava_gate, cross_attend
from tests.modeling.captioning import one_torch_thread  # noqa: F401 (autouse fixture)

# Confidences and beta chosen exactly representable in binary, so "exactly at beta" is exact.
CONF = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9]).reshape(1, 5, 1)
AUDIO = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]).reshape(1, 5, 1)
VIDEO = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0]).reshape(1, 5, 1)


def test_masks_switch_a_stream_off_below_beta():
    _, m_a, m_v = adaava_gate(AUDIO, VIDEO, CONF, beta=0.25)
    # M_a = 1[A_conf > beta]: 0.25 itself is not above beta.
    assert m_a.flatten().tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
    # M_v = 1[1 - A_conf > beta]: 1 - 0.75 = 0.25 is not above beta either.
    assert m_v.flatten().tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_output_is_the_masked_confidence_weighted_mix():
    out, _, _ = adaava_gate(AUDIO, VIDEO, CONF, beta=0.25)
    expected = [
        0.9 * 10.0,  # audio masked off
        0.75 * 20.0,  # audio exactly at beta: off
        0.5 * 3.0 + 0.5 * 30.0,  # both on
        0.75 * 4.0,  # video exactly at beta: off
        0.9 * 5.0,  # video masked off
    ]
    torch.testing.assert_close(out.flatten(), torch.tensor(expected))


def test_default_beta_masks_low_confidences():
    conf = torch.tensor([0.05, 0.5, 0.9]).reshape(1, 3, 1)
    out, m_a, m_v = adaava_gate(AUDIO[:, :3], VIDEO[:, :3], conf, beta=0.13)
    assert m_a.flatten().tolist() == [0.0, 1.0, 1.0]
    assert m_v.flatten().tolist() == [1.0, 1.0, 0.0]
    expected = torch.tensor([0.95 * 10.0, 0.5 * 2.0 + 0.5 * 20.0, 0.9 * 3.0])
    torch.testing.assert_close(out.flatten(), expected)


def test_beta_zero_is_a_plain_convex_mix():
    conf = torch.tensor([0.001, 0.3, 0.999]).reshape(1, 3, 1)
    out, m_a, m_v = adaava_gate(AUDIO[:, :3], VIDEO[:, :3], conf, beta=0.0)
    assert m_a.all()
    assert m_v.all()
    torch.testing.assert_close(out, conf * AUDIO[:, :3] + (1 - conf) * VIDEO[:, :3])


@pytest.mark.parametrize("beta", [1.0, 1.5])
def test_beta_of_one_or_more_switches_both_streams_off(beta):
    out, m_a, m_v = adaava_gate(AUDIO, VIDEO, CONF, beta=beta)
    assert not m_a.any()
    assert not m_v.any()
    assert torch.equal(out, torch.zeros_like(out))


def test_confidence_reads_audio_context_and_h_for_audio_guide():
    ada = AdaAVA(2, beta=0.13, guide="audio")
    with torch.no_grad():
        # FC([A_cross ; H]) = A_cross - H on every dimension.
        ada.fc.weight.copy_(torch.cat([torch.eye(2), -torch.eye(2)], dim=1))
        ada.fc.bias.zero_()
    hidden = torch.tensor([[[0.5, -1.0]]])
    audio = torch.tensor([[[2.0, 0.0]]])
    video = torch.tensor([[[7.0, 7.0]]])
    conf = ada.confidence(hidden, audio, video)
    torch.testing.assert_close(conf, torch.sigmoid(audio - hidden))
    # The video context does not enter eq. 3.
    torch.testing.assert_close(ada.confidence(hidden, audio, -video), conf)
    expected, _, _ = adaava_gate(audio, video, conf, 0.13)
    torch.testing.assert_close(ada(hidden, audio, video), expected)


def test_video_guide_takes_confidence_from_video_context():
    ada = AdaAVA(2, guide="video")
    with torch.no_grad():
        ada.fc.weight.copy_(torch.cat([torch.eye(2), torch.zeros(2, 2)], dim=1))
        ada.fc.bias.zero_()
    hidden, audio = torch.zeros(1, 1, 2), torch.ones(1, 1, 2)
    video = torch.tensor([[[3.0, -3.0]]])
    # Eq. 7: A_conf = sigma(FC([V_cross ; H])).
    torch.testing.assert_close(ada.confidence(hidden, audio, video), torch.sigmoid(video))


def test_scalar_confidence_is_one_value_per_word():
    ada = AdaAVA(4, confidence="scalar")
    conf = ada.confidence(torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    assert conf.shape == (2, 3, 1)


def _layer(beta: float) -> AdaAVADecoderLayer:
    torch.manual_seed(0)
    return AdaAVADecoderLayer(8, 2, 16, 0.0, beta=beta, guide="audio").eval()


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    words = torch.randn(2, 4, 8, generator=gen)
    audio, video = torch.randn(2, 5, 8, generator=gen), torch.randn(2, 3, 8, generator=gen)
    masks = torch.ones(2, 5, dtype=torch.bool), torch.ones(2, 3, dtype=torch.bool)
    causal = nn.Transformer.generate_square_subsequent_mask(4)
    return words, audio, masks[0], video, masks[1], causal


def test_no_residual_around_adaava():
    # With both streams masked off, AV_out = 0; a residual would still carry W through.
    layer = _layer(beta=1.0)
    words, *rest = _inputs()
    with torch.no_grad():
        first = layer(words, *rest)
        second = layer(torch.randn_like(words) * 5, *rest)
    torch.testing.assert_close(first, second)


def test_block_output_is_feed_forward_of_av_out_plus_av_out():
    layer = _layer(beta=0.13)
    inputs = _inputs()
    with torch.no_grad():
        hidden, audio_context, video_context = layer.attend(*inputs)
        av_out = layer.adaava(hidden, audio_context, video_context)
        expected = av_out + layer.ff(layer.norm_ff(av_out))
        torch.testing.assert_close(layer(*inputs), expected)


def test_eq1_hidden_is_self_attention_plus_words():
    layer = _layer(beta=0.13)
    words, audio, audio_mask, video, video_mask, causal = _inputs()
    with torch.no_grad():
        hidden, _, _ = layer.attend(words, audio, audio_mask, video, video_mask, causal)
        x = layer.norm_self(words)
        attended, _ = layer.self_attn(x, x, x, attn_mask=causal)
    torch.testing.assert_close(hidden, attended + words)


def test_clip_without_video_gets_a_zero_video_context():
    attention = nn.MultiheadAttention(4, 2, batch_first=True)
    query, memory = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    mask = torch.tensor([[True, True, False, False, False], [False] * 5])
    context = cross_attend(attention, query, memory, mask)
    assert torch.isfinite(context).all()
    assert torch.equal(context[1], torch.zeros(3, 4))
    assert context[0].abs().sum() > 0


def test_post_norm_block_normalises_after_each_sublayer_as_the_released_act():
    torch.manual_seed(0)
    layer = AdaAVADecoderLayer(8, 2, 16, 0.0, beta=0.13, guide="audio", norm_first=False).eval()
    words, audio, audio_mask, video, video_mask, causal = _inputs()
    with torch.no_grad():
        attended, _ = layer.self_attn(words, words, words, attn_mask=causal)
        hidden = layer.norm_self(words + attended)  # eq. 1, post-norm
        got_hidden, audio_context, video_context = layer.attend(
            words, audio, audio_mask, video, video_mask, causal
        )
        x = layer.norm_cross(layer.adaava(hidden, audio_context, video_context))  # no residual
        expected = layer.norm_ff(x + layer.ff(x))
        out = layer(words, audio, audio_mask, video, video_mask, causal)
    torch.testing.assert_close(got_hidden, hidden)
    torch.testing.assert_close(out, expected)
