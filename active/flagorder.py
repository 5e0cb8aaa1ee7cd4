"""Which sound source fits its slot in a caption, read in order: a small bidirectional
masked-source model for the wrong-source flags.

The context model (active/flagcontext.py) sees a caption as a bag of words, so in "a car
passes by while a dog barks" it cannot tell which noun goes with which verb, and a swapped
"a dog passes by while a car barks" looks the same to it. This model reads the caption in
order: a forward GRU over the words before a source noun and a backward GRU over the words
after it (so the noun itself is never seen: no mask token is needed, and one pass gives
every slot of a caption), joined with the mean embedding of the clip's other captions'
content words (or nothing), give a softmax over the source lemmas that could stand there:

    f = GRU→(words before), b = GRU←(words after), o = mean(B[others' content words])
    h = tanh(W_f f + W_b b + W_o o + c)
    P(source at the slot | caption in order [, others]) = softmax(U h + d)

Trained (PyTorch, one CPU thread, build time only) on every source slot of the build
captions, half of them with the others' bag given; scored in NumPy (float64, batched per
clip). Scores are pointwise, log P(source | slot) - log P(source), in nats, and the margin
against the best fitting source at the slot.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from active.flagcontext import ClipMemo, clamp, one_torch_thread

FloatArray = NDArray[np.float32]
DoubleArray = NDArray[np.float64]

EMBED = 64
HIDDEN = 96
MIN_COUNT = 3  # lemmas seen fewer times read as UNKNOWN
MAX_VOCAB = 8000
MIN_SLOT = 3  # source lemmas seen at fewer slots are not predicted
# source slots a corpus needs for the model to be learned at all: on a few thousand the
# model is noise that the detector's source network, fitted on a hundred clips, overfits
# (on the test fixture's 2,400 clips it flagged 2.5 % of untouched held-out captions alone)
MIN_SLOTS = 20_000
EPOCHS = 3
BATCH = 256
OTHERS_SHARE = 0.5  # of the training captions with other captions: given their bag
PAD, UNKNOWN, START, END = 0, 1, 2, 3
_SPECIAL = ("<pad>", "<unk>", "<s>", "</s>")

# what OrderModel.features returns, in order
ORDER_FEATURES = (
    "order_fit",  # log P(source | its slot, the others) - log P(source), least fitting source
    "order_own_fit",  # … from its own caption in order only
    "order_margin",  # … (with the others) against the best fitting source at that slot
    "order_own_margin",  # … (its own caption only) against the best there
    "order_relative",  # order_fit minus the mean of the other captions' own order_fit
    "order_slot",  # 1 when it has a source slot the model predicts
)
NO_ORDER = [5.0, 5.0, 0.0, 0.0, 0.0, 0.0]  # no slot: no evidence either way


@dataclass
class OrderModel:
    words: list[str]  # input vocabulary (lemmas; the first four are _SPECIAL)
    sources: list[str]  # predicted source lemmas
    embed: FloatArray  # (words, EMBED)
    bag: FloatArray  # (words, HIDDEN): the others' content words' input to the slot layer
    content: NDArray[np.bool_]  # (words,) which words count in the others' bag
    forward: dict[str, FloatArray]  # GRU weights: w_ih (3H, E), w_hh (3H, H), b_ih, b_hh
    backward: dict[str, FloatArray]
    slot: FloatArray  # (2 HIDDEN, HIDDEN): [f; b] -> h
    slot_bias: FloatArray  # (HIDDEN,)
    out: FloatArray  # (HIDDEN, sources)
    out_bias: FloatArray  # (sources,)
    prior: FloatArray  # (sources,) log frequency of each source at the slots

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}
        self.source_index = {w: k for k, w in enumerate(self.sources)}
        self._clips: ClipMemo[dict[tuple[str, ...], Any]] = ClipMemo()

    # scoring -----------------------------------------------------------------------------

    @cached_property
    def _tables(self) -> dict[str, DoubleArray]:
        t: dict[str, DoubleArray] = {}
        embed = self.embed.astype(np.float64)
        for name, gru in (("f", self.forward), ("b", self.backward)):
            w_ih, w_hh = gru["w_ih"].astype(np.float64), gru["w_hh"].astype(np.float64)
            t[f"{name}_in"] = embed @ w_ih.T + gru["b_ih"].astype(np.float64)  # per word
            t[f"{name}_hh"] = w_hh.T
            t[f"{name}_bhh"] = gru["b_hh"].astype(np.float64)
        t["bag"] = self.bag.astype(np.float64)
        t["slot_f"] = self.slot[:HIDDEN].astype(np.float64)
        t["slot_b"] = self.slot[HIDDEN : 2 * HIDDEN].astype(np.float64)
        t["slot_bias"] = self.slot_bias.astype(np.float64)
        t["out"] = self.out.astype(np.float64)
        t["out_bias"] = self.out_bias.astype(np.float64)
        t["prior"] = self.prior.astype(np.float64)
        return t

    def encode(self, lemmas: Sequence[str]) -> list[int]:
        return [self.index.get(w, UNKNOWN) for w in lemmas]

    def _run(self, seqs: Sequence[Sequence[int]], name: str) -> DoubleArray:
        """(captions, longest + 1, HIDDEN) GRU states: [:, j] after reading j words of each
        sequence (state 0 is the zero start); PyTorch's GRU equations."""
        t = self._tables
        n, longest = len(seqs), max((len(s) for s in seqs), default=0)
        ids = np.zeros((n, longest), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
        inputs = t[f"{name}_in"][ids]  # (n, longest, 3H)
        states = np.zeros((n, longest + 1, HIDDEN))
        h = np.zeros((n, HIDDEN))
        w_hh, b_hh = t[f"{name}_hh"], t[f"{name}_bhh"]
        for j in range(longest):
            x = inputs[:, j]
            g = h @ w_hh + b_hh
            r = _sigmoid(x[:, :HIDDEN] + g[:, :HIDDEN])
            z = _sigmoid(x[:, HIDDEN : 2 * HIDDEN] + g[:, HIDDEN : 2 * HIDDEN])
            c = np.tanh(x[:, 2 * HIDDEN :] + r * g[:, 2 * HIDDEN :])
            h = (1.0 - z) * c + z * h
            states[:, j + 1] = h
        return states

    def slot_log_probs(
        self, captions: Sequence[Sequence[str]], others: Sequence[Sequence[Sequence[str]]]
    ) -> list[list[tuple[int, DoubleArray]]]:
        """For each caption (its lemmas in order) and its others (their lemmas; empty: not
        given), per source slot: (source id, log P(· | slot) over `sources`)."""
        return self._slot_log_probs(captions, [others])[0]

    def _slot_log_probs(
        self,
        captions: Sequence[Sequence[str]],
        variants: Sequence[Sequence[Sequence[Sequence[str]]]],
    ) -> list[list[list[tuple[int, DoubleArray]]]]:
        """`slot_log_probs` for several choices of the others at once: the GRU states do
        not depend on them, so each direction runs once, and every slot row of every
        variant goes through the output layer in one product."""
        seqs = [[START, *self.encode(c), END] for c in captions]
        fwd = self._run(seqs, "f")
        bwd = self._run([s[::-1] for s in seqs], "b")
        t = self._tables
        slots: list[tuple[int, int, DoubleArray]] = []  # (caption, source, slot input)
        for i, caption in enumerate(captions):
            length = len(seqs[i])
            for p, word in enumerate(caption):
                k = self.source_index.get(word)
                if k is None:
                    continue
                q = p + 1  # the word's place in seqs[i]
                # forward state after the words before it; backward after the words after it
                base = fwd[i, q] @ t["slot_f"] + bwd[i, length - 1 - q] @ t["slot_b"]
                slots.append((i, k, base))
        rows = []
        for others in variants:
            bags = []
            for i in range(len(captions)):
                bag = [self.index[w] for o in others[i] for w in o if self.index.get(w, 0) > END]
                bag = [w for w in bag if self.content[w]]
                bags.append(t["bag"][bag].mean(axis=0) if bag else np.zeros(HIDDEN))
            rows += [base + bags[i] for i, _, base in slots]
        out: list[list[list[tuple[int, DoubleArray]]]] = [[[] for _ in captions] for _ in variants]
        if rows:
            h = np.tanh(np.stack(rows) + t["slot_bias"])
            logits = h @ t["out"] + t["out_bias"]
            logits -= logits.max(axis=1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            for v in range(len(variants)):
                for (i, k, _), row in zip(slots, logp[v * len(slots) :], strict=False):
                    out[v][i].append((k, row))
        return out

    def clip_features(self, captions: Sequence[Sequence[str]]) -> list[list[float]]:
        """ORDER_FEATURES of every caption of a clip (each its lemmas in order), each among
        the clip's other captions: one GRU pass per direction for the clip, two slot rows
        (own caption only; with the others) per source slot."""
        n = len(captions)
        clip_others = [[captions[j] for j in range(n) if j != i] for i in range(n)]
        none: list[list[Sequence[str]]] = [[] for _ in captions]
        both, alone = self._slot_log_probs(captions, [clip_others, none])
        prior = self._tables["prior"]
        worst: list[tuple[float, ...] | None] = []
        for slots_both, slots_alone in zip(both, alone, strict=True):
            best: tuple[float, ...] | None = None
            for (k, row), (_, own) in zip(slots_both, slots_alone, strict=True):
                fit = float(row[k] - prior[k])
                if best is None or fit < best[0]:
                    best = (fit, float(own[k] - prior[k]), float(row[k] - row.max()),
                            float(own[k] - own.max()))  # fmt: skip
            worst.append(best)
        results = []
        for i, found in enumerate(worst):
            if found is None:
                results.append(list(NO_ORDER))
                continue
            theirs = [w[0] for j, w in enumerate(worst) if j != i and w is not None]
            relative = found[0] - float(np.mean(theirs)) if theirs else 0.0
            results.append([clamp(v) for v in (*found, relative)] + [1.0])
        return results

    def features_in_clip(self, own: Sequence[str], others: Sequence[Sequence[str]]) -> list[float]:
        """`clip_features` of the clip (own and others, as lemma lists), computed once for
        the clip's first caption asked about and kept for the others."""
        clip = sorted([tuple(own), *(tuple(o) for o in others)])
        found = self._clips.get(
            tuple(clip), lambda: dict(zip(clip, self.clip_features(clip), strict=True))
        )
        return list(found[tuple(own)])

    # persistence -------------------------------------------------------------------------

    def arrays(self) -> dict[str, NDArray[Any]]:
        header = {"words": self.words, "sources": self.sources}
        out: dict[str, NDArray[Any]] = {
            "ord_header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            "ord_embed": self.embed,
            "ord_bag": self.bag,
            "ord_content": self.content,
            "ord_slot": self.slot,
            "ord_slot_bias": self.slot_bias,
            "ord_out": self.out,
            "ord_out_bias": self.out_bias,
            "ord_prior": self.prior,
        }
        for name, gru in (("f", self.forward), ("b", self.backward)):
            for key, value in gru.items():
                out[f"ord_{name}_{key}"] = value
        return out

    @classmethod
    def from_arrays(cls, data: Any) -> OrderModel:
        header = json.loads(bytes(data["ord_header"]).decode())

        def f32(name: str) -> FloatArray:
            return np.asarray(data[name], dtype=np.float32)

        keys = ("w_ih", "w_hh", "b_ih", "b_hh")
        return cls(
            words=list(header["words"]),
            sources=list(header["sources"]),
            embed=f32("ord_embed"),
            bag=f32("ord_bag"),
            content=np.asarray(data["ord_content"], dtype=bool),
            forward={k: f32(f"ord_f_{k}") for k in keys},
            backward={k: f32(f"ord_b_{k}") for k in keys},
            slot=f32("ord_slot"),
            slot_bias=f32("ord_slot_bias"),
            out=f32("ord_out"),
            out_bias=f32("ord_out_bias"),
            prior=f32("ord_prior"),
        )


def _sigmoid(x: DoubleArray) -> DoubleArray:
    out: DoubleArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


# building --------------------------------------------------------------------------------


def slot_count(
    clips: Sequence[Sequence[Sequence[str]]], sources: Sequence[str], stop: frozenset[str]
) -> int:
    """How many source slots (source lemmas in order, function words aside) the clips'
    captions hold: what the model would learn from."""
    known = frozenset(sources) - stop
    return sum(1 for clip in clips for c in clip for w in c if w in known)


# (word ids with START and END, the source slots' places in them, the sources there, the
# others' content word ids)
_Example = tuple[list[int], list[int], list[int], list[int]]


def _slot_logits(torch: Any, net: Mapping[str, Any], batch: Sequence[_Example]) -> Any:
    """(logits over the sources for every slot of the batch, the sources there): the
    PyTorch forward pass, as trained; OrderModel.slot_log_probs is its NumPy twin."""
    longest = max(len(e[0]) for e in batch)
    seq = torch.zeros((len(batch), longest), dtype=torch.long)
    rev = torch.zeros((len(batch), longest), dtype=torch.long)
    for i, (s, _, _, _) in enumerate(batch):
        seq[i, : len(s)] = torch.tensor(s)
        rev[i, : len(s)] = torch.tensor(s[::-1])
    f_states, _ = net["fwd"](net["embed"](seq))  # [:, j]: after reading j + 1 words
    b_states, _ = net["bwd"](net["embed"](rev))
    rows_i, f_at, b_at, targets = [], [], [], []
    for i, (s, places, ts, _) in enumerate(batch):
        for q, k in zip(places, ts, strict=True):
            rows_i.append(i)
            f_at.append(q - 1)  # after the words before it (START included)
            b_at.append(len(s) - 2 - q)  # after the words after it (END included)
            targets.append(k)
    r = torch.tensor(rows_i, dtype=torch.long)
    f = f_states[r, torch.tensor(f_at, dtype=torch.long)]
    b = b_states[r, torch.tensor(b_at, dtype=torch.long)]
    flat = [w for e in batch for w in e[3]]
    if flat:
        offsets = np.cumsum([0] + [len(e[3]) for e in batch[:-1]]).tolist()
        o = net["bag"](torch.tensor(flat), torch.tensor(offsets))
        empty = torch.tensor([not e[3] for e in batch])[:, None]
        o = torch.where(empty, torch.zeros_like(o), o)
    else:
        o = torch.zeros((len(batch), net["bag"].weight.shape[1]))
    h = torch.tanh(net["slot"](torch.cat([f, b], dim=1)) + net["bag_in"](o)[r])
    return net["out"](h), torch.tensor(targets, dtype=torch.long)


def torch_slot_log_probs(
    model: OrderModel, captions: Sequence[Sequence[str]], others: Sequence[Sequence[Sequence[str]]]
) -> list[list[tuple[int, DoubleArray]]]:
    """`model.slot_log_probs` computed by the PyTorch forward pass the model was trained
    with (its stored weights loaded into PyTorch modules): the reference the NumPy scoring
    is tested against."""
    import torch

    nn = torch.nn
    words, hidden = model.embed.shape[0], model.slot.shape[1]
    embed = nn.Embedding(words, model.embed.shape[1], padding_idx=PAD)
    bag = nn.EmbeddingBag(words, hidden, mode="mean")
    fwd = nn.GRU(model.embed.shape[1], hidden, batch_first=True)
    bwd = nn.GRU(model.embed.shape[1], hidden, batch_first=True)
    slot, out = nn.Linear(2 * hidden, hidden), nn.Linear(hidden, len(model.sources))
    with torch.no_grad():
        embed.weight.copy_(torch.tensor(model.embed))
        bag.weight.copy_(torch.tensor(model.bag))
        for module, gru in ((fwd, model.forward), (bwd, model.backward)):
            for key in ("w_ih", "w_hh", "b_ih", "b_hh"):
                name = {"w_ih": "weight_ih_l0", "w_hh": "weight_hh_l0"}.get(
                    key, key.replace("b_", "bias_") + "_l0"
                )
                getattr(module, name).copy_(torch.tensor(gru[key]))
        slot.weight.copy_(torch.tensor(model.slot.T))
        slot.bias.copy_(torch.tensor(model.slot_bias))
        out.weight.copy_(torch.tensor(model.out.T))
        out.bias.copy_(torch.tensor(model.out_bias))
    net = {"embed": embed, "bag": bag, "fwd": fwd, "bwd": bwd, "slot": slot,
           "bag_in": nn.Identity(), "out": out}  # fmt: skip
    batch: list[_Example] = []
    for caption, theirs in zip(captions, others, strict=True):
        ids = model.encode(caption)
        places = [p + 1 for p, w in enumerate(caption) if w in model.source_index]
        bag_ids = [model.index[w] for o in theirs for w in o if model.index.get(w, 0) > END]
        targets = [model.source_index[caption[q - 1]] for q in places]
        batch.append(
            ([START, *ids, END], places, targets, [w for w in bag_ids if model.content[w]])
        )
    result: list[list[tuple[int, DoubleArray]]] = [[] for _ in captions]
    if not any(e[1] for e in batch):
        return result
    with torch.no_grad():
        logits, _ = _slot_logits(torch, net, batch)
        logp = torch.log_softmax(logits.double(), dim=1).numpy()
    k = 0
    for i, e in enumerate(batch):
        for target in e[2]:
            result[i].append((target, logp[k]))
            k += 1
    return result


def order_learn(
    *,
    clips: Sequence[Sequence[Sequence[str]]],
    sources: Sequence[str],
    stop: frozenset[str],
    seed: int = 0,
    epochs: int | None = None,
) -> OrderModel:
    """Trains the model on clips' captions as lemma lists in order (`clips[clip][caption]`);
    `sources` are the lemmas that name sound sources (the slots it learns to fill), `stop`
    the function words left out of the others' bag. A clip with one caption teaches the
    own-caption question only."""
    import torch  # build time only

    with one_torch_thread(torch):
        return _order_learn(torch, clips, frozenset(sources), stop, seed, epochs or EPOCHS)


def _order_learn(
    torch: Any,
    clips: Sequence[Sequence[Sequence[str]]],
    sources: frozenset[str],
    stop: frozenset[str],
    seed: int,
    epochs: int,
) -> OrderModel:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    counts: Counter[str] = Counter(w for clip in clips for c in clip for w in c)
    words = [*_SPECIAL, *(w for w, n in counts.most_common(MAX_VOCAB) if n >= MIN_COUNT)]
    index = {w: i for i, w in enumerate(words)}
    slots: Counter[str] = Counter(
        w for clip in clips for c in clip for w in c if w in sources and w not in stop
    )
    out_words = sorted(w for w, n in slots.items() if n >= MIN_SLOT and w in index)
    if len(out_words) < 5:
        raise ValueError(f"the order model needs at least 5 source lemmas, got {len(out_words)}")
    out_index = {w: k for k, w in enumerate(out_words)}
    total = np.array([slots[w] for w in out_words], dtype=np.float64)
    prior = np.log(total / total.sum()).astype(np.float32)
    content = np.array([i > END and w not in stop for i, w in enumerate(words)], dtype=bool)

    examples: list[_Example] = []
    for clip in clips:
        ids = [[index.get(w, UNKNOWN) for w in c] for c in clip]
        for i, caption in enumerate(clip):
            places = [p for p, w in enumerate(caption) if w in out_index]
            if not places:
                continue
            bag: list[int] = []
            if len(clip) > 1 and rng.random() < OTHERS_SHARE:
                bag = [w for j, o in enumerate(ids) if j != i for w in o if content[w]]
            targets = [out_index[caption[p]] for p in places]
            examples.append(([START, *ids[i], END], [p + 1 for p in places], targets, bag))
    if not examples:
        raise ValueError("the order model found no source slot to learn from")

    nn = torch.nn
    embed = nn.Embedding(len(words), EMBED, padding_idx=PAD)
    bag_embed = nn.EmbeddingBag(len(words), EMBED, mode="mean")
    fwd, bwd = nn.GRU(EMBED, HIDDEN, batch_first=True), nn.GRU(EMBED, HIDDEN, batch_first=True)
    slot = nn.Linear(2 * HIDDEN, HIDDEN)
    bag_in = nn.Linear(EMBED, HIDDEN, bias=False)  # folded into the bag table when saved
    out = nn.Linear(HIDDEN, len(out_words))
    with torch.no_grad():
        out.bias.copy_(torch.tensor(prior))
    net = {"embed": embed, "bag": bag_embed, "fwd": fwd, "bwd": bwd, "slot": slot,
           "bag_in": bag_in, "out": out}  # fmt: skip
    params = [p for m in net.values() for p in m.parameters()]
    optimiser = torch.optim.Adam(params, lr=3e-3)

    order = list(range(len(examples)))
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), BATCH):
            logits, targets = _slot_logits(
                torch, net, [examples[i] for i in order[start : start + BATCH]]
            )
            loss = torch.nn.functional.cross_entropy(logits, targets)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()

    def gru(module: Any) -> dict[str, FloatArray]:
        return {
            "w_ih": module.weight_ih_l0.detach().numpy().astype(np.float32),
            "w_hh": module.weight_hh_l0.detach().numpy().astype(np.float32),
            "b_ih": module.bias_ih_l0.detach().numpy().astype(np.float32),
            "b_hh": module.bias_hh_l0.detach().numpy().astype(np.float32),
        }

    with torch.no_grad():
        # the others' bag enters as mean(B[bag]) @ bag_in^T = mean((B @ bag_in^T)[bag]):
        # stored as that (words, HIDDEN) table
        w = slot.weight.detach().numpy().T.copy()  # (2H, H)
        bag_proj = bag_in.weight.detach().numpy()  # (H, EMBED)
        bag_table = bag_embed.weight.detach().numpy()  # (words, EMBED)
        return OrderModel(
            words=words,
            sources=out_words,
            embed=embed.weight.detach().numpy().astype(np.float32),
            bag=(bag_table @ bag_proj.T).astype(np.float32),
            content=content,
            forward=gru(fwd),
            backward=gru(bwd),
            slot=w.astype(np.float32),
            slot_bias=slot.bias.detach().numpy().astype(np.float32),
            out=out.weight.detach().numpy().T.astype(np.float32).copy(),
            out_bias=out.bias.detach().numpy().astype(np.float32),
            prior=prior,
        )
