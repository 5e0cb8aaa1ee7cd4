"""Label Studio, the workflows behind the ML-backend endpoints (active/labelstudio.py):
reading its label configs and tasks, the per-project secret in the backend URL that
authenticates its webhook, the captions written there, and moving between the two tools:
a batch exported as a Label Studio project, Label Studio's JSON export imported back.

A caption written in Label Studio (a TextArea of an annotation on a task naming a clip of
the project) becomes an imported caption, like those of an AudioCaps or Clotho file: it
lives in the project's "Label Studio (imported)" subset (corpus format "label-studio"),
with the split the clip has elsewhere in the project, so the corpus, its exports and
retraining read it. Its external id, "label-studio/<Label Studio project>/<annotation>#<n>",
names the annotation it came from: a repeated event changes nothing, an update replaces the
texts and a deletion removes them.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from active.models import LabelStudioRefusal, ProjectConfig, new_labelstudio_secret
from active.services.config import project_config
from annotation import rules
from annotation.models import Batch, Caption, HitClip
from core.jsonlimits import JsonRefused, bounded_loads
from core.models import Project, Role
from core.services import require_role
from corpus.models import CorpusFormat, CorpusImport
from corpus.services.imports import import_subset, import_subset_report
from curation.models import Subset, SubsetClip
from curation.queries import project_clips

MAX_CONFIG_CHARS = 200_000
DELETE_CHUNK = 5000  # captions per DELETE statement (SQLite takes 32,766 parameters)
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
    """A Label Studio id: a JSON integer (not a bool), as its serializers send it, and one
    a database integer holds (1 to 2**63 - 1: 10**300 would overflow a query)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an integer id, not {str(value)[:40]!r}.")
    if not 1 <= value <= MAX_CLIP_ID:
        raise ValidationError(f"{what} must be an integer id from 1 to {MAX_CLIP_ID}.")
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


def _clip_splits(
    project: Project, subset: Subset | None, clip_ids: Iterable[int]
) -> dict[int, str]:
    """Per clip of the project among `clip_ids`: its split in the Label Studio subset,
    else in the project's other subsets (the oldest first). Clips the project does not
    hold, or holds in no subset, are left out."""
    ours = project_clips(project).filter(pk__in=sorted(set(clip_ids))).values("pk")
    links = SubsetClip.objects.filter(subset__project=project, clip_id__in=ours)
    others = links.exclude(subset=subset) if subset is not None else links
    splits: dict[int, str] = {}
    for clip_id, split in others.order_by("subset_id").values_list("clip_id", "split"):
        splits.setdefault(clip_id, split)
    if subset is not None:  # a clip placed by an earlier caption keeps its split
        splits.update(links.filter(subset=subset).values_list("clip_id", "split"))
    return splits


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


def _label_studio_captions(subset: Subset, prefix: str = "label-studio/") -> QuerySet[Caption]:
    """The subset's captions from Label Studio (of one annotation, with its prefix)."""
    return Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED,
        imported_into_id=subset.project_id,
        clip__subsetclip__subset=subset,
        external_id__startswith=prefix,
    ).order_by("external_id")


@dataclass
class _Changes:
    """Captions to create, update and delete so annotations' captions are their texts; new
    ones are imported into `project_id`."""

    project_id: int
    new: list[Caption] = field(default_factory=list)
    changed: list[Caption] = field(default_factory=list)
    gone: list[Caption] = field(default_factory=list)

    def plan(
        self, existing: dict[str, Caption], *, clip_id: int, prefix: str, texts: list[str]
    ) -> None:
        """The n-th caption of the annotation gets its n-th text: a changed text replaces
        the old (a reviewer's fix of the old text goes with it), extra texts are added,
        captions beyond the texts deleted. `existing`: the annotation's captions."""
        mine = {k: c for k, c in existing.items() if k.startswith(prefix)}
        for n, text in enumerate(texts, start=1):
            caption = mine.pop(f"{prefix}{n}", None)
            if caption is None:
                self.new.append(
                    Caption(
                        provenance=Caption.Provenance.IMPORTED,
                        imported_into_id=self.project_id,
                        clip_id=clip_id,
                        text=text,
                        external_id=f"{prefix}{n}",
                        pending_review=True,  # the review queue, like a crowd caption
                    )
                )
            elif caption.text != text or caption.clip_id != clip_id:
                caption.text, caption.clip_id = text, clip_id
                caption.fixed_text, caption.fixed_by, caption.fixed_at = "", None, None
                caption.pending_review = True  # a new text is reviewed again
                self.changed.append(caption)
        self.gone.extend(mine.values())

    def apply(self) -> None:
        if self.gone:
            Caption.objects.filter(pk__in=[c.pk for c in self.gone]).delete()
        Caption.objects.bulk_update(
            self.changed,
            ["text", "clip", "fixed_text", "fixed_by", "fixed_at", "pending_review"],
            batch_size=500,
        )
        Caption.objects.bulk_create(self.new, batch_size=500)


