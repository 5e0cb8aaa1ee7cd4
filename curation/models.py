from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from core.models import Project


class SuperCategory(models.TextChoices):
    """AudioCaps' augmented super-categories for word-label hints."""

    ALARM = "alarm", "Alarm"
    MECHANICAL = "mechanical", "Mechanical"
    DOMESTIC = "domestic", "Domestic / home"
    OTHER_THINGS = "other_things", "Other things"
    SOURCE_AMBIGUOUS = "source_ambiguous", "Source-ambiguous"
    ANIMAL = "animal", "Animal"
    NATURAL = "natural", "Natural"
    HUMAN = "human", "Human"


class WordLabel(models.Model):
    """A plain word shown to annotators as a hint ("dog", "siren"), grouping AudioSet labels."""

    name = models.CharField(max_length=80, unique=True)
    super_category = models.CharField(max_length=20, choices=SuperCategory.choices)

    class Meta:
        ordering = ["super_category", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(super_category__in=SuperCategory.values),
                name="wordlabel_super_category_valid",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def super_categories(self) -> list[str]:
        """Every group the word sits under, its own first. Prefetch `extra_categories` with
        many word labels to save a query each."""
        extra = [c.super_category for c in self.extra_categories.all()]
        return [self.super_category, *(c for c in extra if c != self.super_category)]

    @property
    def super_categories_display(self) -> str:
        return ", ".join(SuperCategory(c).label for c in self.super_categories)


class WordLabelExtraCategory(models.Model):
    """A further super-category of a word label: AudioCaps' Figure 7 lists "Hiss" under
    Other things, Source-ambiguous and Animal. WordLabel.super_category is the first one."""

    word_label = models.ForeignKey(
        WordLabel, on_delete=models.CASCADE, related_name="extra_categories"
    )
    super_category = models.CharField(max_length=20, choices=SuperCategory.choices)

    class Meta:
        verbose_name = "word label extra category"
        verbose_name_plural = "word label extra categories"
        ordering = ["pk"]  # as the CSV listed them
        constraints = [
            models.UniqueConstraint(
                fields=["word_label", "super_category"], name="wordlabel_extra_category_once"
            ),
            models.CheckConstraint(
                condition=Q(super_category__in=SuperCategory.values),
                name="wordlabel_extra_category_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.word_label_id} also under {self.super_category}"


class Label(models.Model):
    """An AudioSet ontology class, e.g. /m/0bt9lr "Dog"."""

    mid = models.CharField("AudioSet id", max_length=40, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    citation_uri = models.CharField(max_length=500, blank=True)
    positive_examples = models.JSONField(default=list, blank=True)
    # ontology.json "restrictions": abstract classes group others and are never labels
    # of clips; blacklisted ones are too ambiguous or obscure to rate reliably.
    abstract = models.BooleanField(default=False)
    blacklisted = models.BooleanField(default=False)
    children = models.ManyToManyField("self", symmetrical=False, related_name="parents", blank=True)
    # Researchers' curation flags live per project, in LabelCuration: the ontology is
    # shared by every project and only staff change it (the admin, the imports).
    word_label = models.ForeignKey(
        WordLabel, null=True, blank=True, on_delete=models.SET_NULL, related_name="labels"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def word(self) -> str:
        """The word hint annotators see for this label: its word label ("dog"), or the label's
        own name when it has none. Select `word_label` with the labels to save a query each."""
        return self.word_label.name if self.word_label else self.name


class LabelCuration(models.Model):
    """One project's judgement of a label: what its annotators cannot describe from audio
    alone. The project's recipes exclude labels by these flags; other projects never see
    them. No row means no flag and no note."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="label_curations"
    )
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="curations")
    needs_visuals = models.BooleanField(default=False)
    needs_expertise = models.BooleanField(default=False)
    excluded = models.BooleanField(default=False)
    note = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "label"], name="labelcuration_once_per_project"
            )
        ]

    def __str__(self) -> str:
        return f"{self.label_id} in {self.project_id}"


class Clip(models.Model):
    """A 10 s (or shorter) piece of audio, from YouTube via AudioSet or a local file.

    Who may reach a clip: a clip with a `project` belongs to that project alone (its
    uploads, Clotho imports, SynthScenes), and only that project's subsets may hold it, so
    no other project sees its file name, labels, video hint or captions. A clip without
    one is site-wide: every AudioSet segment (public data: the YouTube id and times, the
    AudioSet labels, what the fetch downloads from YouTube), which any project's recipes
    select, and files staff imported from the command line without a project, which only
    staff's own code puts into a subset. Uploads de-duplicate within their project only:
    the same bytes uploaded by two projects are two clips.
    """

    class Source(models.TextChoices):
        YOUTUBE = "youtube", "YouTube (AudioSet segment)"
        LOCAL = "local", "Local file"

    class SegmentList(models.TextChoices):
        BALANCED = "balanced", "AudioSet balanced train"
        EVAL = "eval", "AudioSet eval"
        UNBALANCED = "unbalanced", "AudioSet unbalanced train"

    class Status(models.TextChoices):
        PENDING = "pending", "Not fetched yet"
        FETCHING = "fetching", "Fetching"
        READY = "ready", "Ready"
        FAILED = "failed", "Fetch failed"
        UNAVAILABLE = "unavailable", "Unavailable at source"

    source = models.CharField(max_length=10, choices=Source.choices)
    # the owner; blank for site-wide clips (see the class docstring). A deleted project's
    # clips are kept, as clips always were, and no project's subsets hold them any more.
    project = models.ForeignKey(
        "core.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="clips"
    )
    # the AudioSet list the segment was first imported from; blank for local files
    segment_list = models.CharField(max_length=10, choices=SegmentList.choices, blank=True)
    youtube_id = models.CharField(max_length=20, blank=True)
    start_seconds = models.DecimalField(max_digits=9, decimal_places=3, default=0)
    end_seconds = models.DecimalField(max_digits=9, decimal_places=3, default=10)
    original_name = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    audio = models.FileField(upload_to="clips/audio/", blank=True)
    video = models.FileField(upload_to="clips/video/", blank=True)
    # a sharper silent video for video features, fetched when the subset's recipe asks for
    # one (RecipeSpec.video_features_height); modeling prefers it to the hint
    video_features = models.FileField(upload_to="clips/video_features/", blank=True)
    peaks = models.JSONField(default=list, blank=True)  # max |amplitude| per bucket, 0..1
    duration_seconds = models.FloatField(null=True, blank=True)
    sample_rate = models.PositiveIntegerField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True)
    fetch_attempts = models.PositiveSmallIntegerField(default=0)
    fetched_at = models.DateTimeField(null=True, blank=True)
    silent = models.BooleanField(default=False)  # flagged: fetched audio is (near) silent
    # when its stored audio was found missing, empty or damaged after the clip was ready
    # (curation.services.clip_mark_broken; the clip is failed since); cleared when a fetch
    # or an import stores it again. Claims pass over HITs holding such a clip.
    media_broken_at = models.DateTimeField(null=True, blank=True)
    labels = models.ManyToManyField(Label, related_name="clips", blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        indexes = [
            # subset building filters clips by the list they came from
            models.Index(fields=["segment_list"], name="clip_segment_list"),
            # every claim excludes HITs holding a broken clip (annotation.claimable_hits):
            # a handful of rows, where a status index would hold millions of pending ones
            models.Index(
                fields=["id"],
                condition=Q(media_broken_at__isnull=False),
                name="clip_media_broken",
            ),
        ]
        constraints = [
            # AudioSet clips are (YouTube id, start); importing a list twice must not duplicate.
            models.UniqueConstraint(
                fields=["youtube_id", "start_seconds"],
                condition=Q(source="youtube"),
                name="clip_youtube_segment_once",
            ),
            # the same audio once per owner: uploads de-duplicate within their project
            models.UniqueConstraint(
                fields=["project", "content_sha256"],
                condition=Q(source="local", project__isnull=False) & ~Q(content_sha256=""),
                name="clip_local_content_once_per_project",
            ),
            models.UniqueConstraint(
                fields=["content_sha256"],
                condition=Q(source="local", project__isnull=True) & ~Q(content_sha256=""),
                name="clip_local_content_once_site_wide",
            ),
            # AudioSet segments are public and shared; nothing of a project's is on them
            models.CheckConstraint(
                condition=Q(source="local") | Q(project__isnull=True), name="clip_youtube_site_wide"
            ),
            models.CheckConstraint(
                condition=Q(source="local") | ~Q(youtube_id=""), name="clip_youtube_has_id"
            ),
            models.CheckConstraint(
                condition=Q(end_seconds__gt=models.F("start_seconds")), name="clip_end_after_start"
            ),
            models.CheckConstraint(
                condition=~Q(status="ready") | ~Q(audio=""), name="clip_ready_has_audio"
            ),
        ]

    def __str__(self) -> str:
        if self.source == self.Source.YOUTUBE:
            return f"{self.youtube_id}@{self.start_seconds:g}"
        return self.original_name or f"clip {self.pk}"

    @staticmethod
    def reachable_by(project: Project) -> Q:
        """The clips a project may hold in its subsets: its own and the site-wide ones."""
        return Q(project__isnull=True) | Q(project=project)


class LabelSourceCount(models.Model):
    """Clips carrying a label, per AudioSet list: a cache of the GROUP BY over the clip-label
    links, because at 2 M clips that aggregate is too slow for every ontology page view.
    `services.label_counts_refresh` rebuilds it (segment imports, repair) and
    `curation.signals` keeps it in step with ORM edits of single clips."""

    # the unique constraint's index starts with the label, so no separate one is needed
    label = models.ForeignKey(
        Label, on_delete=models.CASCADE, related_name="source_counts", db_index=False
    )
    # the clip's Clip.segment_list; blank counts local files
    segment_list = models.CharField(max_length=10, choices=Clip.SegmentList.choices, blank=True)
    clips = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # the refresh's upserts (ON CONFLICT) need this to be unique
            models.UniqueConstraint(fields=["label", "segment_list"], name="labelsourcecount_once")
        ]

    def __str__(self) -> str:
        return f"{self.label_id} {self.segment_list or 'local'}: {self.clips}"


class Recipe(models.Model):
    """How to tailor a subset; `spec` is a curation.recipes.RecipeSpec as JSON."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="recipes")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    spec = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "slug"], name="recipe_slug_per_project")
        ]

    def __str__(self) -> str:
        return self.name


class Split(models.TextChoices):
    TRAIN = "train", "Train"
    VAL = "val", "Validation"
    TEST = "test", "Test"


class Subset(models.Model):
    """The clips one build of a recipe selected, with its report."""

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="subsets")
    recipe = models.ForeignKey(
        Recipe, null=True, blank=True, on_delete=models.SET_NULL, related_name="subsets"
    )
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    spec = models.JSONField(default=dict)  # the recipe as it was when built
    report = models.JSONField(default=dict, blank=True)
    chart = models.FileField(upload_to="subsets/charts/", blank=True)
    built_at = models.DateTimeField(default=timezone.now)
    clips: models.ManyToManyField[Clip, SubsetClip] = models.ManyToManyField(
        Clip, through="SubsetClip", related_name="subsets"
    )

    class Meta:
        ordering = ["-built_at"]
        constraints = [
            models.UniqueConstraint(fields=["project", "slug"], name="subset_slug_per_project")
        ]

    def __str__(self) -> str:
        return self.name


class SubsetClip(models.Model):
    subset = models.ForeignKey(Subset, on_delete=models.CASCADE)
    clip = models.ForeignKey(Clip, on_delete=models.PROTECT)
    split = models.CharField(max_length=5, choices=Split.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subset", "clip"], name="subsetclip_once"),
            models.CheckConstraint(condition=Q(split__in=Split.values), name="subsetclip_split"),
        ]
        indexes = [
            # the subset page and batch publishing read one split of one subset
            models.Index(fields=["subset", "split"], name="subsetclip_subset_split"),
        ]

    def __str__(self) -> str:
        return f"{self.clip} in {self.subset} ({self.split})"
