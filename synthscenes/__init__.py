"""SynthScenes: a generator of deterministic 10 s scenes of synthetic sound events with
AudioCaps-style captions and short video hints, so captioners can be trained and evaluated
offline. It is a data generator, not a model, and imports neither Django nor PyTorch.

A scene is made from `(seed, index)` alone (``generate_scene``): one to three foreground
events (beeps of two pitches, a siren sweep, speech-like formant babble from a man or a
woman, dog barks, bird chirps, a telephone, knocks, a car horn, hammering, clapping,
thunder) in sequence or at the same time, sometimes over a background (rain, wind, an idling
engine, running water, a ticking clock); loudness, distance, repetition counts and order
vary. Each event type maps to real AudioSet labels, so word hints and label-based models
work. ``prepare_synthscenes`` writes a set of scenes to a folder (WAVs, MP4s, a manifest).

Modules, one topic each: ``sounds`` (the sound synthesizer, also used by the offline demo's
clips), ``events`` (the event table), ``scenes`` (what a scene holds, planning and mixing),
``captions`` (the caption grammar), ``video`` (video planning and rendering), ``generate``
(scene ``index`` of set ``seed``), ``io`` (WAV and MP4 files) and ``recipe``
(``prepare_synthscenes``).
"""

from __future__ import annotations

from synthscenes.captions import caption, captions_for, mentions_in_order
from synthscenes.events import BACKGROUND, EVENT_TYPES, FOREGROUND, LABEL_NAMES, EventType
from synthscenes.generate import generate_scene, generate_scenes
from synthscenes.io import write_scene, write_scene_video, write_video, write_wav
from synthscenes.recipe import PreparedScene, prepare_synthscenes
from synthscenes.scenes import (
    LEVELS,
    REFERENCE_RMS,
    SAMPLE_RATE,
    SCENE_SECONDS,
    SEQUENTIAL,
    STRUCTURES,
    Scene,
    SceneEvent,
    VisualEvent,
    plan_scene,
    render_scene,
)
from synthscenes.video import (
    BLANK,
    SCALES,
    TINTS,
    VIDEO_FPS,
    VIDEO_SIZE,
    VISUALS,
    plan_visuals,
    render_video,
)

__all__ = [
    "BACKGROUND",
    "BLANK",
    "EVENT_TYPES",
    "FOREGROUND",
    "LABEL_NAMES",
    "LEVELS",
    "REFERENCE_RMS",
    "SAMPLE_RATE",
    "SCALES",
    "SCENE_SECONDS",
    "SEQUENTIAL",
    "STRUCTURES",
    "TINTS",
    "VIDEO_FPS",
    "VIDEO_SIZE",
    "VISUALS",
    "EventType",
    "PreparedScene",
    "Scene",
    "SceneEvent",
    "VisualEvent",
    "caption",
    "captions_for",
    "generate_scene",
    "generate_scenes",
    "mentions_in_order",
    "plan_scene",
    "plan_visuals",
    "prepare_synthscenes",
    "render_scene",
    "render_video",
    "write_scene",
    "write_scene_video",
    "write_video",
    "write_wav",
]
