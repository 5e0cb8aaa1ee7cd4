"""Caption datasets, padding collate and a length-bucketing batch sampler. No Django here.

An item is one (clip, caption) pair; a clip with five reference captions gives five items that
share ``clip_id`` and features. ``collate`` turns a list of items into the batch dict documented
in ``modeling.ml.models.base`` (B clips, T frames, F feature size, L tokens, N attribute
words), plus "video" / "video_lengths" when items carry video and "keyword_targets" when they
carry keyword targets (see ``modeling.ml.config_av``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.utils.data import Dataset, DistributedSampler, Sampler

from modeling.ml.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class CaptionItem:
    """One training example."""

    features: Tensor  # (T, F) float, T >= 1
    tokens: list[int]  # "<bos> w1 .. wn <eos>" ids (Vocabulary.encode)
    clip_id: str = ""  # groups the captions of one clip (1NN bank, evaluation references)
    attributes: list[int] = field(default_factory=list)  # attribute word ids (TopDown)
    mid_features: Tensor | None = None  # (T, F_mid), same T as features (TopDown, 2 levels)
    # (Tv, Fv) video features of the clip (V-ACT, AV captioner); Tv = 0 for a clip without
    # video. None: this item carries no video at all (audio-only models).
    video: Tensor | None = None
    keyword_targets: Tensor | None = None  # (N,) multi-hot keywords of the clip (MAAC)

    def __post_init__(self) -> None:
        where = f"item {self.clip_id!r}" if self.clip_id else "item"
        if self.features.dim() != 2 or self.features.size(0) < 1:
            raise ValueError(
                f"{where}: features must be (T, F) with T >= 1, got {tuple(self.features.shape)}"
            )
        if len(self.tokens) < 2 or self.tokens[0] != BOS_ID or self.tokens[-1] != EOS_ID:
            raise ValueError(f"{where}: tokens must be <bos> ... <eos> ids")
        if self.mid_features is not None and self.mid_features.size(0) != self.features.size(0):
            raise ValueError(f"{where}: mid_features must have as many frames as features")
        if self.video is not None and self.video.dim() != 2:
            raise ValueError(f"{where}: video must be (Tv, Fv), got {tuple(self.video.shape)}")
        if self.keyword_targets is not None and self.keyword_targets.dim() != 1:
            raise ValueError(
                f"{where}: keyword_targets must be (N,), got {tuple(self.keyword_targets.shape)}"
            )


class CaptionDataset(Dataset[CaptionItem]):
    """A list of CaptionItems with their frame counts (for bucketing)."""

    def __init__(self, items: Sequence[CaptionItem]) -> None:
        self.items = list(items)
        self.lengths = [item.features.size(0) for item in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> CaptionItem:
        return self.items[index]


def clip_items(items: Sequence[CaptionItem]) -> list[CaptionItem]:
    """One item per clip (its first caption): the pre-training and self-critical stages
    learn per clip, not per reference caption."""
    seen: dict[str, CaptionItem] = {}
    for index, item in enumerate(items):
        seen.setdefault(item.clip_id or f"#{index}", item)
    return list(seen.values())


def _pad(seqs: Sequence[Tensor], value: float = 0.0) -> Tensor:
    return torch.nn.utils.rnn.pad_sequence(list(seqs), batch_first=True, padding_value=value)


def collate(items: Sequence[CaptionItem]) -> dict[str, Tensor]:
    """Pad a list of items into a batch dict; padding is zeros for features, <pad> for words."""
    if not items:
        raise ValueError("cannot collate an empty list of items")
    batch = {
        "features": _pad([item.features.float() for item in items]),
        "feature_lengths": torch.tensor([item.features.size(0) for item in items]),
        "tokens": _pad([torch.tensor(item.tokens) for item in items], PAD_ID).long(),
    }
    if any(item.attributes for item in items):
        width = max(len(item.attributes) for item in items)
        attributes = torch.full((len(items), width), PAD_ID, dtype=torch.long)
        for row, item in enumerate(items):
            attributes[row, : len(item.attributes)] = torch.tensor(
                item.attributes, dtype=torch.long
            )
        batch["attributes"] = attributes
    else:
        batch["attributes"] = torch.zeros(len(items), 0, dtype=torch.long)
    batch["attribute_lengths"] = torch.tensor([len(item.attributes) for item in items])
    mids = [item.mid_features for item in items]
    if all(m is not None for m in mids):
        batch["mid_features"] = _pad([m.float() for m in mids if m is not None])
    elif any(m is not None for m in mids):
        raise ValueError("either every item or none has mid_features")
    videos = [item.video for item in items]
    if any(v is not None for v in videos):
        batch["video"], batch["video_lengths"] = _pad_video(videos)
    targets = [item.keyword_targets for item in items]
    if all(t is not None for t in targets):
        batch["keyword_targets"] = torch.stack([t.float() for t in targets if t is not None])
    elif any(t is not None for t in targets):
        raise ValueError("either every item or none has keyword_targets")
    return batch


def collate_with_ids(items: Sequence[CaptionItem]) -> tuple[dict[str, Tensor], list[str]]:
    """``collate`` plus the items' clip ids, for training stages that look up references."""
    return collate(items), [item.clip_id for item in items]


