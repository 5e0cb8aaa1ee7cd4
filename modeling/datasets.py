"""Training data from a snapshot: every run names exactly what it trained on.

A JSONL snapshot (corpus.Snapshot) lists each approved caption with its clip, the clip's
audio in storage, its split and its AudioSet labels. Here it becomes
`modeling.ml.data.CaptionItem`s: log-mel features from the feature cache (keyed by the
clip's content hash and the feature config), token ids from a vocabulary built on the
training split, and attribute words (TopDown) from the clip's labels or from its nearest
training clip. `prepare_run_data(run)` reads a TrainingRun's snapshot with its features (and
video) once for every caller: training, and scoring a run's checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.db.models.fields.files import FieldFile

from core.progress import ProgressFn, no_progress
from corpus.models import Snapshot
from curation.models import Clip, Label
from modeling.ml import registry, retrieval
from modeling.ml.config import RunConfig
from modeling.ml.data import CaptionItem
from modeling.ml.features import FeatureCache, FeatureConfig
from modeling.ml.keywords import KeywordVocabulary
from modeling.ml.video import VideoConfig, VideoFeatureCache
from modeling.ml.vocab import Vocabulary, tokenize
from modeling.models import TrainingRun

log = logging.getLogger(__name__)
# attribute words kept per clip (TopDown's batch["attributes"])
MAX_ATTRIBUTES = 16


@dataclass
class ClipCaptions:
    """One clip of a split with all its captions (the references of evaluation)."""

    clip_id: int
    texts: list[str]
    labels: list[str]  # AudioSet mids
    audio: str  # storage name
    features: torch.Tensor | None = None
    video: torch.Tensor | None = None  # (Tv, Fv) video features; Tv = 0 without a video
    keyword_targets: torch.Tensor | None = None  # (N,) multi-hot keywords (MAAC)


@dataclass
class SplitData:
    clips: list[ClipCaptions] = field(default_factory=list)

    @property
    def captions(self) -> int:
        return sum(len(c.texts) for c in self.clips)


def snapshot_splits(snapshot: Snapshot) -> dict[str, SplitData]:
    """The snapshot's captions grouped by split and clip, read back from its archive."""
    if snapshot.state != Snapshot.State.READY:
        raise ValidationError(f"Snapshot v{snapshot.version} is {snapshot.state}, not ready.")
    if snapshot.format != Snapshot.Format.JSONL:
        raise ValidationError(
            f"Snapshot v{snapshot.version} is a {snapshot.get_format_display()} export; "
            "training reads JSON-lines snapshots (they carry the audio and labels)."
        )
    out: dict[str, SplitData] = {}
    with snapshot.archive.open("rb") as stored, zipfile.ZipFile(stored) as archive:
        for entry in snapshot.files:
            split = str(entry["split"])
            by_clip: dict[int, ClipCaptions] = {}
            with archive.open(str(entry["path"])) as handle:
                for number, line in enumerate(handle, start=1):
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValidationError(f"{entry['path']} line {number}: {exc}") from None
                    text = record.get("train_text") or record["text"]
                    clip = by_clip.get(record["clip_id"])
                    if clip is None:
                        clip = by_clip[record["clip_id"]] = ClipCaptions(
                            clip_id=record["clip_id"],
                            texts=[],
                            labels=list(record.get("labels") or []),
                            audio=record.get("audio") or "",
                        )
                    clip.texts.append(text)
            out[split] = SplitData(clips=list(by_clip.values()))
    return out


