"""Which words fit a caption's context: a small masked-word predictor for the flags.

A swapped sound source ("a car barks loudly") does not fit its own caption's other words nor
what the clip's other captions say; an off-topic caption's words are not what the other
captions lead one to expect. This model learns both from captions alone: given the bag of a
caption's other lemmas (`own`) and the bag of the clip's other captions' lemmas (`others`),
a softmax over the lemma vocabulary for the word left out,

    h = tanh(A_own · mean(E[own]) + A_others · mean(E[others]) + c)
    P(word | own, others) = softmax(U · h + b)

with E started from the flag model's PPMI-SVD word vectors. It is trained (PyTorch, CPU, at
build time only) on every content lemma of the build captions, with the own bag, the others'
bag or both given, so it answers all three questions; scoring is NumPy.

Scores are pointwise: log P(word | context) - log P(word), in nats ("how much more likely the
context makes this word than it is anywhere"), so rare and common words compare.
"""

from __future__ import annotations

import ctypes
import math
import random
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float32]
DoubleArray = NDArray[np.float64]

HIDDEN = 128
MAX_OUT = 6000  # lemmas the model predicts (the most frequent ones)
MIN_OUT = 5  # … seen at least this often
EPOCHS = 4
BATCH = 512


_Found = TypeVar("_Found")


