"""Label Studio, the workflows behind the ML-backend endpoints (active/labelstudio.py):
reading its label configs and tasks, the per-project secret in the backend URL that
authenticates its webhook, and the captions written there.

A caption written in Label Studio (a TextArea of an annotation on a task naming a clip of
the project) becomes an imported caption, like those of an AudioCaps or Clotho file: it
lives in the project's "Label Studio (imported)" subset (corpus format "label-studio"),
with the split the clip has elsewhere in the project, so the corpus, its exports and
retraining read it. Its external id, "label-studio/<Label Studio project>/<annotation>#<n>",
names the annotation it came from: a repeated event changes nothing, an update replaces the
texts and a deletion removes them.
"""

from __future__ import annotations

import hmac
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from active.models import ProjectConfig, new_labelstudio_secret
from active.services.config import project_config
from annotation.models import Caption
from core.models import Project, Role
from core.services import require_role
from corpus.models import CorpusFormat, CorpusImport
from corpus.services.imports import import_subset, import_subset_report
from curation.models import Subset, SubsetClip
from curation.queries import project_clips

MAX_CONFIG_CHARS = 200_000
AUDIO_URL = re.compile(r"/clips/([0-9]+)/audio")
CLIP_KEYS = ("clip_id", "earmark_clip_id")
MAX_CLIP_ID = 2**63 - 1  # a BigAutoField; a larger number overflows the database's integer
# a clip id as text: ASCII digits ("²" and "٢٦" are digits to str.isdigit), with the ".0"
# a spreadsheet or Label Studio's CSV import gives a whole number
CLIP_ID_TEXT = re.compile(r"([0-9]+)(?:\.0*)?", re.ASCII)
# the CorpusImport row that stands for the webhook's captions of one split (no file)
WEBHOOK_RECORD = "Label Studio webhook"


# Reading Label Studio's shapes ----------------------------------------------------------


def textarea_names(label_config: str) -> tuple[str, str]:
    """(from_name, to_name) of the labelling config's first TextArea control; the
    defaults of Earmark's own config for an empty one."""
    if not label_config:
        return "caption", "audio"
    if len(label_config) > MAX_CONFIG_CHARS or "<!DOCTYPE" in label_config.upper():
        raise ValidationError("The label config is too long or declares a DOCTYPE.")
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as exc:
        raise ValidationError(f"The label config is not valid XML: {exc}.") from None
    for element in root.iter():
        if element.tag.lower() == "textarea":
            name, to_name = element.get("name"), element.get("toName")
            if not name or not to_name:
                raise ValidationError("The label config's TextArea needs name and toName.")
            return name, to_name
    raise ValidationError("The label config has no TextArea control to put captions in.")


def clip_id_value(value: Any) -> int | None:
    """A clip id as a task's data may hold it: an integer (not a boolean: true is not
    clip 1), a whole float (26.0 from a CSV import) or its text; None for anything else,
    or a number no clip can have."""
    number: int | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and (match := CLIP_ID_TEXT.fullmatch(value.strip())):
        number = int(match.group(1))
    return number if number is not None and 1 <= number <= MAX_CLIP_ID else None


def task_clip_id(task: Any) -> int | None:
    """The Earmark clip a Label Studio task names: `data.clip_id` (or `earmark_clip_id`),
    else an Earmark audio URL (…/clips/<id>/audio) among its data values; None when it
    names none, or nothing that can be a clip id."""
    data = task.get("data") if isinstance(task, dict) else None
    if not isinstance(data, dict):
        return None
    for key in CLIP_KEYS:
        if key in data:
            return clip_id_value(data[key])
    for value in data.values():
        if isinstance(value, str) and (match := AUDIO_URL.search(value)):
            return clip_id_value(match.group(1))
    return None


def annotation_texts(annotation: Mapping[str, Any], from_name: str | None) -> list[str]:
    """The caption texts of a Label Studio annotation: its TextArea results (the one named
    `from_name` when given), stripped, empty ones left out; none for a skipped task."""
    if annotation.get("was_cancelled"):
        return []
    results = annotation.get("result")
    if not isinstance(results, list):
        raise ValidationError('The annotation\'s "result" must be a list.')
    texts: list[str] = []
    for result in results:
        if not isinstance(result, dict) or result.get("type") != "textarea":
            continue
        if from_name is not None and result.get("from_name") != from_name:
            continue
        value = result.get("value")
        lines = value.get("text") if isinstance(value, dict) else None
        if isinstance(lines, str):
            lines = [lines]
        if not isinstance(lines, list):
            raise ValidationError('A textarea result\'s value needs "text", a list of strings.')
        texts.extend(line.strip() for line in lines if isinstance(line, str) and line.strip())
    return texts


