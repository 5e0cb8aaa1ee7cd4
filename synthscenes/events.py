"""The SynthScenes event table: each event type's sound, AudioSet labels, caption words
and timing (``EVENT_TYPES``), and the AudioSet names of those labels (``LABEL_NAMES``).

Each event type maps to real AudioSet labels (mids from the ontology), so word hints and
label-based models work on SynthScenes.
"""

from __future__ import annotations

from dataclasses import dataclass

import synthscenes.sounds as sounds
from synthscenes.sounds import Render


@dataclass(frozen=True)
class EventType:
    key: str  # stable id, stored with each scene's events
    mids: tuple[str, ...]  # AudioSet label ids (ontology.json), most specific first
    subjects: tuple[str, ...]  # caption subjects ("a dog", "rain")
    verbs: tuple[tuple[str, str], ...]  # (third person present, -ing form) phrases
    cue: str  # regex matching every caption phrase of this type (tests use it)
    render: Render
    countable: bool  # repeated bursts (barks, beeps) counted in captions
    period: tuple[float, float] = (0.5, 0.8)  # seconds per burst when countable
    seconds: tuple[float, float] = (1.5, 5.0)  # duration range when not countable
    background: bool = False  # may fill a whole scene, quietly, behind other events


EVENT_TYPES: dict[str, EventType] = {
    e.key: e
    for e in (
        EventType(
            "beep_high",
            ("/m/02fs_r",),
            ("a machine", "a device", "an electronic device"),
            (
                ("beeps at a high pitch", "beeping at a high pitch"),
                ("gives high-pitched beeps", "giving high-pitched beeps"),
                ("emits a high beep", "emitting a high beep"),
            ),
            r"\bhigh",
            sounds.beep((1800.0, 3000.0)),
            countable=True,
            period=(0.4, 0.8),
        ),
        EventType(
            "beep_low",
            ("/m/02fs_r",),
            ("a machine", "a device", "an electronic device"),
            (
                ("beeps at a low pitch", "beeping at a low pitch"),
                ("gives low-pitched beeps", "giving low-pitched beeps"),
                ("emits a low beep", "emitting a low beep"),
            ),
            r"\blow",
            sounds.beep((350.0, 650.0)),
            countable=True,
            period=(0.4, 0.8),
        ),
        EventType(
            "siren",
            ("/m/03kmc9",),
            ("a siren", "an emergency siren"),
            (("wails", "wailing"), ("blares", "blaring"), ("sounds", "sounding")),
            r"\bsiren",
            sounds.siren,
            countable=False,
            seconds=(2.0, 6.0),
        ),
        EventType(
            "speech_man",
            ("/m/05zppz", "/m/09x0r"),
            ("a man", "a male voice"),
            (("speaks", "speaking"), ("talks", "talking")),
            r"\b(man|male)\b",
            sounds.speech((95.0, 140.0), 1.0),
            countable=False,
            seconds=(1.5, 5.0),
        ),
        EventType(
            "speech_woman",
            ("/m/02zsn", "/m/09x0r"),
            ("a woman", "a female voice"),
            (("speaks", "speaking"), ("talks", "talking")),
            r"\b(woman|female)\b",
            sounds.speech((185.0, 250.0), 1.17),
            countable=False,
            seconds=(1.5, 5.0),
        ),
        EventType(
            "dog",
            ("/m/05tny_", "/m/0bt9lr"),
            ("a dog", "a small dog"),
            (("barks", "barking"),),
            r"\bdog",
            sounds.bark,
            countable=True,
            period=(0.45, 0.8),
        ),
        EventType(
            "bird",
            ("/m/07pggtn", "/m/015p6"),
            ("a bird", "a small bird"),
            (("chirps", "chirping"), ("tweets", "tweeting"), ("sings", "singing")),
            r"\bbird",
            sounds.chirps,
            countable=False,
            seconds=(1.0, 4.0),
        ),
        EventType(
            "telephone",
            ("/m/07pp8cl", "/m/07cx4"),
            ("a telephone", "a phone"),
            (("rings", "ringing"),),
            r"\b(tele)?phone",
            sounds.telephone,
            countable=True,
            period=(1.6, 2.2),
        ),
        EventType(
            "knock",
            ("/m/07r4wb8",),
            ("someone", "a person"),
            (("knocks on a door", "knocking on a door"), ("knocks", "knocking")),
            r"\bknock",
            sounds.knock,
            countable=True,
            period=(0.22, 0.35),
        ),
        EventType(
            "horn",
            ("/m/0912c9",),
            ("a car horn", "a vehicle horn"),
            (("honks", "honking"), ("sounds", "sounding")),
            r"\bhorn",
            sounds.horn,
            countable=True,
            period=(0.6, 1.0),
        ),
        EventType(
            "hammer",
            ("/m/03l9g",),
            ("someone", "a person"),
            (("hammers", "hammering"), ("hammers on metal", "hammering on metal")),
            r"\bhammer",
            sounds.hammer,
            countable=True,
            period=(0.4, 0.7),
        ),
        EventType(
            "clapping",
            ("/m/0l15bq",),
            ("someone", "a person"),
            (("claps", "clapping"), ("claps their hands", "clapping their hands")),
            r"\bclap",
            sounds.clapping,
            countable=True,
            period=(0.25, 0.4),
        ),
        EventType(
            "thunder",
            ("/m/0ngt1",),
            ("thunder",),
            (("rumbles", "rumbling"), ("roars", "roaring"), ("crashes", "crashing")),
            r"\bthunder",
            sounds.thunder,
            countable=False,
            seconds=(1.5, 4.0),
        ),
        EventType(
            "rain",
            ("/m/06mb1",),
            ("rain",),
            (
                ("falls", "falling"),
                ("pours down", "pouring down"),
                ("patters on a roof", "pattering on a roof"),
            ),
            r"\brain",
            sounds.rain,
            countable=False,
            seconds=(2.0, 6.0),
            background=True,
        ),
        EventType(
            "wind",
            ("/m/03m9d0z",),
            ("wind", "a strong wind"),
            (("blows", "blowing"), ("gusts", "gusting"), ("howls", "howling")),
            r"\bwind\b",
            sounds.wind,
            countable=False,
            seconds=(2.0, 6.0),
            background=True,
        ),
        EventType(
            "engine",
            ("/m/02mk9", "/m/07pb8fc"),
            ("an engine", "a car engine", "a vehicle engine"),
            (("idles", "idling"), ("hums", "humming"), ("runs", "running")),
            r"\bengine",
            sounds.engine,
            countable=False,
            seconds=(1.5, 6.0),
            background=True,
        ),
        EventType(
            "water",
            ("/m/02jz0l", "/m/0838f"),
            ("water",),
            (
                ("runs from a tap", "running from a tap"),
                ("flows from a faucet", "flowing from a faucet"),
                ("trickles from a tap", "trickling from a tap"),
            ),
            r"\bwater",
            sounds.water,
            countable=False,
            seconds=(1.5, 5.0),
            background=True,
        ),
        EventType(
            "ticking",
            ("/m/07qjznt", "/m/01x3z"),
            ("a clock",),
            (("ticks", "ticking"), ("ticks steadily", "ticking steadily")),
            r"\btick",
            sounds.ticking,
            countable=False,
            seconds=(1.5, 5.0),
            background=True,
        ),
    )
}

