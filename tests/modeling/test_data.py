"""Caption items, padding collate and the length-bucketing sampler."""

from __future__ import annotations

import pytest
import torch

from modeling.ml.data import BucketBatchSampler, CaptionItem, collate
from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID


def _item(frames: int, words: int, attributes: list[int] | None = None) -> CaptionItem:
    return CaptionItem(
        torch.ones(frames, 3), [BOS_ID, *[7] * words, EOS_ID], attributes=attributes or []
    )


def test_collate_pads_features_with_zeros_and_tokens_with_pad():
    batch = collate([_item(2, 1), _item(4, 3, [5, 6])])
    assert batch["features"].shape == (2, 4, 3)
    assert batch["features"][0, 2:].abs().sum() == 0
    assert batch["feature_lengths"].tolist() == [2, 4]
    assert batch["tokens"].tolist() == [
        [BOS_ID, 7, EOS_ID, PAD_ID, PAD_ID],
        [BOS_ID, 7, 7, 7, EOS_ID],
    ]
    assert batch["attributes"].tolist() == [[PAD_ID, PAD_ID], [5, 6]]
    assert batch["attribute_lengths"].tolist() == [0, 2]


def test_collate_without_attributes_gives_an_empty_column():
    batch = collate([_item(2, 1), _item(3, 1)])
    assert batch["attributes"].shape == (2, 0)


def test_items_must_have_some_frames_and_a_wrapped_caption():
    with pytest.raises(ValueError, match="item 'x': features must be \\(T, F\\)"):
        CaptionItem(torch.ones(0, 3), [BOS_ID, EOS_ID], clip_id="x")
    with pytest.raises(ValueError, match=r"tokens must be <bos> \.\.\. <eos>"):
        CaptionItem(torch.ones(2, 3), [7, EOS_ID])


def test_mid_features_must_be_on_every_item_or_none():
    with_mid = CaptionItem(torch.ones(2, 3), [BOS_ID, EOS_ID], mid_features=torch.ones(2, 5))
    with pytest.raises(ValueError, match="every item or none"):
        collate([with_mid, _item(2, 1)])


def _video_item(video: torch.Tensor | None, targets: list[float] | None = None) -> CaptionItem:
    return CaptionItem(
        torch.ones(2, 3),
        [BOS_ID, 7, EOS_ID],
        video=video,
        keyword_targets=torch.tensor(targets) if targets is not None else None,
    )


def test_collate_pads_video_and_gives_a_clip_without_video_length_zero():
    batch = collate(
        [
            _video_item(torch.full((3, 4), 2.0)),
            _video_item(torch.zeros(0, 4)),
            _video_item(None),
            _video_item(torch.full((1, 4), 5.0)),
        ]
    )
    assert batch["video"].shape == (4, 3, 4)
    assert batch["video_lengths"].tolist() == [3, 0, 0, 1]
    assert batch["video"][1:3].abs().sum() == 0
    assert batch["video"][3, 1:].abs().sum() == 0
    assert batch["video"][3, 0].tolist() == [5.0] * 4


def test_collate_keeps_one_empty_video_slot_when_no_clip_has_video():
    batch = collate([_video_item(torch.zeros(0, 4)), _video_item(torch.zeros(0, 4))])
    assert batch["video"].shape == (2, 1, 4)
    assert batch["video_lengths"].tolist() == [0, 0]


def test_collate_without_video_adds_no_video_keys():
    assert "video" not in collate([_item(2, 1)])


def test_video_features_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="must share Fv"):
        collate([_video_item(torch.ones(2, 4)), _video_item(torch.ones(2, 5))])


def test_collate_stacks_keyword_targets():
    batch = collate([_video_item(None, [1.0, 0.0, 1.0]), _video_item(None, [0.0, 1.0, 0.0])])
    assert batch["keyword_targets"].tolist() == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="every item or none has keyword_targets"):
        collate([_video_item(None, [1.0, 0.0, 1.0]), _video_item(None)])


def test_video_and_keyword_targets_must_have_their_shapes():
    with pytest.raises(ValueError, match=r"video must be \(Tv, Fv\)"):
        _video_item(torch.ones(4))
    with pytest.raises(ValueError, match=r"keyword_targets must be \(N,\)"):
        CaptionItem(torch.ones(2, 3), [BOS_ID, EOS_ID], keyword_targets=torch.ones(2, 2))


def test_sampler_yields_every_index_once_per_epoch():
    sampler = BucketBatchSampler(list(range(1, 24)), 4, bucket_batches=2)
    indices = [i for batch in sampler for i in batch]
    assert sorted(indices) == list(range(23))
    assert len(sampler) == len(list(sampler))


def test_sampler_batches_clips_of_similar_length():
    lengths = [1, 100] * 16
    sampler = BucketBatchSampler(lengths, 4, bucket_batches=8)
    assert all(len({lengths[i] for i in batch}) == 1 for batch in sampler)


def test_sampler_order_is_fixed_by_seed_and_epoch():
    lengths = list(range(40))
    one, two = BucketBatchSampler(lengths, 4), BucketBatchSampler(lengths, 4)
    assert list(one) == list(two)
    first = list(one)
    one.set_epoch(1)
    assert list(one) != first
    assert list(BucketBatchSampler(lengths, 4, seed=1)) != first


def test_sampler_can_skip_the_batches_already_done():
    sampler = BucketBatchSampler(list(range(40)), 4)
    sampler.set_epoch(2)
    full = list(sampler)
    sampler.set_epoch(2, skip=3)
    assert list(sampler) == full[3:]


def test_drop_last_leaves_out_short_batches():
    sampler = BucketBatchSampler([1] * 10, 4, bucket_batches=10, drop_last=True)
    assert [len(batch) for batch in sampler] == [4, 4]
