"""An in-domain sentence encoder for the disagreement flags: no Django; scoring is NumPy
only (PyTorch trains it at build time, on one thread).

Word vectors say whether two captions share words of a kind; they do not say whether two
captions describe the same clip. Clotho has many clips of the same few scenes (rain, birds,
traffic, footsteps), so another clip's caption often shares as many words with a clip's
captions as they share among themselves. This encoder learns, from the build corpus's own
clips, what makes captions of one clip alike and captions of different clips apart:

- a caption is the idf-weighted mean of its lemmas' embeddings (started from the flag
  model's PPMI-SVD vectors and learned), sent through a small residual tanh layer and
  normalised;
- trained contrastively (supervised InfoNCE): the captions of one clip are positives, the
  other clips' captions in the batch negatives, so clips of the same scene in one batch
  teach it the details that tell them apart. Words are dropped at random while training.

It learns from the clips the context model learns from (not the detector's clips), so the
detector is fitted on features of captions the encoder never saw.

`clip_features` gives SENTENCE_FEATURES of every caption of a clip: its cosine to the other
captions' centroid, against how well each of those fits the rest (an outlier among five,
not an absolute threshold), its best cosine to one other, and its rank in the clip.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float32]
DoubleArray = NDArray[np.float64]

HIDDEN = 256
OUT = 128
TEMPERATURE = 0.07
STEPS = 1500
BATCH_CLIPS = 96  # clips per batch (all their captions): in-batch negatives
WORD_DROP = 0.2
MIN_CLIPS = 20

SENTENCE_FEATURES = (
    "sent_centroid",  # cosine to the others' centroid
    "sent_others_fit",  # mean over the others of their cosine to the remaining others
    "sent_margin",  # sent_centroid - sent_others_fit
    "sent_z",  # the margin in units of the others' spread
    "sent_best",  # highest cosine to one other caption
    "sent_lowest",  # 1 when it fits the rest of the clip worst of all its captions
)
# SENTENCE_FEATURES' values where there is nothing to compare: no evidence either way
NO_SENTENCE = [0.5, 0.5, 0.0, 0.0, 0.5, 0.0]


@dataclass
class SentenceModel:
    embed: FloatArray  # (vocab, DIM): the flag model's word order
    weight: FloatArray  # (vocab,) idf of each lemma (the pooling weights)
    skip: FloatArray  # (DIM, OUT) linear path
    hidden: FloatArray  # (DIM, HIDDEN)
    hidden_bias: FloatArray  # (HIDDEN,)
    out: FloatArray  # (HIDDEN, OUT)
    _cache: dict[tuple[tuple[int, ...], ...], list[list[float]]] = field(
        default_factory=dict, init=False, repr=False
    )

    @cached_property
    def _tables(self) -> tuple[DoubleArray, ...]:
        return tuple(
            np.asarray(a, dtype=np.float64)
            for a in (self.embed, self.weight, self.skip, self.hidden, self.hidden_bias, self.out)
        )

    def encode(self, bags: Sequence[Sequence[int]]) -> DoubleArray:
        """(len(bags), OUT) unit vectors of captions given as word ids; zero rows for
        captions without a known word."""
        embed, weight, skip, hidden, hidden_bias, out = self._tables
        pooled = np.zeros((len(bags), embed.shape[1]))
        for k, ids in enumerate(bags):
            if ids:
                w = weight[list(ids)]
                pooled[k] = (w @ embed[list(ids)]) / max(float(w.sum()), 1e-6)
        z = pooled @ skip + np.tanh(pooled @ hidden + hidden_bias) @ out
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        empty = np.array([not ids for ids in bags])[:, None]
        result: DoubleArray = np.where(empty, 0.0, z / np.maximum(norms, 1e-12))
        return result

    def clip_features(self, bags: Sequence[Sequence[int]]) -> list[list[float]]:
        """SENTENCE_FEATURES of every caption of a clip (word ids per caption), each against
        the clip's other captions."""
        n = len(bags)
        if n < 3:
            return [list(NO_SENTENCE) for _ in bags]
        vecs = self.encode(bags)
        cos = vecs @ vecs.T
        present = np.array([bool(b) for b in bags])
        rows: list[list[float]] = []
        # leave-one-out fit of each caption to the whole rest of the clip, for the rank
        loo = [_cos_to_mean(vecs, k, [j for j in range(n) if j != k]) for k in range(n)]
        for i in range(n):
            others = [j for j in range(n) if j != i]
            if not present[i]:
                rows.append(list(NO_SENTENCE))
                continue
            centroid = _cos_to_mean(vecs, i, others)
            fits = [_cos_to_mean(vecs, j, [k for k in others if k != j]) for j in others]
            mean_fit = float(np.mean(fits))
            spread = float(np.std(fits))
            best = float(max(cos[i, j] for j in others))
            lowest = float(loo[i] <= min(loo[j] for j in others))
            rows.append(
                [
                    centroid,
                    mean_fit,
                    centroid - mean_fit,
                    _clamp((centroid - mean_fit) / max(spread, 0.05)),
                    best,
                    lowest,
                ]
            )
        return rows

    def features_in_clip(self, own: Sequence[int], others: Sequence[Sequence[int]]) -> list[float]:
        """`clip_features` of the caption `own` among `others`, computed once per clip and
        kept for its other captions (the flag job checks a clip's captions in turn)."""
        clip = sorted([tuple(own), *(tuple(o) for o in others)])
        key = tuple(clip)
        found = self._cache.get(key)
        if found is None:
            found = self.clip_features(clip)
            if len(self._cache) >= 64:
                self._cache.clear()
            self._cache[key] = found
        return list(found[clip.index(tuple(own))])

    def arrays(self) -> dict[str, NDArray[Any]]:
        return {
            "sent_embed": self.embed.astype(np.float32),
            "sent_weight": self.weight.astype(np.float32),
            "sent_skip": self.skip.astype(np.float32),
            "sent_hidden": self.hidden.astype(np.float32),
            "sent_hidden_bias": self.hidden_bias.astype(np.float32),
            "sent_out": self.out.astype(np.float32),
        }

    @classmethod
    def from_arrays(cls, data: Any) -> SentenceModel:
        return cls(
            embed=np.asarray(data["sent_embed"], dtype=np.float32),
            weight=np.asarray(data["sent_weight"], dtype=np.float32),
            skip=np.asarray(data["sent_skip"], dtype=np.float32),
            hidden=np.asarray(data["sent_hidden"], dtype=np.float32),
            hidden_bias=np.asarray(data["sent_hidden_bias"], dtype=np.float32),
            out=np.asarray(data["sent_out"], dtype=np.float32),
        )


