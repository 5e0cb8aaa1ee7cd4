"""Dataset analytics of Shen et al. (CVPR 2023): audio relevance (ARS) and speech coverage
(SCR) of captions. Pure functions; spaCy does the lemmas and stop words. No Django here.

ARS: how much a caption talks about what is heard rather than what is seen. From the word
frequencies of the corpus' captions (f_audio) and of a reference image-caption corpus the user
provides (f_image, e.g. COCO's), a word scores ``max(log(f_audio(w) / f_image(w)), 0)``: words
far more common in audio captions ("barking", "hum") score high, shared or visual words 0. A
caption's ARS is the sum over its words that are not stop words or punctuation; a corpus
reports the mean over captions. Words are lower-cased lemmas on both sides. A word missing
from the image table would have an infinite ratio, so both distributions are add-one smoothed
over the union of their vocabularies (a word seen once in audio and never in images scores
about log(N_image / N_audio), not infinity).

SCR: the share of a caption's words that also occur in the clip's speech transcript (how much
a caption merely transcribes speech); a corpus reports the mean over captions of clips that
have a transcript.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


class AnalyticsInputError(ValueError):
    """A word-frequency table or transcript file cannot be read; the message says where."""


# inputs --------------------------------------------------------------------------------------


def read_word_frequencies(path: Path | str) -> Counter[str]:
    """A word-frequency table: one ``word,count`` (or tab-separated) row per line, an
    optional header row; words are lower-cased and repeated words summed."""
    path = Path(path)
    counts: Counter[str] = Counter()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnalyticsInputError(f"{path}: cannot read the word-frequency table ({exc})") from None
    dialect = "excel-tab" if "\t" in text.split("\n", 1)[0] else "excel"
    for number, row in enumerate(csv.reader(text.splitlines(), dialect=dialect), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2:
            raise AnalyticsInputError(f"{path} line {number}: expected word and count")
        word, count = row[0].strip().lower(), row[1].strip()
        try:
            value = float(count)
        except ValueError:
            if number == 1:
                continue  # a header row
            raise AnalyticsInputError(
                f"{path} line {number}: count {count!r} is not a number"
            ) from None
        if value < 0 or not math.isfinite(value):
            raise AnalyticsInputError(f"{path} line {number}: count {count!r} is not >= 0")
        if word:
            counts[word] += value  # type: ignore[assignment]
    if not counts:
        raise AnalyticsInputError(f"{path}: the word-frequency table has no rows")
    return counts


# lemmas --------------------------------------------------------------------------------------


def content_lemmas(texts: Iterable[str], nlp: Any, *, batch_size: int = 512) -> list[list[str]]:
    """Per text, the lower-cased lemmas of its words that are neither stop words nor
    punctuation (spaCy's ``is_stop`` and ``is_punct``)."""
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        out.append(
            [
                (token.lemma_ or token.text).lower()
                for token in doc
                if not token.is_stop
                and not token.is_punct
                and not token.is_space
                and _WORD.fullmatch(token.text.lower())
            ]
        )
    return out


def lemmatise_table(counts: Mapping[str, float], nlp: Any) -> Counter[str]:
    """A word-frequency table with each word replaced by its lemma (counts of words that
    share a lemma are summed); stop words and punctuation are dropped."""
    words = list(counts)
    lemmas: Counter[str] = Counter()
    for word, found in zip(words, content_lemmas(words, nlp), strict=True):
        for lemma in found[:1]:
            lemmas[lemma] += counts[word]  # type: ignore[assignment]
    return lemmas


# ARS -----------------------------------------------------------------------------------------


def word_relevance(audio: Mapping[str, float], image: Mapping[str, float]) -> dict[str, float]:
    """Per word of ``audio``: max(log(f_audio / f_image), 0), both add-one smoothed over the
    union vocabulary."""
    vocabulary = set(audio) | set(image)
    size = len(vocabulary)
    audio_total = sum(audio.values()) + size
    image_total = sum(image.values()) + size
    return {
        word: max(
            math.log(
                ((audio.get(word, 0.0) + 1) / audio_total)
                / ((image.get(word, 0.0) + 1) / image_total)
            ),
            0.0,
        )
        for word in audio
    }


def caption_relevance(lemmas: Sequence[str], relevance: Mapping[str, float]) -> float:
    """A caption's ARS: the sum of its content words' scores."""
    return sum(relevance.get(lemma, 0.0) for lemma in lemmas)


def audio_relevance(
    captions: Sequence[Sequence[str]], image: Mapping[str, float], *, top: int = 15
) -> dict[str, Any]:
    """ARS of a corpus from its captions' content lemmas and an image-caption lemma table:
    {"mean", "captions", "top_words": [[word, score], ...]}."""
    audio: Counter[str] = Counter()
    for lemmas in captions:
        audio.update(lemmas)
    relevance = word_relevance(audio, image)
    scores = [caption_relevance(lemmas, relevance) for lemmas in captions]
    best = sorted(relevance.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {
        "mean": sum(scores) / len(scores) if scores else None,
        "captions": len(scores),
        "top_words": [[word, round(score, 4)] for word, score in best],
    }


# SCR -----------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def speech_coverage(caption: str, transcript: str) -> float | None:
    """The share of the caption's words found in the transcript (None for an empty caption)."""
    tokens = words(caption)
    if not tokens:
        return None
    heard = set(words(transcript))
    return sum(token in heard for token in tokens) / len(tokens)


def corpus_speech_coverage(
    captions: Iterable[tuple[Any, str]], transcripts: Mapping[Any, str]
) -> dict[str, Any]:
    """SCR of a corpus: the mean over captions (``(clip key, text)`` pairs) whose clip has a
    transcript: {"mean", "captions", "clips"}."""
    shares = []
    clips = set()
    for key, text in captions:
        transcript = transcripts.get(key)
        if transcript is None:
            continue
        share = speech_coverage(text, transcript)
        if share is not None:
            shares.append(share)
            clips.add(key)
    return {
        "mean": sum(shares) / len(shares) if shares else None,
        "captions": len(shares),
        "clips": len(clips),
    }