def _text_problem(texts: Iterable[str]) -> str:
    """Why these captions cannot be stored ("" when they can): too long, or refused by the
    text gate every caption passes (annotation.rules.gate: a NUL, a control character, a
    line break, which Label Studio's text area takes, a text-direction control, markup, a
    start a spreadsheet would run as a formula; as typed and once normalised)."""
    for text in texts:
        if len(text) > Caption.MAX_CHARS:
            return f"a caption is longer than {Caption.MAX_CHARS} characters ({len(text)})"
        if problems := rules.gate(text):
            return f"a caption {problems[0].message}"
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
    clip_id = task_clip_id(task)

    def refused(reason: str) -> Written:
        LabelStudioRefusal.objects.create(
            project=project,
            ls_project=ls_project,
            annotation=annotation_id,
            clip_id=clip_id,
            reason=reason,
        )
        return Written(clip_id=clip_id, skipped=reason)

    if problem := _text_problem(texts):
        return refused(problem)
    if clip_id is None:  # nothing to undo either: captions are stored only on a clip
        return refused("the task names no Earmark clip") if texts else Written(clip_id=None)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)  # one writer
        split = _clip_splits(project, _existing_subset(project), [clip_id]).get(clip_id)
        if split is None:
            return refused(f"clip {clip_id} is not in this project")
        subset = import_subset(project, CorpusFormat.LABEL_STUDIO)
        record = _webhook_record(project, subset, split)
        if texts and not SubsetClip.objects.filter(subset=subset, clip_id=clip_id).exists():
            SubsetClip.objects.create(subset=subset, clip_id=clip_id, split=split)
        prefix = _annotation_prefix(ls_project, annotation_id)
        changes = _Changes(project_id=subset.project_id)
        existing = {c.external_id: c for c in _label_studio_captions(subset, prefix)}
        before = {c.clip_id for c in existing.values()}
        changes.plan(existing, clip_id=clip_id, prefix=prefix, texts=texts)
        changes.apply()
        # a skipped or emptied annotation (or one moved to another task) leaves no clip behind
        _subset_prune(subset, {clip_id, *before})
        _record_counts(record, subset)
        import_subset_report(subset)
    return Written(
        clip_id=clip_id,
        created=len(changes.new),
        updated=len(changes.changed),
        deleted=len(changes.gone),
    )


def labelstudio_annotations_delete(*, project: Project, payload: Mapping[str, Any]) -> int:
    """Deletes the captions of the annotations of an ANNOTATIONS_DELETED webhook call
    (Label Studio sends only their ids); -> how many captions went."""
    annotations = payload.get("annotations")
    if not isinstance(annotations, list):
        raise ValidationError('The webhook call has no "annotations" list.')
    # a repeated id is one annotation, deleted once
    ids = {
        _whole(a.get("id") if isinstance(a, dict) else a, f"annotations[{n}].id")
        for n, a in enumerate(annotations)
    }
    ls_project = _ls_project_id(payload)
    subset = _existing_subset(project)
    if subset is None:
        return 0
    # One read of the Label Studio project's caption ids and one DELETE per DELETE_CHUNK,
    # without the project's row lock: 16,564 ids, one statement each under that lock,
    # took 678 s and held up every webhook call and job of the project meanwhile.
    gone: list[int] = []
    clips: set[int] = set()
    prefix = f"label-studio/{ls_project}/"
    rows = _label_studio_captions(subset, prefix).values_list("pk", "clip_id", "external_id")
    for pk, clip_id, key in rows:
        annotation = key.removeprefix(prefix).partition("#")[0]
        if annotation.isdigit() and int(annotation) in ids:
            gone.append(pk)
            clips.add(clip_id)
    deleted = 0
    with transaction.atomic():
        for start in range(0, len(gone), DELETE_CHUNK):
            chunk = gone[start : start + DELETE_CHUNK]
            deleted += Caption.objects.filter(pk__in=chunk).delete()[1].get(Caption._meta.label, 0)
        _subset_prune(subset, clips)
        for record in CorpusImport.objects.filter(
            project=project, format=CorpusFormat.LABEL_STUDIO, file_name=WEBHOOK_RECORD
        ):
            _record_counts(record, subset)
    return deleted