# The webhook's secret -------------------------------------------------------------------


def labelstudio_secret_matches(*, project: Project, secret: str) -> bool:
    """Whether `secret` is the project's current webhook secret (constant-time compare)."""
    expected = project_config(project=project).labelstudio_secret
    return hmac.compare_digest(expected.encode(), secret.encode())


def labelstudio_secret_rotate(*, project: Project, user: User) -> ProjectConfig:
    """A new webhook secret for the project: backend URLs holding the old one stop
    working (Label Studio must be given the new URL)."""
    require_role(project, user, Role.RESEARCHER)
    config = project_config(project=project)
    config.labelstudio_secret = new_labelstudio_secret()
    config.updated_at = timezone.now()
    config.save(update_fields=["labelstudio_secret", "updated_at"])
    return config


# Captions written in Label Studio --------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """What one annotation left in the corpus."""

    clip_id: int | None
    created: int = 0
    updated: int = 0
    deleted: int = 0
    skipped: str = ""  # why nothing was stored, when nothing was

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v or k == "clip_id"}


def external_id(ls_project: int, annotation: int, n: int) -> str:
    return f"{_annotation_prefix(ls_project, annotation)}{n}"


def _annotation_prefix(ls_project: int, annotation: int) -> str:
    return f"label-studio/{ls_project}/{annotation}#"


def _whole(value: Any, what: str) -> int:
    """A Label Studio id: a JSON integer (not a bool), as its serializers send it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an integer id, not {value!r}.")
    return value


def _ls_project_id(payload: Mapping[str, Any]) -> int:
    project = payload.get("project")
    value = project.get("id") if isinstance(project, dict) else project
    return _whole(value, "The Label Studio project's id")


def _existing_subset(project: Project) -> Subset | None:
    """The project's Label Studio subset, when captions came from Label Studio before."""
    record = CorpusImport.objects.filter(project=project, format=CorpusFormat.LABEL_STUDIO)
    found = record.select_related("subset").first()
    return found.subset if found is not None else None


def _clip_split(project: Project, subset: Subset | None, clip_id: int) -> str | None:
    """The split the clip has in the Label Studio subset, else in the project's other
    subsets (the oldest first); None for a clip the project does not hold."""
    if not project_clips(project).filter(pk=clip_id).exists():
        return None
    placed = SubsetClip.objects.filter(subset__project=project, clip_id=clip_id)
    if subset is not None:
        mine = placed.filter(subset=subset).first()
        if mine is not None:
            return mine.split
        placed = placed.exclude(subset=subset)
    elsewhere = placed.order_by("subset_id").first()
    return elsewhere.split if elsewhere is not None else None


def _webhook_record(project: Project, subset: Subset, split: str) -> CorpusImport:
    """The CorpusImport row that marks the subset and stands for the webhook's captions of
    one split (the corpus finds imported captions through such rows)."""
    record = CorpusImport.objects.filter(
        project=project, format=CorpusFormat.LABEL_STUDIO, split=split, file_name=WEBHOOK_RECORD
    ).first()
    if record is None:
        record = CorpusImport.objects.create(
            project=project,
            subset=subset,
            format=CorpusFormat.LABEL_STUDIO,
            split=split,
            file_name=WEBHOOK_RECORD,
            sha256="",  # no file: the captions arrive one annotation at a time
            rows=0,
            clips_created=0,
            captions_created=0,
            captions_existing=0,
        )
    return record


def _annotation_captions(subset: Subset, prefix: str) -> QuerySet[Caption]:
    return Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED,
        clip__subsetclip__subset=subset,
        external_id__startswith=prefix,
    ).order_by("external_id")