FOREGROUND = tuple(k for k, e in EVENT_TYPES.items() if not e.background)
BACKGROUND = tuple(k for k, e in EVENT_TYPES.items() if e.background)

# AudioSet mid -> its name in the ontology (tests check them against ontology.json)
LABEL_NAMES = {
    "/m/02fs_r": "Beep, bleep",
    "/m/03kmc9": "Siren",
    "/m/05zppz": "Male speech, man speaking",
    "/m/02zsn": "Female speech, woman speaking",
    "/m/09x0r": "Speech",
    "/m/05tny_": "Bark",
    "/m/0bt9lr": "Dog",
    "/m/07pggtn": "Chirp, tweet",
    "/m/015p6": "Bird",
    "/m/07pp8cl": "Telephone bell ringing",
    "/m/07cx4": "Telephone",
    "/m/07r4wb8": "Knock",
    "/m/0912c9": "Vehicle horn, car horn, honking",
    "/m/03l9g": "Hammer",
    "/m/0l15bq": "Clapping",
    "/m/0ngt1": "Thunder",
    "/m/06mb1": "Rain",
    "/m/03m9d0z": "Wind",
    "/m/02mk9": "Engine",
    "/m/07pb8fc": "Idling",
    "/m/02jz0l": "Water tap, faucet",
    "/m/0838f": "Water",
    "/m/07qjznt": "Tick",
    "/m/01x3z": "Clock",
}
