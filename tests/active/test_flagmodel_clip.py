"""The flag model's clip-at-a-time scoring (active/flagmodel.py `_ClipWords`,
`ContextModel.features_in_clip`): every caption of a clip gets the features, notes and flag
probability the one-caption-at-a-time reference computation gives, on fixture clips."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from active import flagmodel, scoring
from active.flagmodel import Calibration, FlagModel, caption_features
from tests.conftest import FLAG_FIXTURES

HELD_OUT = flagmodel.read_caption_csv(FLAG_FIXTURES / "clotho_validation_head.csv")


def _both(
    model: FlagModel, clip: list[str]
) -> list[tuple[tuple[list[float], dict[str, Any]], tuple[list[float], dict[str, Any]]]]:
    caps = [model.caption(t) for t in clip]
    out = []
    for i, caption in enumerate(caps):
        others = caps[:i] + caps[i + 1 :]
        out.append(
            (
                caption_features(caption, others, model),
                caption_features(caption, others, model, reference=True),
            )
        )
    return out


def test_each_caption_of_a_clip_gets_its_reference_features_and_notes(model: FlagModel) -> None:
    assert model.detector is not None
    for clip in HELD_OUT[:40]:
        for (fast, fast_notes), (slow, slow_notes) in _both(model, clip):
            assert fast == pytest.approx(slow, rel=0, abs=1e-9)
            assert fast_notes == slow_notes
            assert Calibration().probability(model.detector.score(fast)) == pytest.approx(
                Calibration().probability(model.detector.score(slow)), rel=0, abs=1e-9
            )


def test_bad_captions_get_their_reference_features(model: FlagModel) -> None:
    """Corrupted clips, where the sources and the missing words matter, a clip with a
    caption twice and one with a caption without content words."""
    import random

    clips = [list(c) for c in HELD_OUT[40:80]]
    bad, changed = flagmodel.corrupt_clips(
        clips,
        share=1.0,
        rng=random.Random(3),
        lazy=("A sound is heard.", "Noise."),
        sources=["dog", "car", "bird", "water", "door", "engine"],
    )
    assert changed
    bad.append([HELD_OUT[0][0], HELD_OUT[0][0], *HELD_OUT[0][1:4]])
    bad.append(["It is.", *HELD_OUT[1][:4]])
    noted: set[str] = set()
    for clip in bad:
        for (fast, fast_notes), (slow, slow_notes) in _both(model, clip):
            assert fast == pytest.approx(slow, rel=0, abs=1e-9)
            assert fast_notes == slow_notes
            noted |= set(fast_notes)
    assert {"unsupported_source", "missing_source", "misfit_source"} <= noted


def test_a_clips_word_similarities_are_computed_once_for_all_its_captions(
    model: FlagModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    of = flagmodel._ClipWords.of

    def counted(captions: list[flagmodel.Caption]) -> flagmodel._ClipWords:
        calls.append(len(captions))
        return of(captions)

    monkeypatch.setattr(flagmodel._ClipWords, "of", counted)
    model._clips.clear()
    clip = HELD_OUT[2]
    _both(model, clip)
    assert calls == [len(clip)]


@pytest.fixture
def two_blas_threads() -> Iterator[tuple[Callable[[], int], Callable[[int], None]]]:
    from active import flagcontext

    if flagcontext._blas_threads is None:
        pytest.skip("NumPy's BLAS is not the OpenBLAS of its wheel")
    get, put = flagcontext._blas_threads
    before = get()
    put(2)
    yield get, put
    put(before)


def test_numpys_blas_runs_on_one_thread_inside_and_as_before_after(
    two_blas_threads: tuple[Callable[[], int], Callable[[int], None]],
) -> None:
    from active.flagcontext import one_blas_thread

    get, _ = two_blas_threads
    with one_blas_thread():
        assert get() == 1
        with one_blas_thread():
            assert get() == 1
        assert get() == 1
    assert get() == 2


def test_the_flag_check_scores_a_caption_on_one_blas_thread(
    model: FlagModel,
    two_blas_threads: tuple[Callable[[], int], Callable[[int], None]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    get, _ = two_blas_threads
    seen = []
    features = flagmodel.caption_features

    def counted(*args: Any, **kwargs: Any) -> tuple[list[float], dict[str, Any]]:
        seen.append(get())
        return features(*args, **kwargs)

    monkeypatch.setattr(flagmodel, "caption_features", counted)
    clip = HELD_OUT[3]
    flagmodel.caption_check(
        text=clip[0],
        others=clip[1:],
        cider=scoring.CiderD([clip]),
        thresholds=scoring.FlagThresholds(),
        model=model,
    )
    assert seen == [1]
    assert get() == 2


def test_the_context_batch_matches_the_reference_with_a_word_twice_in_a_caption(
    model: FlagModel,
) -> None:
    assert model.context is not None
    clip = [model.caption(t).ids for t in HELD_OUT[5]]
    dog = model.index["dog"]
    clip[0] = [*clip[0], dog, dog]
    fast = model.context.clip_features(clip)
    for i, own in enumerate(clip):
        values, worst = model.context.features(own, clip[:i] + clip[i + 1 :])
        assert fast[i][1] == worst
        assert fast[i][0] == pytest.approx(values, rel=0, abs=1e-9)
