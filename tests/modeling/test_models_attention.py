"""Hand-checked attention: Luong global attention (TempAtt, TopDown) and BiLSTM's eq. 1-3."""

from __future__ import annotations

import math

import torch

from modeling.ml.models.bilstm import TemporalAttention
from modeling.ml.models.layers import LuongAttention
from tests.modeling.captioning import one_torch_thread  # noqa: F401  (autouse fixture)


def _set(layer: torch.nn.Linear, weight: list[list[float]], bias: list[float] | None = None):
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        if bias is not None:
            layer.bias.copy_(torch.tensor(bias))


def test_luong_general_attention_by_hand():
    attention = LuongAttention(query_dim=2, key_dim=2)
    _set(attention.score, [[1.0, 0.0], [0.0, 2.0]])  # W_a
    _set(attention.combine, [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])  # W_c picks c_1, h_2
    query = torch.tensor([[[1.0, 1.0]]])
    keys = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])
    out, weights = attention(query, keys, torch.tensor([[True, True, False]]))
    scores = [1.0 * 1, 2.0 * 1]  # h^T W_a k for the two real keys; the third is padding
    expected = [math.exp(s) / sum(math.exp(x) for x in scores) for s in scores]
    torch.testing.assert_close(weights[0, 0], torch.tensor([*expected, 0.0]))
    context = [expected[0], expected[1]]
    torch.testing.assert_close(out[0, 0], torch.tanh(torch.tensor([context[0], 1.0])))


def test_bilstm_temporal_attention_equations_1_to_3_by_hand():
    attention = TemporalAttention(key_dim=2, query_dim=2, attention_dim=2)
    _set(attention.w_e, [[1.0, 0.0], [0.0, 1.0]])
    _set(attention.w_h, [[1.0, 0.0], [0.0, -1.0]], [0.0, 0.0])
    _set(attention.w_a, [[1.0, 2.0]])
    keys = torch.tensor([[[1.0, 2.0], [-3.0, 1.0], [5.0, 5.0]]])
    h_prev = torch.tensor([[0.5, 1.5]])
    context, weights = attention(
        keys, attention.w_e(keys), torch.tensor([[True, True, False]]), h_prev
    )
    # alpha = ReLU(E W_e + h W_h) (eq. 1); A = softmax(alpha W_a) over time (eq. 2)
    alphas = [[max(0.0, e0 + 0.5), max(0.0, e1 - 1.5)] for e0, e1 in ([1.0, 2.0], [-3.0, 1.0])]
    scores = [a0 + 2 * a1 for a0, a1 in alphas]
    a = [math.exp(s) / sum(math.exp(x) for x in scores) for s in scores]
    torch.testing.assert_close(weights[0], torch.tensor([*a, 0.0]))
    # E_attn = sum_t A_t E_t (eq. 3)
    expected = [a[0] * 1.0 + a[1] * -3.0, a[0] * 2.0 + a[1] * 1.0]
    torch.testing.assert_close(context[0], torch.tensor(expected))
