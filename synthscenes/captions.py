"""The SynthScenes caption grammar: AudioCaps-style captions generated from a scene's events.

Present tense, no "there is", sentence case, no final period; order words ("followed by",
"then", "before") for sequences and "while", "as", "with" for overlaps; loudness, distance
and count words. Sequences appear in both orders ("A siren wails followed by a dog barking"
and the reverse) and beeps differ only in pitch, so a model has to attend to time and
frequency.
"""

from __future__ import annotations

import re

import numpy as np

from synthscenes.events import EVENT_TYPES
from synthscenes.scenes import SceneEvent

_COUNT_WORDS = {2: "twice", 3: "three times"}


def _verb_phrase(event: SceneEvent, rng: np.random.Generator, form: int) -> str:
    """Verb, then manner ("loudly"), then count ("twice"), then place ("in the distance"):
    "barks loudly twice", "knocks softly and repeatedly", "rings twice in the distance"."""
    kind = EVENT_TYPES[event.type]
    phrase = kind.verbs[rng.integers(0, len(kind.verbs))][form]
    count = ""
    if kind.countable:
        if event.count in _COUNT_WORDS:
            count = _COUNT_WORDS[event.count]
        elif event.count >= 4:
            count = str(rng.choice(["repeatedly", "several times", "many times"]))
        elif rng.random() < 0.3:
            count = "once"
    manner = place = ""
    if event.distant:
        place = str(rng.choice(["in the distance", "far away", "from a distance"]))
    elif event.level == "loud" and rng.random() < 0.75:
        manner = "loudly"
    elif event.level == "quiet" and rng.random() < 0.75:
        manner = str(rng.choice(["quietly", "softly", "faintly"]))
    if manner and count == "repeatedly":
        manner, count = f"{manner} and repeatedly", ""
    return " ".join(w for w in (phrase, manner, count, place) if w)


def _clause(event: SceneEvent, rng: np.random.Generator, form: int = 0) -> str:
    """form 0: "a dog barks twice"; form 1: "a dog barking twice"."""
    kind = EVENT_TYPES[event.type]
    subject = kind.subjects[rng.integers(0, len(kind.subjects))]
    return f"{subject} {_verb_phrase(event, rng, form)}"


def _background_clause(event: SceneEvent, rng: np.random.Generator, form: int) -> str:
    clause = _clause(event, rng, form)
    return clause + str(rng.choice([" in the background", " in the background", ""]))


def caption(structure: str, events: list[SceneEvent], rng: np.random.Generator) -> str:
    """One AudioCaps-style caption of a planned scene."""
    fg = [e for e in events if e.level != "background"]
    bg = [e for e in events if e.level == "background"]
    choice = int(rng.integers(0, 4))
    if structure == "single":
        text = _clause(fg[0], rng, 1 if choice == 0 else 0)
    elif structure == "overlap":
        a, b = (fg[0], fg[1]) if rng.random() < 0.5 else (fg[1], fg[0])
        text = [
            f"{_clause(a, rng)} while {_clause(b, rng)}",
            f"{_clause(a, rng)} as {_clause(b, rng)}",
            f"{_clause(a, rng)} with {_clause(b, rng, 1)}",
            f"{_clause(a, rng)} and {_clause(b, rng)} at the same time",
        ][choice]
    elif structure == "background":
        f, b = fg[0], bg[0]
        text = [
            f"{_clause(f, rng)} while {_background_clause(b, rng, 0)}",
            f"{_clause(b, rng)} as {_clause(f, rng)}",
            f"{_clause(f, rng)} with {_background_clause(b, rng, 1)}",
            f"{_clause(f, rng)} over {_clause(b, rng, 1)}",
        ][choice]
    else:
        text = _sequence(fg, rng, choice)
        if structure == "sequence_background":
            b = bg[0]
            if rng.random() < 0.5:
                text = f"{text} while {_background_clause(b, rng, 0)}"
            else:
                text = f"{_clause(b, rng)} as {text}"
    return text[0].upper() + text[1:]


def _sequence(fg: list[SceneEvent], rng: np.random.Generator, choice: int) -> str:
    if len(fg) == 2:
        a, b = fg
        return [
            f"{_clause(a, rng)} followed by {_clause(b, rng, 1)}",
            f"{_clause(a, rng)}, then {_clause(b, rng)}",
            f"{_clause(a, rng)} and then {_clause(b, rng)}",
            f"{_clause(a, rng)} before {_clause(b, rng)}",
        ][choice]
    a, b, c = fg
    return [
        f"{_clause(a, rng)} followed by {_clause(b, rng, 1)} and then {_clause(c, rng, 1)}",
        f"{_clause(a, rng)}, then {_clause(b, rng)}, and then {_clause(c, rng)}",
        f"{_clause(a, rng)} and then {_clause(b, rng)} followed by {_clause(c, rng, 1)}",
        f"{_clause(a, rng)} before {_clause(b, rng)} and then {_clause(c, rng)}",
    ][choice]


def captions_for(
    structure: str, events: list[SceneEvent], rng: np.random.Generator, n: int
) -> list[str]:
    """`n` different paraphrases (fewer only if the templates cannot make that many)."""
    out: list[str] = []
    for _ in range(50 * n):
        text = caption(structure, events, rng)
        if text not in out:
            out.append(text)
            if len(out) == n:
                break
    return out


def mentions_in_order(text: str, events: list[SceneEvent]) -> bool:
    """Whether `text` mentions the foreground `events` in their time order (by each type's
    cue word)."""
    positions = []
    for event in events:
        found = re.search(EVENT_TYPES[event.type].cue, text, flags=re.IGNORECASE)
        if found is None:
            return False
        positions.append(found.start())
    return positions == sorted(positions)