def _pad_video(videos: Sequence[Tensor | None]) -> tuple[Tensor, Tensor]:
    """-> video (B, max(1, Tv), Fv) zero-padded, video_lengths (B,); an item without video
    (None or Tv = 0) gets length 0 and an all-zero row."""
    widths = {v.size(1) for v in videos if v is not None}
    if len(widths) != 1:
        raise ValueError(f"video features of one batch must share Fv, got sizes {sorted(widths)}")
    lengths = torch.tensor([0 if v is None else v.size(0) for v in videos])
    video = torch.zeros(len(videos), max(1, int(lengths.max())), widths.pop())
    for row, v in enumerate(videos):
        if v is not None and v.size(0):
            video[row, : v.size(0)] = v.float()
    return video, lengths


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar length, in an order that is random but fixed by (seed, epoch).

    Indices are shuffled, cut into pools of ``batch_size * bucket_batches``, each pool is sorted
    by length and cut into batches, and the batches are shuffled. ``set_epoch(e, skip=k)`` makes
    the next iteration the epoch-e order minus its first k batches, which is how a resumed run
    continues exactly where a cancelled one stopped.

    With ``num_replicas > 1`` (data-parallel training) each rank first takes its share of the
    indices from a ``DistributedSampler`` (same seed, ``set_epoch`` per epoch; shares are padded
    to equal size) and buckets only those, so every rank runs the same number of batches.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        bucket_batches: int = 50,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.num_replicas = num_replicas
        self.rank = rank
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.bucket_batches = max(1, bucket_batches)
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.skip = 0

    def set_epoch(self, epoch: int, *, skip: int = 0) -> None:
        self.epoch, self.skip = epoch, skip

    def batches(self) -> list[list[int]]:
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        if self.num_replicas > 1:
            # DistributedSampler only takes len() of its dataset; torch types it as a Dataset
            shard: DistributedSampler[int] = DistributedSampler(
                self.lengths,  # type: ignore[arg-type]
                num_replicas=self.num_replicas,
                rank=self.rank,
                shuffle=self.shuffle,
                seed=self.seed,
            )
            shard.set_epoch(self.epoch)
            indices = list(shard)
        else:
            indices = list(range(len(self.lengths)))
            if self.shuffle:
                rng.shuffle(indices)
        pool = self.batch_size * self.bucket_batches
        batches: list[list[int]] = []
        for start in range(0, len(indices), pool):
            chunk = sorted(indices[start : start + pool], key=lambda i: self.lengths[i])
            for b in range(0, len(chunk), self.batch_size):
                batch = chunk[b : b + self.batch_size]
                if len(batch) == self.batch_size or not self.drop_last:
                    batches.append(batch)
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches()[self.skip :]

    def __len__(self) -> int:
        # Each pool may end in a short batch, so count the real batches rather than estimate.
        return max(0, len(self.batches()) - self.skip)