def _cos_to_mean(vecs: DoubleArray, i: int, rest: Sequence[int]) -> float:
    centroid = vecs[list(rest)].sum(axis=0)
    norm = float(np.linalg.norm(centroid))
    return float(vecs[i] @ centroid / norm) if norm > 0 else 0.0


def _clamp(value: float, low: float = -8.0, high: float = 8.0) -> float:
    return max(low, min(high, value))


def sentence_learn(
    *,
    bags: Sequence[Sequence[Sequence[int]]],
    vectors: FloatArray,
    weight: Sequence[float],
    seed: int = 0,
    steps: int = STEPS,
) -> SentenceModel | None:
    """Trains the encoder on clips' captions as word-id lists (`bags[clip][caption]`, ids
    into `vectors`); clips with fewer than two captions that have words teach nothing.
    None when fewer than MIN_CLIPS clips can teach it."""
    clips = [[list(c) for c in clip if c] for clip in bags]
    clips = [c for c in clips if len(c) >= 2]
    if len(clips) < MIN_CLIPS:
        return None
    import torch  # build time only

    from active.flagcontext import _one_thread

    with _one_thread(torch):
        return _sentence_learn(torch, clips, vectors, weight, seed, steps)


def _sentence_learn(
    torch: Any,
    clips: list[list[list[int]]],
    vectors: FloatArray,
    weight: Sequence[float],
    seed: int,
    steps: int,
) -> SentenceModel:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    dim = vectors.shape[1]
    embed = torch.nn.Parameter(torch.tensor(vectors, dtype=torch.float32))
    idf = torch.tensor(np.asarray(weight, dtype=np.float32))
    skip = torch.nn.Linear(dim, OUT, bias=False)
    first = torch.nn.Linear(dim, HIDDEN)
    last = torch.nn.Linear(HIDDEN, OUT, bias=False)
    with torch.no_grad():  # start near the PPMI-SVD sentence vectors
        eye = torch.zeros(dim, OUT)
        eye[: min(dim, OUT), : min(dim, OUT)] = torch.eye(min(dim, OUT))
        skip.weight.copy_(eye.T)
        last.weight.mul_(0.1)
    params = [embed, *skip.parameters(), *first.parameters(), *last.parameters()]
    optimiser = torch.optim.AdamW(params, lr=2e-3, weight_decay=1e-4)
    batch = min(BATCH_CLIPS, len(clips))
    order = list(range(len(clips)))
    pos = 0
    for _ in range(steps):
        if pos + batch > len(order):
            rng.shuffle(order)
            pos = 0
        chosen = order[pos : pos + batch]
        pos += batch
        flat: list[int] = []
        offsets: list[int] = []
        owner: list[int] = []
        for c, k in enumerate(chosen):
            for caption in clips[k]:
                kept = [w for w in caption if rng.random() >= WORD_DROP] or [rng.choice(caption)]
                offsets.append(len(flat))
                flat.extend(kept)
                owner.append(c)
        ids = torch.tensor(flat, dtype=torch.long)
        offs = torch.tensor(offsets, dtype=torch.long)
        w = idf[ids]
        summed = torch.nn.functional.embedding_bag(
            ids, embed, offs, mode="sum", per_sample_weights=w
        )
        bag_of = torch.repeat_interleave(
            torch.arange(len(offsets)), torch.diff(torch.tensor([*offsets, len(flat)]))
        )
        total = torch.zeros(len(offsets)).index_add_(0, bag_of, w)
        pooled = summed / total.clamp(min=1e-6)[:, None]
        z = skip(pooled) + last(torch.tanh(first(pooled)))
        z = torch.nn.functional.normalize(z, dim=1)
        sims = z @ z.T / TEMPERATURE
        who = torch.tensor(owner)
        same = who[:, None] == who[None, :]
        eye_mask = torch.eye(len(owner), dtype=torch.bool)
        sims = sims.masked_fill(eye_mask, -1e9)
        log_prob = sims - torch.logsumexp(sims, dim=1, keepdim=True)
        positives = same & ~eye_mask
        loss = -(log_prob * positives).sum(dim=1) / positives.sum(dim=1).clamp(min=1)
        loss = loss.mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        return SentenceModel(
            embed=embed.detach().numpy().astype(np.float32),
            weight=np.asarray(weight, dtype=np.float32),
            skip=skip.weight.detach().numpy().T.copy(),
            hidden=first.weight.detach().numpy().T.copy(),
            hidden_bias=first.bias.detach().numpy().copy(),
            out=last.weight.detach().numpy().T.copy(),
        )


def torch_encode(model: SentenceModel, bags: Sequence[Sequence[int]]) -> DoubleArray:
    """The encoder's forward in PyTorch (as trained), for checking `encode` against it."""
    import torch

    rows = []
    for ids in bags:
        if not ids:
            rows.append(torch.zeros(model.out.shape[1], dtype=torch.float64))
            continue
        e = torch.tensor(model.embed[list(ids)], dtype=torch.float64)
        w = torch.tensor(model.weight[list(ids)], dtype=torch.float64)
        pooled = (w[:, None] * e).sum(dim=0) / w.sum()
        z = pooled @ torch.tensor(model.skip, dtype=torch.float64) + torch.tanh(
            pooled @ torch.tensor(model.hidden, dtype=torch.float64)
            + torch.tensor(model.hidden_bias, dtype=torch.float64)
        ) @ torch.tensor(model.out, dtype=torch.float64)
        rows.append(torch.nn.functional.normalize(z, dim=0))
    return torch.stack(rows).numpy() if rows else np.zeros((0, model.out.shape[1]))