class ClipMemo(Generic[_Found]):
    """What a flag part computed for a whole clip, kept for the clip's other captions: the
    flag job and the benchmark check a clip's captions one after another, and each part
    scores the clip at once. Keyed by the clip's captions in a fixed order, so which
    caption asks does not matter; forgets everything past `size` clips (they are not asked
    about again)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._found: dict[Hashable, _Found] = {}

    def get(self, key: Hashable, compute: Callable[[], _Found]) -> _Found:
        found = self._found.get(key)
        if found is None:
            found = compute()
            if len(self._found) >= self.size:
                self._found.clear()
            self._found[key] = found
        return found

    def clear(self) -> None:
        self._found.clear()


@dataclass
class ContextModel:
    embed: FloatArray  # (input vocab, DIM): the flag model's word order
    own: FloatArray  # (DIM, HIDDEN)
    others: FloatArray  # (DIM, HIDDEN)
    bias_hidden: FloatArray  # (HIDDEN,)
    out: FloatArray  # (HIDDEN, n_out)
    bias_out: FloatArray  # (n_out,)
    prior: FloatArray  # (n_out,) log unigram probability of each predicted lemma
    n_out: int  # the first n_out input words are the predicted ones
    is_source: NDArray[np.bool_] | None = None  # (n_out,) which predicted lemmas name sources
    weight: FloatArray | None = None  # (n_out,) the lemmas' idf: specific words count more

    @cached_property
    def _tables(self) -> _Tables:
        return _Tables.of(self)

    def _bag(self, ids: Sequence[int]) -> DoubleArray:
        if not ids:
            return np.zeros(self.embed.shape[1], dtype=np.float64)
        return self._tables.embed[list(ids)].mean(axis=0)

    def log_probs(
        self, own: Sequence[Sequence[int]], others: Sequence[Sequence[int]]
    ) -> DoubleArray:
        """(len(own), n_out) log P(word | own bag, others' bag) for rows of context bags
        (word ids; an empty bag is a context not given)."""
        dim = self.embed.shape[1]
        o = np.stack([self._bag(b) for b in own]) if own else np.zeros((0, dim))
        t = np.stack([self._bag(b) for b in others]) if others else np.zeros_like(o)
        return self._from_means(o, t)

    def _from_means(self, o: DoubleArray, t: DoubleArray) -> DoubleArray:
        tables = self._tables
        return _log_softmax(
            tables, np.tanh(o @ tables.own + t @ tables.others + tables.bias_hidden)
        )

    def features(
        self, own: Sequence[int], others: Sequence[Sequence[int]]
    ) -> tuple[list[float], int | None]:
        """CONTEXT_FEATURES of a caption (its lemmas' word ids, `own`) among the clip's
        other captions (theirs), and the id of its least fitting source lemma (None when it
        names no source the model predicts).

        The reference computation, one caption at a time; `clip_features` gives the same
        for every caption of a clip at once and `features_in_clip` reuses it."""
        dim = self.embed.shape[1]
        embed = self._tables.embed
        sums = [embed[list(o)].sum(axis=0) if o else np.zeros(dim) for o in others]
        sizes = [len(o) for o in others]
        zero = np.zeros(dim)

        def mean_of(skip: set[int]) -> DoubleArray:
            n = sum(sizes[j] for j in range(len(others)) if j not in skip)
            if not n:
                return zero
            total: DoubleArray = sum((sums[j] for j in range(len(others)) if j not in skip), zero)
            return total / n

        sources = self._sources(own)
        own_rows, other_rows = [zero], [mean_of(set())]  # the others only
        for j in range(len(others)):  # each other caption, from the remaining others
            own_rows.append(zero)
            other_rows.append(mean_of({j}))
        for s in sources:  # each source, from its own caption's other words, then with all
            rest = [w for w in own if w != s]
            own_bag = embed[rest].mean(axis=0) if rest else zero
            own_rows += [own_bag, own_bag]
            other_rows += [zero, other_rows[0]]
        pmi = self._from_means(np.stack(own_rows), np.stack(other_rows)) - self._tables.prior
        base = 1 + len(others)
        return self._assemble(
            pmi,
            own,
            others,
            mine=0,
            theirs=list(range(1, base)),
            source_rows=[(base + 2 * k, base + 2 * k + 1) for k in range(len(sources))],
        )

    def clip_features(self, bags: Sequence[Sequence[int]]) -> list[tuple[list[float], int | None]]:
        """`features` of every caption of a clip (its captions' word ids, `bags`), each
        among the clip's other captions, from one batch of prediction rows: the hidden
        layer's inputs come from per-lemma tables (each lemma's embedding times the two
        input matrices), summed per caption, so each row is a few additions, and the
        rows of all captions go through the output layer in one matrix product; the
        scores `_assemble` reads one caption at a time are read for the clip at once."""
        tables = self._tables
        n = len(bags)
        hidden = tables.own.shape[1]
        flat = np.fromiter((w for b in bags for w in b), dtype=np.intp)
        sizes = np.array([len(b) for b in bags], dtype=np.float64)
        full = np.flatnonzero(sizes)
        starts = (np.cumsum(sizes) - sizes).astype(np.intp)
        # per caption: summed others-side and own-side inputs and its number of words
        theirs_sum, own_sum = np.zeros((n, hidden)), np.zeros((n, hidden))
        if len(full):
            theirs_sum[full] = np.add.reduceat(tables.by_others[flat], starts[full], axis=0)
            own_sum[full] = np.add.reduceat(tables.by_own[flat], starts[full], axis=0)
        total, count = theirs_sum.sum(axis=0), sizes.sum()

        def mean_input(summed: DoubleArray, words: DoubleArray) -> DoubleArray:
            out = np.zeros_like(summed)
            np.divide(summed, words[..., None], out=out, where=words[..., None] > 0)
            return out

        # row i: the others of caption i; row (i, j): those without caption j as well
        without_one = mean_input(total - theirs_sum, count - sizes)
        first, second = np.triu_indices(n, k=1)
        without_two = mean_input(
            total - theirs_sum[first] - theirs_sum[second], count - sizes[first] - sizes[second]
        )
        pair_row = np.zeros((n, n), dtype=np.int64)
        pair_row[first, second] = pair_row[second, first] = n + np.arange(len(first))
        # per source word of each caption: its caption's other words, then with the others
        mine_of, source_of, times = [], [], []
        for i, own in enumerate(bags):
            for s in self._sources(own):
                mine_of.append(i)
                source_of.append(s)
                times.append(own.count(s))  # once: a caption's lemmas are distinct
        alone_rows = n + len(first) + 2 * np.arange(len(source_of))
        rows = [without_one, without_two]
        if source_of:
            many = np.asarray(times, dtype=np.float64)
            own_input = mean_input(
                own_sum[mine_of] - many[:, None] * tables.by_own[source_of], sizes[mine_of] - many
            )
            pairs = np.stack([own_input, own_input + without_one[mine_of]], axis=1)
            rows.append(pairs.reshape(-1, hidden))
        pmi = _log_softmax(tables, np.tanh(np.concatenate(rows) + tables.bias_hidden))
        pmi -= tables.prior
        # `_assemble`'s mean_pmi(row, predicted words of caption b) for every row and b
        predicted = [[w for w in b if w < self.n_out] for b in bags]
        counts = np.array([len(p) for p in predicted])
        said = np.flatnonzero(counts)
        mean_fit = np.zeros((len(pmi), n))
        lowest = np.zeros((len(pmi), n))
        if len(said):
            words = np.fromiter((w for p in predicted for w in p), dtype=np.intp)
            at = (np.cumsum(counts) - counts)[said]
            scores, weight = pmi[:, words], tables.weight[words]
            mean_fit[:, said] = np.add.reduceat(scores * weight, at, axis=1) / np.maximum(
                np.add.reduceat(weight, at), 1e-6
            )
            lowest[:, said] = np.minimum.reduceat(scores, at, axis=1)
        # each other caption's fit, from the remaining others
        others = ~np.eye(n, dtype=bool)
        column = np.broadcast_to(np.arange(n), (n, n))[others].reshape(n, n - 1)
        others_fit = mean_fit[pair_row[others].reshape(n, n - 1), column]
        # per source word: its score alone, with the others, given the others only, and
        # how it ranks among the source words with the others
        both_rows = alone_rows + 1
        source_of_ = np.asarray(source_of, dtype=np.intp)
        alone = pmi[alone_rows, source_of_]
        both = pmi[both_rows, source_of_]
        given_others = pmi[np.asarray(mine_of, dtype=np.intp), source_of_]
        ranked = pmi[both_rows][:, tables.source_columns]
        best_source = ranked.max(axis=1) if source_of else np.zeros(0)
        above = (ranked > both[:, None]).sum(axis=1)
        fits = np.diagonal(mean_fit)
        relatives = fits - others_fit.mean(axis=1) if n > 1 else np.zeros(n)
        spreads = others_fit.std(axis=1) if n > 1 else np.ones(n)
        results = []
        k = 0
        for i in range(n):
            fit, relative, spread = float(fits[i]), float(relatives[i]), float(spreads[i])
            worst: tuple[float, ...] = (5.0, 5.0, 5.0, 0.0, 0.0)
            worst_word = None
            while k < len(mine_of) and mine_of[k] == i:
                if worst_word is None or both[k] < worst[0]:
                    worst_word = source_of[k]
                    worst = (
                        float(both[k]),
                        float(alone[k]),
                        float(given_others[k]),
                        float(both[k] - best_source[k]),
                        math.log1p(int(above[k])),
                    )
                k += 1
            values = [fit, float(lowest[i, i]), relative, relative / max(spread, 0.3), *worst]
            results.append(
                ([clamp(v) for v in values] + [float(worst_word is not None)], worst_word)
            )
        return results

    def features_in_clip(
        self, own: Sequence[int], others: Sequence[Sequence[int]]
    ) -> tuple[list[float], int | None]:
        """`features`, from `clip_features` of the whole clip (own and others), computed
        once for the clip's first caption asked about and kept for the rest: the flag job
        and the benchmark check a clip's captions one after another. Which caption is
        which does not matter: the clip is keyed by its captions in a fixed order."""
        clip = sorted([tuple(own), *(tuple(o) for o in others)])
        found = self._clip_memo.get(
            tuple(clip), lambda: dict(zip(clip, self.clip_features(clip), strict=True))
        )
        values, worst = found[tuple(own)]
        return list(values), worst

    @cached_property
    def _clip_memo(self) -> ClipMemo[dict[Any, Any]]:
        return ClipMemo()

    def _sources(self, own: Sequence[int]) -> list[int]:
        is_source = self.is_source if self.is_source is not None else np.zeros(self.n_out, bool)
        return [w for w in own if w < self.n_out and is_source[w]]

    def _assemble(
        self,
        pmi: DoubleArray,
        own: Sequence[int],
        others: Sequence[Sequence[int]],
        *,
        mine: int,
        theirs: Sequence[int],
        source_rows: Sequence[tuple[int, int]],
    ) -> tuple[list[float], int | None]:
        """The features from the rows of pointwise scores: `mine` (the caption's words given
        the others), `theirs` (each other caption's, given the remaining others) and, per
        source word of the caption, (given its own other words, given those and the others)."""
        weight = self._tables.weight
        is_source = self._tables.is_source

        def mean_pmi(row: int, words: Sequence[int]) -> float:
            if not words:
                return 0.0
            w = weight[list(words)]
            return float((pmi[row, list(words)] * w).sum() / max(float(w.sum()), 1e-6))

        predicted = [w for w in own if w < self.n_out]
        sources = self._sources(own)
        fit = mean_pmi(mine, predicted)
        lowest = float(pmi[mine, predicted].min()) if predicted else 0.0
        others_fit = [
            mean_pmi(row, [w for w in o if w < self.n_out])
            for row, o in zip(theirs, others, strict=True)
        ]
        relative = fit - float(np.mean(others_fit)) if others_fit else 0.0
        spread = float(np.std(others_fit)) if others_fit else 1.0
        worst: tuple[float, ...] = (5.0, 5.0, 5.0, 0.0, 0.0)
        worst_word = None
        for s, (alone_row, both_row) in zip(sources, source_rows, strict=True):
            alone, both = pmi[alone_row, s], pmi[both_row, s]
            row = pmi[both_row][is_source]
            if worst_word is None or both < worst[0]:
                worst_word = s
                worst = (
                    float(both),
                    float(alone),
                    float(pmi[mine, s]),
                    float(both - row.max()),
                    math.log1p(int((row > both).sum())),
                )
        values = [fit, lowest, relative, relative / max(spread, 0.3), *worst]
        return [clamp(v) for v in values] + [float(bool(sources))], worst_word

    def arrays(self) -> dict[str, NDArray[Any]]:
        return {
            "ctx_embed": self.embed.astype(np.float16),
            "ctx_own": self.own,
            "ctx_others": self.others,
            "ctx_bias_hidden": self.bias_hidden,
            "ctx_out": self.out,
            "ctx_bias_out": self.bias_out,
            "ctx_prior": self.prior,
            "ctx_is_source": (
                self.is_source if self.is_source is not None else np.zeros(self.n_out, bool)
            ),
            "ctx_weight": self.weight if self.weight is not None else np.ones(self.n_out),
        }

    @classmethod
    def from_arrays(cls, data: dict[str, FloatArray] | np.lib.npyio.NpzFile) -> ContextModel:
        prior = np.asarray(data["ctx_prior"], dtype=np.float32)
        return cls(
            embed=np.asarray(data["ctx_embed"], dtype=np.float32),
            own=np.asarray(data["ctx_own"], dtype=np.float32),
            others=np.asarray(data["ctx_others"], dtype=np.float32),
            bias_hidden=np.asarray(data["ctx_bias_hidden"], dtype=np.float32),
            out=np.asarray(data["ctx_out"], dtype=np.float32),
            bias_out=np.asarray(data["ctx_bias_out"], dtype=np.float32),
            prior=prior,
            n_out=len(prior),
            is_source=np.asarray(data["ctx_is_source"], dtype=bool),
            weight=np.asarray(data["ctx_weight"], dtype=np.float32),
        )


@dataclass(frozen=True)
class _Tables:
    """The context model's arrays in float64 for scoring (float32 matrix products give
    results that change in the last bits with the number of rows in a batch, so a clip's
    batch would not reproduce one caption's rows), and the per-lemma hidden-layer inputs."""

    embed: DoubleArray
    own: DoubleArray
    others: DoubleArray
    bias_hidden: DoubleArray
    out: DoubleArray
    bias_out: DoubleArray
    prior: DoubleArray
    weight: DoubleArray
    is_source: NDArray[np.bool_]
    by_own: DoubleArray  # (input vocab, HIDDEN): each lemma's embedding times `own`
    by_others: DoubleArray  # … times `others`
    source_columns: NDArray[np.intp]  # the predicted lemmas that name sources

    @classmethod
    def of(cls, model: ContextModel) -> _Tables:
        embed = model.embed.astype(np.float64)
        own = model.own.astype(np.float64)
        others = model.others.astype(np.float64)
        weight = model.weight if model.weight is not None else np.ones(model.n_out)
        is_source = model.is_source if model.is_source is not None else np.zeros(model.n_out, bool)
        return cls(
            embed=embed,
            own=own,
            others=others,
            bias_hidden=model.bias_hidden.astype(np.float64),
            out=model.out.astype(np.float64),
            bias_out=model.bias_out.astype(np.float64),
            prior=model.prior.astype(np.float64),
            weight=np.asarray(weight, dtype=np.float64),
            is_source=np.asarray(is_source, dtype=bool),
            by_own=embed @ own,
            by_others=embed @ others,
            source_columns=np.flatnonzero(is_source),
        )


def _log_softmax(tables: _Tables, hidden: DoubleArray) -> DoubleArray:
    with one_blas_thread():
        logits: DoubleArray = hidden @ tables.out
    logits += tables.bias_out  # in place: a clip's rows x n_out, three passes fewer
    logits -= logits.max(axis=1, keepdims=True)
    logits -= np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return logits


# NumPy's OpenBLAS: its thread count through its own C functions (threadpoolctl's way, without
# the dependency; OPENBLAS_NUM_THREADS only counts before NumPy is imported)
_BLAS_FUNCTIONS = (  # (get, set) names: NumPy's wheels bundle scipy-openblas, 64-bit ints
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)
_blas_lock = threading.Lock()
_blas_state: dict[str, Any] = {"depth": 0, "before": 1}


def _openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS that NumPy's wheel bundles; None where
    NumPy was built against another BLAS (nothing is changed then)."""
    root = Path(np.__file__).resolve().parent
    found = sorted((root.parent / "numpy.libs").glob("*openblas*")) + sorted(
        (root / ".dylibs").glob("*openblas*")
    )
    for path in found:
        try:
            library = ctypes.CDLL(str(path))  # the copy NumPy loaded: the loader shares it
        except OSError:
            continue
        for get_name, set_name in _BLAS_FUNCTIONS:
            get, put = getattr(library, get_name, None), getattr(library, set_name, None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


_blas_threads = _openblas_threads()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Runs NumPy's matrix products on one OpenBLAS thread (restored after; nested and
    concurrent uses share one count). The flags' products are small, (tens of rows x 128) x
    (128 x a few thousand): a second thread saves nothing on a quiet machine and, on a busy
    2-core one, spins waiting for its sibling (the flag benchmark used twice the CPU)."""
    if _blas_threads is None:
        yield
        return
    get, put = _blas_threads
    with _blas_lock:
        if _blas_state["depth"] == 0:
            _blas_state["before"] = get()
            put(1)
        _blas_state["depth"] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_state["depth"] -= 1
            if _blas_state["depth"] == 0:
                put(_blas_state["before"])


# what ContextModel.features returns, in order (pointwise scores in nats)
CONTEXT_FEATURES = (
    "context_fit",  # mean over its words of how much the other captions predict them
    "context_lowest",  # … the least predicted word's
    "context_relative",  # context_fit minus the other captions' own (each from the rest)
    "context_z",  # … over their spread
    "source_fit",  # its least fitting source, predicted from its own words and the others
    "source_own_fit",  # … from its own other words only ("car" from "barks loudly")
    "source_others_fit",  # … from the other captions only
    "source_margin",  # … against the best fitting source there
    "source_rank",  # log(1 + sources that fit better there)
    "names_source",  # 1 when it names a source the model predicts
)


def context_learn(
    *,
    bags: Sequence[Sequence[Sequence[int]]],
    vectors: FloatArray,
    counts: Sequence[int],
    is_source: Sequence[bool],
    weight: Sequence[float],
    seed: int = 0,
    epochs: int = EPOCHS,
) -> ContextModel:
    """Trains the predictor on clips' captions as word-id lists (`bags[clip][caption]`, ids
    into `vectors`, whose words are sorted most frequent first; `counts` their caption
    counts). A clip with one caption teaches the own-context question only."""
    import torch  # build time only

    with one_torch_thread(torch):
        return _context_learn(torch, bags, vectors, counts, is_source, weight, seed, epochs)


@contextmanager
def one_torch_thread(torch: Any) -> Iterator[None]:
    """Trains on one thread: small matrices gain little from two, and on a busy machine
    OpenMP's threads wait at every barrier for a descheduled sibling (ten times slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _context_learn(
    torch: Any,
    bags: Sequence[Sequence[Sequence[int]]],
    vectors: FloatArray,
    counts: Sequence[int],
    is_source: Sequence[bool],
    weight: Sequence[float],
    seed: int,
    epochs: int,
) -> ContextModel:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    n_out = sum(1 for c in counts[:MAX_OUT] if c >= MIN_OUT)
    if n_out < 10:
        raise ValueError(f"the context model needs at least 10 frequent lemmas, got {n_out}")
    own_rows: list[list[int]] = []
    other_rows: list[list[int]] = []
    targets: list[int] = []
    for clip in bags:
        for i, caption in enumerate(clip):
            rest = [w for j, c in enumerate(clip) if j != i for w in c]
            for k, word in enumerate(caption):
                if word >= n_out:
                    continue
                own = [w for m, w in enumerate(caption) if m != k]
                if rest:
                    # three questions: own words only, the others only, both
                    ask = rng.randrange(3)
                    own_rows.append(own if ask != 1 else [])
                    other_rows.append(rest if ask != 0 else [])
                else:
                    own_rows.append(own)
                    other_rows.append([])
                targets.append(word)
    if not targets:
        raise ValueError("the context model found no word to learn from")
    total = np.asarray(counts[:n_out], dtype=np.float64)
    prior = np.log(total / total.sum()).astype(np.float32)
    dim = vectors.shape[1]
    embed = torch.nn.Parameter(torch.tensor(vectors, dtype=torch.float32))
    a_own = torch.nn.Linear(dim, HIDDEN)
    a_other = torch.nn.Linear(dim, HIDDEN, bias=False)
    out = torch.nn.Linear(HIDDEN, n_out)
    with torch.no_grad():
        out.bias.copy_(torch.tensor(prior))
    params = [embed, *a_own.parameters(), *a_other.parameters(), *out.parameters()]
    optimiser = torch.optim.Adam(params, lr=3e-3)

    def bag_mean(rows: list[list[int]]) -> torch.Tensor:
        flat = [w for r in rows for w in r]
        offsets = np.cumsum([0] + [len(r) for r in rows[:-1]]).tolist()
        summed = torch.nn.functional.embedding_bag(
            torch.tensor(flat or [0], dtype=torch.long),
            embed,
            torch.tensor(offsets, dtype=torch.long),
            mode="sum",
        )
        size = torch.tensor([max(1, len(r)) for r in rows], dtype=torch.float32)[:, None]
        if not flat:
            summed = torch.zeros(len(rows), dim)
        return summed / size

    order = list(range(len(targets)))
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            o = bag_mean([own_rows[i] for i in idx])
            t = bag_mean([other_rows[i] for i in idx])
            h = torch.tanh(a_own(o) + a_other(t))
            loss = torch.nn.functional.cross_entropy(
                out(h), torch.tensor([targets[i] for i in idx], dtype=torch.long)
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    with torch.no_grad():
        return ContextModel(
            embed=embed.detach().numpy().astype(np.float32),
            own=a_own.weight.detach().numpy().T.copy(),
            others=a_other.weight.detach().numpy().T.copy(),
            bias_hidden=a_own.bias.detach().numpy().copy(),
            out=out.weight.detach().numpy().T.copy(),
            bias_out=out.bias.detach().numpy().copy(),
            prior=prior,
            n_out=n_out,
            is_source=np.asarray(is_source[:n_out], dtype=bool),
            weight=np.asarray(weight[:n_out], dtype=np.float32),
        )


def pointwise(log_probs: FloatArray, prior: FloatArray, word: int) -> float:
    """log P(word | context) - log P(word) (0 for a word the model does not predict)."""
    if word >= len(prior):
        return 0.0
    return float(log_probs[word] - prior[word])


def clamp(value: float, low: float = -12.0, high: float = 12.0) -> float:
    return max(low, min(high, value)) if math.isfinite(value) else low


def net_fit(
    x: NDArray[np.float64], y: NDArray[np.float64], *, hidden: int = 32, seed: int = 0
) -> tuple[list[float], list[float], list[list[float]], list[float], list[float], float]:
    """A one-hidden-layer tanh network for P(bad | features), fitted full-batch with Adam
    and weight decay (PyTorch, build time only): (mean, scale, hidden weights (features x
    hidden), hidden biases, output weights, output bias) over standardised features."""
    import torch

    with one_torch_thread(torch):
        return _net_fit(torch, x, y, hidden, seed)


def _net_fit(
    torch: Any, x: NDArray[np.float64], y: NDArray[np.float64], hidden: int, seed: int
) -> tuple[list[float], list[float], list[list[float]], list[float], list[float], float]:
    torch.manual_seed(seed)
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    xt = torch.tensor((x - mean) / scale, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    first = torch.nn.Linear(x.shape[1], hidden)
    last = torch.nn.Linear(hidden, 1)
    params = [*first.parameters(), *last.parameters()]
    optimiser = torch.optim.Adam(params, lr=1e-2, weight_decay=1e-3)
    for _ in range(300):
        logits = last(torch.tanh(first(xt)))[:, 0]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, yt)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return (
        mean.tolist(),
        scale.tolist(),
        first.weight.detach().numpy().T.tolist(),
        first.bias.detach().numpy().tolist(),
        last.weight.detach().numpy()[0].tolist(),
        float(last.bias.detach().numpy()[0]),
    )