def _subset_prune(subset: Subset, clip_ids: Iterable[int]) -> None:
    """Takes out of the Label Studio subset the clips among `clip_ids` left without a
    caption from Label Studio (their annotations deleted, skipped or emptied), so the
    subset holds exactly the clips Label Studio captioned."""
    wanted = set(clip_ids)
    if not wanted:
        return
    kept = set(
        _label_studio_captions(subset).filter(clip_id__in=wanted).values_list("clip_id", flat=True)
    )
    if wanted - kept:
        SubsetClip.objects.filter(subset=subset, clip_id__in=wanted - kept).delete()


def _record_counts(record: CorpusImport, subset: Subset) -> None:
    """The webhook record's counts: the annotations and captions it holds in its split."""
    captions = Caption.objects.filter(
        provenance=Caption.Provenance.IMPORTED,
        imported_into_id=subset.project_id,
        clip__subsetclip__subset=subset,
        clip__subsetclip__split=record.split,
        external_id__startswith="label-studio/",
    )
    ids = list(captions.values_list("external_id", flat=True))
    record.rows = len({i.rpartition("#")[0] for i in ids})
    record.captions_created = len(ids)
    record.save(update_fields=["rows", "captions_created"])


# A batch as a Label Studio project, and Label Studio's JSON export back -----------------

IMPORT_MAX_BYTES = 100 * 2**20  # a JSON export of 10,000 annotated tasks is about 20 MB
IMPORT_MAX_ERRORS = 10  # problems listed before "and N more"
IMPORT_MAX_PROBLEMS = 1000  # the check stops here: the file is refused either way
# objects, lists and commas: under 100 a task in Label Studio's JSON export
IMPORT_MAX_VALUES = 5_000_000


def labelstudio_config(*, batch: Batch) -> str:
    """The labelling config of an audio-captioning project: the clip's player and one
    caption box, with the batch's instructions on length. Its control names are the ones
    the ML backend and the imports read (TextArea "caption" on Audio "audio")."""
    words = f"{batch.min_words} to {batch.max_words} words"
    return (
        "<View>\n"
        f'  <Header value="Describe what you hear in one sentence ({escape(words)})."/>\n'
        '  <Audio name="audio" value="$audio" hotkey="ctrl+enter"/>\n'
        '  <TextArea name="caption" toName="audio" rows="2" editable="true" '
        'maxSubmissions="1" required="true" showSubmitButton="false" '
        'placeholder="A dog barks while cars pass by"/>\n'
        "</View>\n"
    )


def labelstudio_tasks(*, batch: Batch, audio_url: Callable[[int], str]) -> list[dict[str, Any]]:
    """One Label Studio task per clip of the batch's HITs, in clip order: its audio URL
    (`audio_url(clip id)`, Earmark's by default, which plays for a browser signed in to
    Earmark), the clip id the ML backend and the imports read, and where it came from."""
    clip_ids = (
        HitClip.objects.filter(hit__batch=batch)
        .order_by("clip_id")
        .values_list("clip_id", flat=True)
        .distinct()
    )
    return [
        {
            "data": {
                "audio": audio_url(clip_id),
                "clip_id": clip_id,
                "earmark_project": batch.project.slug,
                "earmark_batch": batch.pk,
                "split": batch.split,
            }
        }
        for clip_id in clip_ids
    ]


@dataclass(frozen=True)
class _Annotation:
    """One annotation of the export, checked, ready to store."""

    clip_id: int
    ls_project: int
    annotation_id: int
    texts: list[str]


@dataclass(frozen=True)
class ImportOutcome:
    """What an import of Label Studio's JSON export did."""

    tasks: int
    annotations: int  # annotations stored (with their captions)
    created: int
    updated: int
    unchanged: int
    skipped_tasks: int  # tasks without annotations
    records: list[CorpusImport]

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if k != "records"}