@contextmanager
def local_file(name: str) -> Iterator[Path]:
    """A path on this machine for a stored file: the file itself on disk storage, a
    temporary copy from a bucket."""
    try:
        yield Path(default_storage.path(name))
        return
    except NotImplementedError:
        pass
    with tempfile.TemporaryDirectory(prefix="earmark-audio-") as tmp:
        target = Path(tmp) / Path(name).name
        with default_storage.open(name, "rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        yield target


def copy_from_storage(stored: FieldFile, target: Path) -> bool:
    """Copies a stored file (a run's checkpoint) to `target`; False when storage lacks it."""
    try:
        with stored.open("rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    except FileNotFoundError:
        return False
    return True


def feature_cache(config: FeatureConfig) -> FeatureCache:
    return FeatureCache(Path(settings.FEATURE_CACHE_DIR), config)


@dataclass
class AttachedFeatures:
    """What attach_features left out."""

    dropped: dict[str, int]  # clips without audio (not fetched yet) per split
    unreadable: list[str]  # one sentence per clip whose stored audio could not be read


def _unreadable_audio(clip: ClipCaptions, split: str, exc: Exception) -> str:
    """The warning for a clip whose audio failed to load; a stored file that is missing,
    empty or not audio also marks its clip failed (curation.services.clip_mark_broken), so
    it is no longer offered for captioning either."""
    from curation.services import clip_audio_problem, clip_mark_broken

    stored = Clip.objects.filter(pk=clip.clip_id).first()
    problem = clip_audio_problem(stored) if stored is not None else None
    if stored is not None and problem is not None:
        clip_mark_broken(clip=stored, reason=problem)
        return f"Clip {clip.clip_id} ({split}) left out: {problem}."
    return f"Clip {clip.clip_id} ({split}) left out: its audio could not be read ({exc})."


def _clip_features(cache: FeatureCache, name: str, sha: str) -> torch.Tensor:
    """The features of the stored audio `name`; ValueError naming the stored file (not
    its local path, a temporary copy or one under MEDIA_ROOT) when it cannot be decoded."""
    with local_file(name) as path:
        try:
            return cache.get_or_compute(path, sha)
        except ValueError as exc:
            raise ValueError(str(exc).replace(str(path), name)) from None


def attach_features(
    splits: dict[str, SplitData], config: FeatureConfig, *, progress: ProgressFn = no_progress
) -> AttachedFeatures:
    """Fills every clip's features from the cache, extracting what is missing. Clips
    without audio (not fetched yet) are dropped from their split and counted; clips whose
    stored audio cannot be read (deleted, empty, damaged) are left out with a warning."""
    cache = feature_cache(config)
    hashes = dict(
        Clip.objects.filter(
            pk__in=[c.clip_id for data in splits.values() for c in data.clips]
        ).values_list("pk", "content_sha256")
    )
    total = sum(len(data.clips) for data in splits.values())
    done = 0
    out = AttachedFeatures(dropped={}, unreadable=[])
    for split, data in splits.items():
        kept = []
        for clip in data.clips:
            done += 1
            sha = hashes.get(clip.clip_id, "")
            if not clip.audio or not sha:
                out.dropped[split] = out.dropped.get(split, 0) + 1
                continue
            try:
                clip.features = _clip_features(cache, clip.audio, sha)
            except (ValueError, OSError) as exc:  # soundfile's and storage's complaints
                warning = _unreadable_audio(clip, split, exc)
                log.warning("%s", warning)
                out.unreadable.append(warning)
                continue
            kept.append(clip)
            if done % 50 == 0 or done == total:
                progress(done, total, "features")
        data.clips = kept
    return out


def video_cache(config: VideoConfig) -> VideoFeatureCache:
    return VideoFeatureCache(Path(settings.FEATURE_CACHE_DIR), config)


def clip_video_names(clip_ids: list[int]) -> dict[int, tuple[str, bool]]:
    """The stored video each clip's video features come from, and whether it is the
    sharper features video a recipe asked the fetch for (Clip.video_features), preferred
    to the ≈144p hint (Clip.video); ("", False) when the clip has neither."""
    rows = Clip.objects.filter(pk__in=clip_ids).values_list("pk", "video_features", "video")
    return {pk: (sharp, True) if sharp else (hint or "", False) for pk, sharp, hint in rows}


def clip_video(cache: VideoFeatureCache, name: str) -> torch.Tensor:
    """The video features of a clip's stored video `name`; (0, Fv) without one.
    Raises ValueError naming the file when ffmpeg cannot decode it."""
    if not name:
        return cache.empty()
    with local_file(name) as path:
        return cache.get_or_compute(path)


def attach_video(
    splits: dict[str, SplitData], config: VideoConfig, *, progress: ProgressFn = no_progress
) -> dict[str, int]:
    """Fills every clip's video features from its video (see clip_video_names: the
    features video when fetched, else the hint), cached by the video file's hash and the
    config. A clip without a video, or whose video cannot be decoded, gets an empty video
    (the models read only its audio); both are counted, and so are sharper videos used."""
    cache = video_cache(config)
    clips = [clip for data in splits.values() for clip in data.clips]
    names = clip_video_names([c.clip_id for c in clips])
    counts = {"with_video": 0, "without_video": 0, "unreadable_video": 0, "features_video": 0}
    for done, clip in enumerate(clips, start=1):
        name, sharp = names.get(clip.clip_id, ("", False))
        try:
            clip.video = clip_video(cache, name)
        except ValueError as exc:
            log.warning("clip %s: %s; training on its audio alone", clip.clip_id, exc)
            clip.video = cache.empty()
            counts["unreadable_video"] += 1
        else:
            counts["with_video" if clip.video.size(0) else "without_video"] += 1
            counts["features_video"] += bool(sharp and clip.video.size(0))
        if done % 50 == 0 or done == len(clips):
            progress(done, len(clips), "video")
    return counts


def label_names(splits: dict[str, SplitData]) -> dict[str, str]:
    mids = {mid for data in splits.values() for clip in data.clips for mid in clip.labels}
    return dict(Label.objects.filter(mid__in=mids).values_list("mid", "name"))


def build_vocabulary(train: SplitData, *, min_count: int, max_length: int) -> Vocabulary:
    if not train.clips:
        raise ValidationError("The snapshot has no training captions with audio.")
    texts = [text for clip in train.clips for text in clip.texts]
    return Vocabulary.build(texts, min_count=min_count, max_length=max_length)


def nearest_training_clips(train: SplitData, others: list[ClipCaptions]) -> list[int]:
    """For each clip of `others`, the index in `train.clips` of the training clip with the
    nearest mean-pooled features (L2), never the clip itself."""
    bank = retrieval.mean_pooled([c.features for c in train.clips])  # type: ignore[misc]
    queries = retrieval.mean_pooled([c.features for c in others])  # type: ignore[misc]
    own = {clip.clip_id: i for i, clip in enumerate(train.clips)}
    return retrieval.nearest(bank, queries, exclude=[own.get(c.clip_id) for c in others])


def attribute_words(
    splits: dict[str, SplitData], *, source: str, names: dict[str, str]
) -> dict[int, list[str]]:
    """Attribute phrases (label names) per clip id: the clip's own labels ("labels", the
    paper's upper bound) or those of its nearest training clip ("retrieval")."""
    out: dict[int, list[str]] = {}
    train = splits.get("train", SplitData())
    for data in splits.values():
        if source == "labels" or len(train.clips) < 2:
            for clip in data.clips:
                out[clip.clip_id] = [names.get(m, "") for m in clip.labels]
            continue
        nearest = nearest_training_clips(train, data.clips)
        for clip, index in zip(data.clips, nearest, strict=True):
            out[clip.clip_id] = [names.get(m, "") for m in train.clips[index].labels]
    return out


def keyword_targets(train: SplitData, *, size: int) -> tuple[KeywordVocabulary, int]:
    """MAAC's keyword vocabulary (the `size` most frequent nouns and verbs of the training
    captions, POS-tagged and lemmatised by spaCy) and each training clip's multi-hot target,
    set on the clip; returns the vocabulary and how many clips have no keyword at all."""
    from postprocessing.nlp import PosPipelineUnavailable, pos_pipeline

    try:
        nlp = pos_pipeline()
    except PosPipelineUnavailable as exc:
        raise ValidationError(f"MAAC's keywords need POS tags: {exc}") from None
    texts = [text for clip in train.clips for text in clip.texts]
    tagged = [[(t.text, t.pos_, t.lemma_) for t in doc] for doc in nlp.pipe(texts, batch_size=256)]
    try:
        keywords = KeywordVocabulary.build(tagged, size=size)
    except ValueError as exc:
        raise ValidationError(f"Keyword vocabulary: {exc}.") from None
    start = empty = 0
    for clip in train.clips:
        clip.keyword_targets = keywords.targets(tagged[start : start + len(clip.texts)])
        start += len(clip.texts)
        empty += int(clip.keyword_targets.sum() == 0)
    return keywords, empty


def caption_items(
    data: SplitData,
    vocab: Vocabulary,
    *,
    attributes: dict[int, list[str]] | None = None,
    max_attributes: int = MAX_ATTRIBUTES,
) -> list[CaptionItem]:
    """One training item per caption (clips with several captions appear several times)."""
    items = []
    for clip in data.clips:
        attribute_ids = (
            vocab.encode_words(attributes.get(clip.clip_id, []), limit=max_attributes)
            if attributes
            else []
        )
        for text in clip.texts:
            items.append(
                CaptionItem(
                    features=clip.features,  # type: ignore[arg-type]
                    tokens=vocab.encode(tokenize(text)),
                    clip_id=str(clip.clip_id),
                    attributes=attribute_ids,
                    video=clip.video,
                    keyword_targets=clip.keyword_targets,
                )
            )
    return items


def references(data: SplitData) -> dict[str, list[str]]:
    return {str(clip.clip_id): list(clip.texts) for clip in data.clips}


# A run's data ---------------------------------------------------------------------------


def run_configs(run: TrainingRun) -> tuple[RunConfig, FeatureConfig]:
    """The run's stored RunConfig and FeatureConfig (see modeling.planning.run_spec)."""
    return (
        registry.run_config_from_dict(run.config["run"]),
        FeatureConfig.from_dict(run.config["features"]),
    )


def run_video_config(run: TrainingRun) -> VideoConfig | None:
    """The run's stored VideoConfig; None for a model that reads no video."""
    data = run.config.get("video")
    return VideoConfig.from_dict(data) if data is not None else None


@dataclass
class RunData:
    """A run's snapshot as its model reads it: every split's clips with their features (and
    video, for a model that reads it), and what was left out on the way."""

    run_config: RunConfig
    feature_config: FeatureConfig
    video_config: VideoConfig | None
    splits: dict[str, SplitData]
    dropped_clips: dict[str, int]  # clips without audio per split, left out
    video_counts: dict[str, int]  # see attach_video; empty for a model without video
    # clips left out because their stored audio could not be read (TrainingRun.warnings)
    warnings: list[str] = field(default_factory=list)

    @property
    def train(self) -> SplitData:
        return self.splits.get("train", SplitData())

    @property
    def val(self) -> SplitData | None:
        """The split validation scores: val, else test; None when the snapshot has neither."""
        return self.splits.get("val") or self.splits.get("test")

    def build_vocabulary(self) -> Vocabulary:
        vocab = self.run_config.vocab
        return build_vocabulary(self.train, min_count=vocab.min_count, max_length=vocab.max_length)

    def attribute_phrases(
        self, *, replacing: Mapping[str, SplitData] | None = None
    ) -> dict[int, list[str]] | None:
        """Attribute phrases per clip id of every split (see attribute_words), with the
        splits of `replacing` in place of the run's own; None when the model reads none."""
        source = self.run_config.model.attribute_words_from()
        if source is None:
            return None
        splits = {**self.splits, **(replacing or {})}
        return attribute_words(splits, source=source, names=label_names(splits))

    def with_keyword_targets(self) -> RunConfig:
        """For a model trained on keyword targets (MAAC): sets each training clip's target
        and returns the run config fitted to the keywords found (a corpus may have fewer
        than asked for); the run config as it is for any other model."""
        model = self.run_config.model
        size = model.keyword_targets_size()
        if not size:
            return self.run_config
        keywords, _ = keyword_targets(self.train, size=size)
        return dataclasses.replace(self.run_config, model=model.with_keywords_found(len(keywords)))


def prepare_run_data(run: TrainingRun, *, progress: ProgressFn = no_progress) -> RunData:
    """Reads the run's snapshot and attaches every clip's features, from the feature cache
    or extracted now, and its video features for a model that reads video. Clips without
    audio are left out and counted; clips whose audio cannot be read are left out with a
    warning each, and the run trains on the rest."""
    run_config, feature_config = run_configs(run)
    video_config = run_video_config(run)
    progress(0, 1, "reading the snapshot")
    splits = snapshot_splits(run.snapshot)
    attached = attach_features(splits, feature_config, progress=progress)
    video_counts = (
        attach_video(splits, video_config, progress=progress) if video_config is not None else {}
    )
    return RunData(
        run_config=run_config,
        feature_config=feature_config,
        video_config=video_config,
        splits=splits,
        dropped_clips=attached.dropped,
        video_counts=video_counts,
        warnings=attached.unreadable,
    )


def attribute_ids(phrases: dict[int, list[str]] | None, vocab: Vocabulary) -> dict[int, list[int]]:
    """Attribute phrases per clip id as the model's word ids (at most MAX_ATTRIBUTES)."""
    return {
        clip_id: vocab.encode_words(words, limit=MAX_ATTRIBUTES)
        for clip_id, words in (phrases or {}).items()
    }
