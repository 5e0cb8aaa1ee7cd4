"""Modality-balanced pre-training weights, eq. 2-6 on hand-made losses."""

from __future__ import annotations

import math

import pytest
import torch

from modeling.ml.mbp import ModalityBalancer


def _softmax(values: list[float]) -> list[float]:
    exps = [math.exp(v - max(values)) for v in values]
    return [e / sum(exps) for e in exps]


def _losses(joint: float, audio: float, video: float):
    return (
        torch.tensor(joint, requires_grad=True),
        torch.tensor(audio, requires_grad=True),
        torch.tensor(video, requires_grad=True),
    )


def test_weights_start_equal():
    assert ModalityBalancer().weights.tolist() == [0.5, 0.5]


def test_one_update_follows_eq_3_5_6():
    balancer = ModalityBalancer(alpha=10.0, beta=0.99)
    balancer.update(*_losses(1.0, 2.0, 1.5))
    gaps = [(2.0 - 1.0) ** 2, (1.5 - 1.0) ** 2]  # eq. 3
    target = _softmax([10.0 * g for g in gaps])  # eq. 6
    expected = [0.99 * 0.5 + 0.01 * t for t in target]  # eq. 5
    torch.testing.assert_close(balancer.weights, torch.tensor(expected))


def test_updates_are_a_moving_average_over_iterations():
    balancer = ModalityBalancer(alpha=2.0, beta=0.9)
    weights = [0.5, 0.5]
    for joint, audio, video in [(1.0, 1.2, 3.0), (0.8, 2.0, 0.9), (0.5, 0.5, 0.7)]:
        balancer.update(*_losses(joint, audio, video))
        target = _softmax([2.0 * (audio - joint) ** 2, 2.0 * (video - joint) ** 2])
        weights = [0.9 * w + 0.1 * t for w, t in zip(weights, target, strict=True)]
    torch.testing.assert_close(balancer.weights, torch.tensor(weights))


def test_the_modality_further_from_the_joint_loss_gains_weight():
    balancer = ModalityBalancer(beta=0.0)
    balancer.update(*_losses(1.0, 1.1, 3.0))
    w_a, w_v = balancer.weights.tolist()
    assert w_v > 0.99
    assert w_a < 0.01


def test_beta_one_freezes_the_weights():
    balancer = ModalityBalancer(beta=1.0)
    balancer.update(*_losses(1.0, 5.0, 1.0))
    assert balancer.weights.tolist() == [0.5, 0.5]


def test_pretraining_loss_is_eq_4_with_the_updated_weights_as_constants():
    balancer = ModalityBalancer(alpha=10.0, beta=0.5)
    joint, audio, video = _losses(1.0, 1.5, 1.2)
    total = balancer(joint, audio, video)
    w_a, w_v = balancer.weights.tolist()
    assert w_a != 0.5
    torch.testing.assert_close(total, torch.tensor(1.0 + w_a * 1.5 + w_v * 1.2))
    total.backward()
    assert joint.grad.item() == pytest.approx(1.0)
    assert audio.grad.item() == pytest.approx(w_a)
    assert video.grad.item() == pytest.approx(w_v)


def test_weights_and_gaps_are_exposed_for_logging():
    balancer = ModalityBalancer(alpha=10.0, beta=0.99)
    balancer(*_losses(1.0, 2.0, 1.5))
    last = balancer.last
    assert last["gap_audio"] == pytest.approx(1.0)
    assert last["gap_video"] == pytest.approx(0.25)
    assert last["weight_audio"] == pytest.approx(balancer.weights[0].item())
    assert last["weight_audio"] + last["weight_video"] == pytest.approx(1.0)


def test_eval_mode_does_not_move_the_weights():
    balancer = ModalityBalancer().eval()
    balancer(*_losses(1.0, 4.0, 1.0))
    assert balancer.weights.tolist() == [0.5, 0.5]


def test_weights_are_saved_and_restored_with_the_state_dict():
    balancer = ModalityBalancer(beta=0.0)
    balancer.update(*_losses(1.0, 1.0, 2.0))
    restored = ModalityBalancer()
    restored.load_state_dict(balancer.state_dict())
    assert torch.equal(restored.weights, balancer.weights)


def test_beta_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match="MBP beta must be in"):
        ModalityBalancer(beta=1.5)


def test_eval_mode_still_records_the_figures():
    balancer = ModalityBalancer().eval()
    balancer(*_losses(1.0, 3.0, 1.0))
    assert balancer.last["gap_audio"] == pytest.approx(4.0)
    assert balancer.last["weight_audio"] == 0.5