def labelstudio_upload_read(upload: UploadedFile) -> tuple[str, bytes]:
    """An uploaded Label Studio export's name and bytes, refused before reading when it is
    too large or not a .json file."""
    name = upload.name or "upload"
    if not name.lower().endswith(".json"):
        raise ValidationError(
            f"{name} is not a .json file: export the Label Studio project as JSON."
        )
    if upload.size is not None and upload.size > IMPORT_MAX_BYTES:
        raise ValidationError(
            f"{name} is larger than {IMPORT_MAX_BYTES // 2**20} MB — nothing was imported."
        )
    return name, upload.read()


def _export_tasks(data: bytes, name: str) -> list[Any]:
    if len(data) > IMPORT_MAX_BYTES:
        raise ValidationError(
            f"{name} is larger than {IMPORT_MAX_BYTES // 2**20} MB — nothing was imported."
        )
    # Counted before parsing, at C speed (commas inside strings count too, so it errs
    # high): a 20 MB file of "{}," parsed into 6 million dicts took 45 s and 1.15 GB
    # before its first task was refused.
    values = data.count(b"{") + data.count(b"[") + data.count(b",")
    if values > IMPORT_MAX_VALUES:
        raise ValidationError(
            f"{name} holds about {values:,} JSON values; an export of "
            f"{IMPORT_MAX_VALUES // 100:,} tasks holds fewer than {IMPORT_MAX_VALUES:,} "
            "— nothing was imported."
        )
    try:
        tasks = bounded_loads(data, max_bytes=IMPORT_MAX_BYTES, what=name)
    except JsonRefused as exc:
        raise ValidationError(f"{exc} — nothing was imported.") from None
    if not isinstance(tasks, list):
        raise ValidationError(
            f"{name} is not Label Studio's JSON export: its top level must be a list of tasks "
            "(export with the JSON format, not JSON-MIN or CSV) — nothing was imported."
        )
    return tasks


def _skipped_annotation(
    annotation: dict[str, Any], task: dict[str, Any], clip_id: int | None
) -> _Annotation | None:
    """An annotation without captions (skipped, cancelled, emptied), kept so its captions
    stored before are deleted and its clip leaves the subset; None when it names nothing."""
    try:
        ls_project = _whole(annotation.get("project", task.get("project")), "project")
        annotation_id = _whole(annotation.get("id"), "id")
    except ValidationError:
        return None
    if clip_id is None:
        return None
    return _Annotation(
        clip_id=clip_id, ls_project=ls_project, annotation_id=annotation_id, texts=[]
    )


def _export_annotations(
    index: int, task: Any, project_clips_ids: set[int]
) -> tuple[list[_Annotation], list[str]]:
    """The annotations of tasks[index], or the problems that make it unusable."""
    where = f"tasks[{index}]"
    if not isinstance(task, dict):
        return [], [f"{where} is not an object"]
    if isinstance(task.get("id"), int):
        where += f" (Label Studio task {task['id']})"
    annotations = task.get("annotations") or []
    if not isinstance(annotations, list):
        return [], [f'{where}: "annotations" is not a list']
    out: list[_Annotation] = []
    problems: list[str] = []
    clip_id = task_clip_id(task)
    for position, annotation in enumerate(annotations):
        at = f"{where}, annotations[{position}]"
        try:
            if not isinstance(annotation, dict):
                raise ValidationError("is not an object")
            texts = annotation_texts(annotation, None)
            if not texts:  # skipped or emptied: what an earlier import stored of it goes
                if (skipped := _skipped_annotation(annotation, task, clip_id)) is not None:
                    out.append(skipped)
                continue
            if problem := _text_problem(texts):
                raise ValidationError(problem)
            if clip_id is None:
                raise ValidationError("its task names no Earmark clip (data.clip_id)")
            if clip_id not in project_clips_ids:
                raise ValidationError(f"clip {clip_id} is not in this project")
            ls_project = annotation.get("project", task.get("project"))
            out.append(
                _Annotation(
                    clip_id=clip_id,
                    ls_project=_whole(ls_project, "the Label Studio project's id"),
                    annotation_id=_whole(annotation.get("id"), "the annotation's id"),
                    texts=texts,
                )
            )
        except ValidationError as exc:
            problems.append(f"{at}: {' '.join(exc.messages)}")
    return out, problems


