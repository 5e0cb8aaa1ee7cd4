"""Corpora in and out: imports of existing caption lists, versioned export snapshots and
the statistics computed for a project or a snapshot.

A project's corpus is its approved captions: crowd captions of its batches whose assignment
was approved, plus the captions imported into it. An import puts its clips into one subset
per format ("audiocaps", "clotho") with the split it was given; the CorpusImport rows mark
those subsets, so exports and statistics find the imported captions and their splits there.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from curation.models import Split


class CorpusFormat(models.TextChoices):
    AUDIOCAPS = "audiocaps", "AudioCaps CSV"
    CLOTHO = "clotho", "Clotho CSV"
    SYNTHSCENES = "synthscenes", "SynthScenes (generated offline)"
    # captions written in Label Studio: its webhook's annotations and its JSON exports
    LABEL_STUDIO = "label-studio", "Label Studio"


class CorpusImport(models.Model):
    """One caption file imported into a project (kept as the provenance of its captions)."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="corpus_imports"
    )
    subset = models.ForeignKey(
        "curation.Subset", on_delete=models.CASCADE, related_name="corpus_imports"
    )
    format = models.CharField(max_length=12, choices=CorpusFormat.choices)
    split = models.CharField(max_length=5, choices=Split.choices)
    file_name = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64)
    rows = models.PositiveIntegerField()
    clips_created = models.PositiveIntegerField()
    captions_created = models.PositiveIntegerField()
    captions_existing = models.PositiveIntegerField()
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    imported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-imported_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(format__in=CorpusFormat.values), name="corpusimport_format_valid"
            ),
            models.CheckConstraint(
                condition=Q(split__in=Split.values), name="corpusimport_split_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.format}, {self.split}) into {self.project}"


class Snapshot(models.Model):
    """An immutable, numbered export of a project's approved captions.

    The files are written once by the snapshot_build job and stored as one zip archive;
    `manifest` lists every file with its size and SHA-256, the counts, the recipes of the
    subsets involved and the post-processing pipeline versions. A ready snapshot is never
    rewritten: a new export is a new version.
    """

    class Format(models.TextChoices):
        AUDIOCAPS = "audiocaps", "AudioCaps CSV"
        CLOTHO = "clotho", "Clotho CSV"
        JSONL = "jsonl", "JSON lines (for training)"

    class Text(models.TextChoices):
        RAW = "raw", "Raw (as written, with reviewers' fixes)"
        PROCESSED = "processed", "Post-processed"

    class State(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Licence(models.TextChoices):
        # Hugging Face's licence identifiers, written into the dataset card and metadata
        CC_BY_4 = "cc-by-4.0", "CC BY 4.0"
        CC_BY_SA_4 = "cc-by-sa-4.0", "CC BY-SA 4.0"
        CC_BY_NC_4 = "cc-by-nc-4.0", "CC BY-NC 4.0"
        CC_BY_NC_SA_4 = "cc-by-nc-sa-4.0", "CC BY-NC-SA 4.0"
        CC0 = "cc0-1.0", "CC0 1.0 (public domain)"
        ODC_BY = "odc-by", "ODC-By 1.0"
        OTHER = "other", "Other (say which in the card)"

    project = models.ForeignKey("core.Project", on_delete=models.CASCADE, related_name="snapshots")
    version = models.PositiveIntegerField()
    format = models.CharField(max_length=10, choices=Format.choices)
    text = models.CharField(max_length=10, choices=Text.choices, default=Text.RAW)
    splits = models.JSONField(default=list)  # e.g. ["train", "val", "test"]
    # The clips' audio goes into the archive too (Clotho or Hugging Face audiofolder layout,
    # with a dataset card); otherwise only the caption files and the manifest.
    with_audio = models.BooleanField(default=False)
    licence = models.CharField(max_length=20, choices=Licence.choices, default=Licence.CC_BY_4)
    state = models.CharField(max_length=10, choices=State.choices, default=State.BUILDING)
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # {split: {"clips": n, "captions": n}}, with "missing_audio": n in an audio snapshot
    counts = models.JSONField(default=dict, blank=True)
    manifest = models.JSONField(default=dict, blank=True)
    archive = models.FileField(upload_to="snapshots/", blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="snapshot_version_once"),
            models.CheckConstraint(
                condition=Q(format__in=["audiocaps", "clotho", "jsonl"]),
                name="snapshot_format_valid",
            ),
            models.CheckConstraint(
                condition=Q(text__in=["raw", "processed"]), name="snapshot_text_valid"
            ),
            models.CheckConstraint(
                condition=Q(state__in=["building", "ready", "failed"]), name="snapshot_state_valid"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="snapshot_version_positive"),
            models.CheckConstraint(
                condition=Q(
                    licence__in=[
                        "cc-by-4.0",
                        "cc-by-sa-4.0",
                        "cc-by-nc-4.0",
                        "cc-by-nc-sa-4.0",
                        "cc0-1.0",
                        "odc-by",
                        "other",
                    ]
                ),
                name="snapshot_licence_valid",
            ),
            models.CheckConstraint(
                condition=~Q(state="ready")
                | (~Q(archive="") & ~Q(archive_sha256="") & Q(finished_at__isnull=False)),
                name="snapshot_ready_has_archive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project} v{self.version} ({self.format}, {self.text})"

    def get_absolute_url(self) -> str:
        return reverse("snapshot_detail", args=[self.project.slug, self.version])

    @property
    def files(self) -> list[dict[str, object]]:
        return list(self.manifest.get("files", []))

    @property
    def total_captions(self) -> int:
        return sum(int(c.get("captions", 0)) for c in self.counts.values())

    @property
    def missing_audio(self) -> int:
        """Clips left out of an audio snapshot because their audio was missing or unreadable."""
        return sum(int(c.get("missing_audio", 0)) for c in self.counts.values())


class CorpusStatistics(models.Model):
    """Statistics of a project's corpus at one moment, or of one snapshot (AudioCaps
    Tables 1 and 5), with the two charts drawn from them."""

    project = models.ForeignKey(
        "core.Project", on_delete=models.CASCADE, related_name="corpus_statistics"
    )
    snapshot = models.ForeignKey(
        Snapshot, null=True, blank=True, on_delete=models.CASCADE, related_name="statistics"
    )
    data = models.JSONField(default=dict)
    length_chart = models.FileField(upload_to="statistics/", blank=True)
    label_chart = models.FileField(upload_to="statistics/", blank=True)
    job = models.ForeignKey(
        "core.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "corpus statistics"
        verbose_name_plural = "corpus statistics"
        ordering = ["-computed_at", "-id"]
        indexes = [
            # the statistics page: the latest computation for the project (or a snapshot)
            models.Index(fields=["project", "snapshot", "-computed_at"], name="corpusstats_latest"),
        ]

    def __str__(self) -> str:
        what = f"snapshot v{self.snapshot.version}" if self.snapshot else "live corpus"
        return f"statistics of {self.project} ({what}) at {self.computed_at:%Y-%m-%d %H:%M}"
