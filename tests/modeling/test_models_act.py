"""ACT: patching of the log-mel and the limits its positional embeddings impose."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.config import ACTConfig
from modeling.ml.data import CaptionItem, collate
from tests.modeling.captioning import (  # one_torch_thread is an autouse fixture
    batch,
    one_torch_thread,  # noqa: F401
    tiny_model,
    vocabulary,
)


@pytest.mark.parametrize(("form", "cls_tokens"), [("code", 1), ("paper", 0)])
def test_patches_cover_the_clip_in_non_overlapping_time_slices(form, cls_tokens):
    vocab = vocabulary()
    model = tiny_model("act", vocab, form=form)  # tiny: 2 frames per patch
    data = batch(vocab)
    memory = model.encode(data)
    frames = data["features"].size(1)
    assert isinstance(model.config, ACTConfig)
    patches = (frames + 1) // 2
    assert memory["audio"].shape == (4, cls_tokens + patches, model.config.decoder_dim)
    patch_lengths = (data["feature_lengths"] + 1) // 2 + cls_tokens
    assert memory["mask"].sum(1).tolist() == patch_lengths.tolist()


def test_a_clip_longer_than_max_frames_is_refused_with_the_limit():
    vocab = vocabulary()
    model = tiny_model("act", vocab)
    too_long = CaptionItem(torch.randn(65, 8), vocab.encode("a dog barks"))
    with pytest.raises(ValueError, match="65 frames exceeds max_frames=64"):
        model(collate([too_long]))


def test_a_caption_longer_than_the_positional_table_is_refused():
    vocab = vocabulary()
    model = tiny_model("act", vocab)
    data = batch(vocab)
    data["tokens"] = torch.ones(4, 17, dtype=torch.long)
    with pytest.raises(ValueError, match="17 tokens exceeds max_caption_length=16"):
        model(data)


def test_decoding_is_causal():
    vocab = vocabulary()
    model = tiny_model("act", vocab).eval()
    data = batch(vocab)
    changed = dict(data, tokens=data["tokens"].clone())
    changed["tokens"][:, 3:] = 5
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :3], model(data)[:, :3])
