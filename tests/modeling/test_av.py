"""Audio-visual captioner: 1-D audio patches, the four fusions' attention patterns, MBP."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from modeling.ml.decoding import beam_search
from modeling.ml.models.av import AVCaptioner, FusionLayer, downsample_long_clips, masked_pool
from modeling.ml.models.base import caption_loss
from tests.modeling.captioning import one_torch_thread, vocabulary  # noqa: F401 (autouse)
from tests.modeling.captioning_av import (
    assert_checkpoint_round_trip,
    av_batch,
    overfit,
    padded_pair,
    tiny_av_model,
)

FUSIONS = ["merged", "cross", "global_cross", "local_global"]
WIDTH = 8


def _model(fusion="local_global", vocab=None, **overrides):
    return tiny_av_model("crossmodal", vocab or vocabulary(), fusion=fusion, **overrides)


def _loss(model, batch):
    return caption_loss(model(batch), batch["tokens"])


# fusion attention patterns, one layer on hand-made tokens -----------------------------------


def _layer(kind, local="merged") -> FusionLayer:
    torch.manual_seed(0)
    return FusionLayer(kind, WIDTH, 2, 16, 0.0, local=local).eval()


def _tokens(seed=0):
    gen = torch.Generator().manual_seed(seed)
    audio, video = torch.randn(2, 5, WIDTH, generator=gen), torch.randn(2, 4, WIDTH, generator=gen)
    globals_ = torch.randn(2, 1, WIDTH, generator=gen), torch.randn(2, 1, WIDTH, generator=gen)
    masks = torch.ones(2, 5, dtype=torch.bool), torch.ones(2, 4, dtype=torch.bool)
    return audio, masks[0], video, masks[1], *globals_


def _run(layer, audio, audio_mask, video, video_mask, audio_global, video_global):
    with torch.no_grad():
        return layer(audio, audio_mask, video, video_mask, audio_global, video_global)


def test_merged_fusion_lets_audio_tokens_see_every_video_token():
    layer = _layer("merged")
    audio, am, video, vm, _, _ = _tokens()
    before = _run(layer, audio, am, video, vm, None, None)
    video = video.clone()
    video[:, 2] = torch.randn(2, WIDTH)  # not a constant shift: LayerNorm would remove it
    after = _run(layer, audio, am, video, vm, None, None)
    assert not torch.allclose(before[0], after[0])


def test_cross_fusion_attends_only_to_the_other_modality():
    layer = _layer("cross")
    audio, am, video, vm, _, _ = _tokens()
    before = _run(layer, audio, am, video, vm, None, None)
    changed = audio.clone()
    changed[:, 1] = torch.randn(2, WIDTH)
    after = _run(layer, changed, am, video, vm, None, None)
    # Audio token 1 changed; the other audio tokens never attend to it (eq. 10) ...
    others = [0, 2, 3, 4]
    torch.testing.assert_close(after[0][:, others], before[0][:, others])
    assert not torch.allclose(after[0][:, 1], before[0][:, 1])
    # ... but every video token does.
    assert not torch.allclose(after[1], before[1], atol=1e-4)


def test_global_cross_fusion_sees_the_other_modality_only_through_its_global_token():
    layer = _layer("global_cross")
    audio, am, video, vm, ga, gv = _tokens()
    before = _run(layer, audio, am, video, vm, ga, gv)
    local_changed = _run(layer, audio, am, video + torch.randn_like(video), vm, ga, gv)
    # Perturbing the non-global video tokens leaves audio tokens and the audio global alone.
    torch.testing.assert_close(local_changed[0], before[0])
    torch.testing.assert_close(local_changed[2], before[2])
    assert not torch.allclose(local_changed[1], before[1])
    global_changed = _run(layer, audio, am, video, vm, ga, torch.randn_like(gv))
    assert not torch.allclose(global_changed[0], before[0])


def test_global_cross_fusion_carries_video_to_audio_in_the_next_layer():
    # After layer 1 the video global token summarises the video, so layer 2's audio tokens
    # depend on the video tokens, through that token only.
    vocab = vocabulary()
    model = _model("global_cross", vocab).eval()
    assert len(model.fusion_layers) == 2
    with torch.no_grad():
        embedded = model.embed(av_batch(vocab))
        before = model.fuse(embedded)["tokens"]
        other_video = dict(embedded, video=torch.randn_like(embedded["video"]))
        after = model.fuse(other_video)["tokens"]
        model.fusion_layers = model.fusion_layers[:1]
        one_before = model.fuse(embedded)["tokens"]
        one_after = model.fuse(other_video)["tokens"]
    audio_rows = slice(0, 1 + embedded["audio"].size(1))  # audio global + audio tokens
    assert not torch.allclose(after[:, audio_rows], before[:, audio_rows])
    torch.testing.assert_close(one_after[:, audio_rows], one_before[:, audio_rows])


@pytest.mark.parametrize("local", ["merged", "cross"])
def test_local_global_fusion_averages_a_local_and_a_global_cross_fusion(local):
    layer = _layer("local_global", local=local)
    audio, am, video, vm, ga, gv = _tokens()
    with torch.no_grad():
        out_a, out_v, out_ga, out_gv = layer(audio, am, video, vm, ga, gv)
        local_a, local_v = layer.local_fusion(audio, am, video, vm)
        global_a, global_v, global_ga, global_gv = layer.global_fusion(audio, am, video, vm, ga, gv)
    torch.testing.assert_close(out_a, (local_a + global_a) / 2)
    torch.testing.assert_close(out_v, (local_v + global_v) / 2)
    torch.testing.assert_close(out_ga, global_ga)
    torch.testing.assert_close(out_gv, global_gv)


def test_padded_tokens_are_never_attended_to():
    layer = _layer("merged")
    audio, am, video, vm, _, _ = _tokens()
    vm = vm.clone()
    vm[:, 3] = False
    before = _run(layer, audio, am, video, vm, None, None)
    video = video.clone()
    video[:, 3] = torch.randn(2, WIDTH) * 100
    after = _run(layer, audio, am, video, vm, None, None)
    torch.testing.assert_close(after[0], before[0])


# audio encoder ---------------------------------------------------------------------------


def test_masked_pool_averages_only_real_steps():
    x = torch.arange(1.0, 8.0).reshape(1, 7, 1)
    pooled, lengths = masked_pool(x, torch.tensor([6]), 4)
    assert lengths.tolist() == [2]
    torch.testing.assert_close(pooled.flatten(), torch.tensor([2.5, 5.5]))


def test_long_clips_are_down_sampled_to_max_frames_and_short_ones_kept():
    features = torch.randn(2, 10, 3)
    out, lengths = downsample_long_clips(features, torch.tensor([10, 4]), 6)
    assert lengths.tolist() == [6, 4]
    expected = F.interpolate(features[:1].transpose(1, 2), 6, mode="linear", align_corners=True)
    torch.testing.assert_close(out[0], expected[0].T)
    torch.testing.assert_close(out[1, :4], features[1, :4])


def test_audio_tokens_are_frames_pooled_by_the_pool_factor():
    model = _model()
    cfg = model.config
    assert cfg.patch_frames == 1  # 1-D layout: a patch is one frame over all mel bins
    tokens, mask = model.audio_encoder(torch.randn(2, 9, cfg.feature_dim), torch.tensor([9, 5]))
    assert tokens.shape == (2, 5, cfg.width)  # ceil(9 / audio_pool=2)
    assert mask.sum(1).tolist() == [5, 3]
    long, _ = model.audio_encoder(torch.randn(1, 100, cfg.feature_dim), torch.tensor([100]))
    assert long.size(1) == cfg.max_frames // cfg.audio_pool


# the captioner ---------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", FUSIONS)
def test_forward_gives_next_word_logits_per_token(fusion):
    vocab = vocabulary()
    data = av_batch(vocab)
    logits = _model(fusion, vocab)(data)
    assert logits.shape == (4, data["tokens"].size(1), len(vocab))
    assert torch.isfinite(logits).all()  # row 2 has no video


@pytest.mark.parametrize("fusion", FUSIONS)
def test_backward_reaches_every_parameter(fusion):
    vocab = vocabulary()
    model = _model(fusion, vocab)
    _loss(model, av_batch(vocab)).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("fusion", FUSIONS)
def test_padding_does_not_change_the_outputs(fusion):
    vocab = vocabulary()
    model = _model(fusion, vocab).eval()
    single, together, row = padded_pair(vocab)
    with torch.no_grad():
        expected = model(single)[0]
        got = model(together)[row, : expected.size(0)]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_loss_falls_when_overfitting_one_batch(fusion):
    vocab = vocabulary()
    model = _model(fusion, vocab, dropout=0.0)
    losses = overfit(model, av_batch(vocab), _loss)
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.parametrize("fusion", FUSIONS)
def test_step_by_step_decoding_matches_teacher_forcing(fusion):
    vocab = vocabulary()
    model = _model(fusion, vocab).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        expected = torch.log_softmax(model(data), dim=-1)
        memory = model.encode(data)
        for t in range(data["tokens"].size(1)):
            log_probs, _ = model.step(memory, data["tokens"][:, : t + 1], None)
            real = data["tokens"][:, t] != 0
            torch.testing.assert_close(log_probs[real], expected[real, t], atol=1e-5, rtol=1e-4)


def test_beam_search_decodes_through_the_shared_module():
    vocab = vocabulary()
    beams = beam_search(_model(vocab=vocab), av_batch(vocab), beam_size=5, max_length=6)
    assert len(beams) == 4
    assert all(1 <= len(hyps) <= 5 for hyps in beams)


# MBP -----------------------------------------------------------------------------------


def test_without_mbp_the_pretraining_loss_is_the_caption_loss():
    vocab = vocabulary()
    model = _model(vocab=vocab, dropout=0.0)
    data = av_batch(vocab)
    loss, logs = model.pretrain_loss(data)
    torch.testing.assert_close(loss, _loss(model, data))
    assert set(logs) == {"loss"}


def _caption_loss_with(model, data, *, zeroed: str) -> float:
    """The caption loss through model(batch) with one modality's unimodal embeddings
    replaced by zeros by a hook on the module that makes them (not through pretrain_loss)."""
    if zeroed == "video":
        hook = model.video_project.register_forward_hook(lambda _m, _a, out: torch.zeros_like(out))
    else:
        hook = model.audio_encoder.register_forward_hook(
            lambda _m, _a, out: (torch.zeros_like(out[0]), out[1])
        )
    try:
        with torch.no_grad():
            return float(_loss(model, data))
    finally:
        hook.remove()


def test_mbp_loss_is_eq_4_of_the_three_losses_computed_apart():
    vocab = vocabulary()
    alpha, beta = 10.0, 0.5
    model = _model(vocab=vocab, dropout=0.0, mbp=True, mbp_alpha=alpha, mbp_beta=beta)
    data = av_batch(vocab)
    with torch.no_grad():
        joint = float(_loss(model, data))  # L, both modalities
    audio_only = _caption_loss_with(model, data, zeroed="video")  # L_a (eq. 2)
    video_only = _caption_loss_with(model, data, zeroed="audio")  # L_v
    gaps = [(audio_only - joint) ** 2, (video_only - joint) ** 2]  # eq. 3
    exps = [math.exp(alpha * g - max(alpha * x for x in gaps)) for g in gaps]
    target = [e / sum(exps) for e in exps]  # eq. 6
    weights = [beta * 0.5 + (1 - beta) * t for t in target]  # eq. 5, from (1/2, 1/2)
    expected = joint + weights[0] * audio_only + weights[1] * video_only  # eq. 4

    loss, logs = model.pretrain_loss(data)

    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert [logs["weight_audio"], logs["weight_video"]] == pytest.approx(weights, rel=1e-5)
    assert (logs["loss_audio"], logs["loss_video"]) == pytest.approx(
        (audio_only, video_only), rel=1e-5
    )
    assert audio_only != pytest.approx(joint)
    assert video_only != pytest.approx(joint)


def test_mbp_solo_losses_zero_the_other_modality():
    vocab = vocabulary()
    model = _model(vocab=vocab, mbp=True).eval()
    data = av_batch(vocab)
    with torch.no_grad():
        _, base = model.pretrain_loss(data)
        _, video_changed = model.pretrain_loss(dict(data, video=torch.randn_like(data["video"])))
        _, audio_changed = model.pretrain_loss(
            dict(data, features=torch.randn_like(data["features"]))
        )
    assert video_changed["loss_audio"] == pytest.approx(base["loss_audio"], abs=1e-6)
    assert video_changed["loss_joint"] != pytest.approx(base["loss_joint"], abs=1e-6)
    assert audio_changed["loss_video"] == pytest.approx(base["loss_video"], abs=1e-6)
    assert audio_changed["loss_joint"] != pytest.approx(base["loss_joint"], abs=1e-6)


def test_mbp_weights_move_every_training_step_and_are_checkpointed():
    vocab = vocabulary()
    model = _model(vocab=vocab, mbp=True, mbp_beta=0.5)
    data = av_batch(vocab)
    seen = []
    for _ in range(3):
        model.pretrain_loss(data)
        seen.append(model.balancer.weights.tolist())
    assert seen[0] != seen[1] != seen[2]
    assert "balancer.weights" in model.state_dict()


def test_loss_falls_when_overfitting_with_mbp():
    vocab = vocabulary()
    model = _model(vocab=vocab, dropout=0.0, mbp=True)
    losses = overfit(model, av_batch(vocab), lambda m, b: m.pretrain_loss(b)[0])
    assert losses[-1] < 0.2 * losses[0]


def test_batch_without_video_is_refused_with_a_clear_message():
    vocab = vocabulary()
    data = av_batch(vocab)
    del data["video_lengths"]
    with pytest.raises(ValueError, match=r"needs batch\['video'\] and video_lengths"):
        _model(vocab=vocab)(data)


def test_checkpoint_keeps_the_fusion_and_the_mbp_weights(tmp_path):
    vocab = vocabulary()
    model = _model("global_cross", vocab, mbp=True, mbp_beta=0.5)
    model.pretrain_loss(av_batch(vocab))
    loaded = assert_checkpoint_round_trip("crossmodal", model, vocab, tmp_path / "model.pt")
    assert isinstance(loaded, AVCaptioner)
    assert loaded.balancer is not None
    assert torch.equal(loaded.balancer.weights, model.balancer.weights)
    assert model.balancer.weights.tolist() != [0.5, 0.5]