def _replace_texts(
    *, subset: Subset, clip_id: int, prefix: str, texts: list[str]
) -> tuple[int, int, int]:
    """Makes the annotation's captions exactly `texts` (n-th caption, n-th text): changed
    texts replace the old (a reviewer's fix of the old text is dropped with it), extra
    texts are added, missing ones deleted. -> (created, updated, deleted)."""
    existing = {c.external_id: c for c in _annotation_captions(subset, prefix)}
    created = updated = 0
    for n, text in enumerate(texts, start=1):
        caption = existing.pop(f"{prefix}{n}", None)
        if caption is None:
            caption = Caption(
                provenance=Caption.Provenance.IMPORTED,
                clip_id=clip_id,
                text=text,
                external_id=f"{prefix}{n}",
            )
            caption.full_clean()
            caption.save()
            created += 1
        elif caption.text != text or caption.clip_id != clip_id:
            caption.text, caption.clip_id = text, clip_id
            caption.fixed_text, caption.fixed_by, caption.fixed_at = "", None, None
            caption.full_clean()
            caption.save(update_fields=["text", "clip", "fixed_text", "fixed_by", "fixed_at"])
            updated += 1
    deleted = len(existing)
    if existing:
        Caption.objects.filter(pk__in=[c.pk for c in existing.values()]).delete()
    return created, updated, deleted


def _too_long(texts: Iterable[str]) -> str:
    for text in texts:
        if len(text) > Caption.MAX_CHARS:
            return f"a caption is longer than {Caption.MAX_CHARS} characters ({len(text)})"
    return ""


def labelstudio_annotation_save(*, project: Project, payload: Mapping[str, Any]) -> Written:
    """Stores the captions of an ANNOTATION_CREATED or ANNOTATION_UPDATED webhook call
    (Label Studio sends "annotation", "task" and "project") as imported captions of the
    task's clip. An annotation on a task that names no clip of the project stores nothing
    and says why."""
    annotation, task = payload.get("annotation"), payload.get("task")
    if not isinstance(annotation, dict):
        raise ValidationError('The webhook call has no "annotation" object.')
    annotation_id = _whole(annotation.get("id"), "The annotation's id")
    ls_project = _ls_project_id(payload)
    project_data = payload.get("project")
    label_config = project_data.get("label_config") if isinstance(project_data, dict) else None
    from_name = textarea_names(label_config)[0] if isinstance(label_config, str) else None
    texts = annotation_texts(annotation, from_name if label_config else None)
    if problem := _too_long(texts):
        return Written(clip_id=None, skipped=problem)
    clip_id = task_clip_id(task)
    if clip_id is None:
        return Written(clip_id=None, skipped="the task names no Earmark clip")
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)  # one writer
        split = _clip_split(project, _existing_subset(project), clip_id)
        if split is None:
            return Written(clip_id=clip_id, skipped="the task's clip is not in this project")
        subset = import_subset(project, CorpusFormat.LABEL_STUDIO)
        record = _webhook_record(project, subset, split)
        if not SubsetClip.objects.filter(subset=subset, clip_id=clip_id).exists():
            SubsetClip.objects.create(subset=subset, clip_id=clip_id, split=split)
        created, updated, deleted = _replace_texts(
            subset=subset,
            clip_id=clip_id,
            prefix=_annotation_prefix(ls_project, annotation_id),
            texts=texts,
        )
        _record_counts(record, subset)
        import_subset_report(subset)
    return Written(clip_id=clip_id, created=created, updated=updated, deleted=deleted)


def labelstudio_annotations_delete(*, project: Project, payload: Mapping[str, Any]) -> int:
    """Deletes the captions of the annotations of an ANNOTATIONS_DELETED webhook call
    (Label Studio sends only their ids); -> how many captions went."""
    annotations = payload.get("annotations")
    if not isinstance(annotations, list):
        raise ValidationError('The webhook call has no "annotations" list.')
    ids = [
        _whole(a.get("id") if isinstance(a, dict) else a, "An annotation's id") for a in annotations
    ]
    ls_project = _ls_project_id(payload)
    deleted = 0
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        subset = _existing_subset(project)
        if subset is None:
            return 0
        for annotation_id in ids:
            found = _annotation_captions(subset, _annotation_prefix(ls_project, annotation_id))
            deleted += found.delete()[1].get(Caption._meta.label, 0)
        for record in CorpusImport.objects.filter(
            project=project, format=CorpusFormat.LABEL_STUDIO, file_name=WEBHOOK_RECORD
        ):
            _record_counts(record, subset)
    return deleted


def _record_counts(record: CorpusImport, subset: Subset) -> None:
    """The webhook record's counts: the annotations and captions it holds in its split."""
    captions = Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED,
        clip__subsetclip__subset=subset,
        clip__subsetclip__split=record.split,
        external_id__startswith="label-studio/",
    )
    ids = list(captions.values_list("external_id", flat=True))
    record.rows = len({i.rpartition("#")[0] for i in ids})
    record.captions_created = len(ids)
    record.save(update_fields=["rows", "captions_created"])