def labelstudio_import(
    *, project: Project, data: bytes, file_name: str, user: User
) -> ImportOutcome:
    """Imports the captions of Label Studio's JSON export (tasks with their annotations)
    as imported captions of the tasks' clips, exactly as the webhook stores them (same
    external ids: an annotation the webhook stored is updated, not repeated). The whole
    file is checked first and written in one transaction: any malformed task or a clip
    that is not the project's stops it, naming the task, and nothing is written."""
    require_role(project, user, Role.RESEARCHER)
    tasks = _export_tasks(data, file_name)
    candidates = {task_clip_id(t) for t in tasks}
    ours = set(
        project_clips(project)
        .filter(pk__in=[c for c in candidates if c is not None])
        .values_list("pk", flat=True)
    )
    found: list[_Annotation] = []
    problems: list[str] = []
    skipped = 0
    seen: set[tuple[int, int]] = set()
    for index, task in enumerate(tasks):
        annotations, wrong = _export_annotations(index, task, ours)
        # an annotation listed twice is stored once (its first listing)
        fresh = [a for a in annotations if (a.ls_project, a.annotation_id) not in seen]
        seen.update((a.ls_project, a.annotation_id) for a in fresh)
        found.extend(fresh)
        problems.extend(wrong)
        skipped += not annotations and not wrong
        if len(problems) >= IMPORT_MAX_PROBLEMS:
            break
    if problems:
        more = len(problems) - IMPORT_MAX_ERRORS
        listed = "; ".join(problems[:IMPORT_MAX_ERRORS]) + (
            f"; and {more}{'+' if len(problems) >= IMPORT_MAX_PROBLEMS else ''} more"
            if more > 0
            else ""
        )
        raise ValidationError(f"{file_name}: {listed} — nothing was imported.")
    if not any(a.texts for a in found):
        raise ValidationError(f"{file_name}: no task has a caption — nothing was imported.")
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        splits = _clip_splits(project, _existing_subset(project), (a.clip_id for a in found))
        per_split: dict[str, list[_Annotation]] = {}
        for annotation in found:
            if not annotation.texts and annotation.clip_id not in splits:
                continue  # a skipped annotation on a clip nothing placed: nothing to undo
            if annotation.clip_id not in splits:  # the project's, but in no subset
                raise ValidationError(
                    f"{file_name}: clip {annotation.clip_id} has no split in this project "
                    "— nothing was imported."
                )
            per_split.setdefault(splits[annotation.clip_id], []).append(annotation)
        subset = import_subset(project, CorpusFormat.LABEL_STUDIO)
        existing = {c.external_id: c for c in _label_studio_captions(subset)}
        by_prefix: dict[str, dict[str, Caption]] = {}
        for key, caption in existing.items():
            by_prefix.setdefault(key.rpartition("#")[0] + "#", {})[key] = caption
        placed = set(SubsetClip.objects.filter(subset=subset).values_list("clip_id", flat=True))
        records, created, updated = [], 0, 0
        for split, annotations in sorted(per_split.items()):
            new_clips = sorted({a.clip_id for a in annotations if a.texts} - placed)
            SubsetClip.objects.bulk_create(
                SubsetClip(subset=subset, clip_id=c, split=split) for c in new_clips
            )
            placed.update(new_clips)
            changes = _Changes(project_id=subset.project_id)
            touched: set[int] = set()
            for a in annotations:
                prefix = _annotation_prefix(a.ls_project, a.annotation_id)
                before = by_prefix.get(prefix, {})
                touched |= {a.clip_id, *(c.clip_id for c in before.values())}
                changes.plan(before, clip_id=a.clip_id, prefix=prefix, texts=a.texts)
            changes.apply()
            _subset_prune(subset, touched | {c.clip_id for c in changes.gone})
            texts = sum(len(a.texts) for a in annotations)
            record = CorpusImport(
                project=project,
                subset=subset,
                format=CorpusFormat.LABEL_STUDIO,
                split=split,
                file_name=file_name[:300],
                sha256=hashlib.sha256(data).hexdigest(),
                rows=sum(1 for a in annotations if a.texts),
                clips_created=0,
                captions_created=len(changes.new),
                captions_existing=texts - len(changes.new),
                imported_by=user,
            )
            record.full_clean()
            record.save()
            records.append(record)
            created, updated = created + len(changes.new), updated + len(changes.changed)
        import_subset_report(subset)
    total = sum(len(a.texts) for a in found)
    return ImportOutcome(
        tasks=len(tasks),
        annotations=len(found),
        created=created,
        updated=updated,
        unchanged=total - created - updated,
        skipped_tasks=skipped,
        records=records,
    )
