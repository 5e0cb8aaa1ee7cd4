"""Gives the clips and imported captions of today their owners (curation 0007 and
annotation 0005 added the columns).

Until now one clip row served every project whose subsets held it, and an imported caption
every project that held its clip, so a project that uploaded a copy of another's audio
reached that project's clip, labels, file name, video hint and captions. From here on
each project has rows of its own, and this migration keeps what each project reaches today:

- An imported caption goes to the projects whose import subsets (those a CorpusImport
  marks) hold its clip; the first keeps the row and each other gets a copy, which its
  next post-processing run processes. A caption no import subset holds goes to the
  projects whose subsets hold its clip; one whose clip no project holds reached no
  project and is deleted.
- A local clip goes to the projects that reach it (subsets, HITs, captions, qualifications,
  scores, suggestions): the first that held it in a subset keeps the row; each other gets a
  copy pointing at the same stored files (storage may be shared, rows never), and that
  project's rows move to the copy. A local clip no project reaches stays site-wide.
- AudioSet (YouTube) clips stay site-wide: public data that every project's recipes select.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import migrations

CHUNK = 500

# Every row that points at a clip, and how it reaches its project: (app, model, the
# lookup from the row to the project, the rows it covers). SubsetClip comes first: the
# project that held a clip in a subset first keeps the original row.
REACH: list[tuple[str, str, str, dict[str, Any]]] = [
    ("curation", "SubsetClip", "subset__project", {}),
    ("annotation", "HitClip", "hit__batch__project", {}),
    ("annotation", "Caption", "assignment__hit__batch__project", {"provenance": "crowd"}),
    ("annotation", "Caption", "imported_into", {"provenance": "imported"}),
    ("annotation", "ClipListen", "assignment__hit__batch__project", {}),
    ("annotation", "VideoHintView", "assignment__hit__batch__project", {}),
    ("annotation", "ClipReport", "assignment__hit__batch__project", {}),
    # added beside this migration (annotation 0006): present only when that ran first
    ("annotation", "ClipAudioServed", "assignment__hit__batch__project", {}),
    ("crowd", "QualificationClip", "qualification__project", {}),
    ("crowd", "QualificationAnswer", "attempt__qualification__project", {}),
    ("active", "ClipScore", "batch__project", {}),
    ("active", "Presuggestion", "assignment__hit__batch__project", {}),
    ("modeling", "Suggestion", "run__project", {}),
]


def _reach(apps: Any) -> list[tuple[Any, str, dict[str, Any]]]:
    """REACH's models as the migration state has them (model, path, filter); a model a
    parallel migration adds is left out when that migration has not run yet."""
    found = []
    for app, name, path, rows in REACH:
        try:
            found.append((apps.get_model(app, name), path, rows))
        except LookupError:
            continue
    return found


def _chunks(items: list[int]) -> Any:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _ordered(pairs: Any) -> dict[int, list[int]]:
    """{key: [value, ...]} in the order first met, without repeats or Nones."""
    out: dict[int, list[int]] = defaultdict(list)
    for key, value in pairs:
        if value is not None and value not in out[key]:
            out[key].append(value)
    return out


def captions_to_projects(apps: Any, schema_editor: Any) -> None:
    Caption = apps.get_model("annotation", "Caption")
    SubsetClip = apps.get_model("curation", "SubsetClip")
    waiting = Caption.objects.filter(provenance="imported", imported_into__isnull=True)
    links = SubsetClip.objects.filter(clip_id__in=waiting.values("clip_id")).order_by("pk")
    importing = _ordered(
        links.filter(subset__corpus_imports__isnull=False).values_list(
            "clip_id", "subset__project_id"
        )
    )
    holding = _ordered(links.values_list("clip_id", "subset__project_id"))
    keep: dict[int, list[int]] = defaultdict(list)  # project -> caption ids it keeps
    copies, orphans = [], []
    for caption in waiting.order_by("pk").iterator(chunk_size=2000):
        owners = importing.get(caption.clip_id) or holding.get(caption.clip_id) or []
        if not owners:
            orphans.append(caption.pk)
            continue
        keep[owners[0]].append(caption.pk)
        for project_id in owners[1:]:
            copies.append(
                Caption(
                    provenance="imported",
                    assignment=None,
                    clip_id=caption.clip_id,
                    imported_into_id=project_id,
                    text=caption.text,
                    external_id=caption.external_id,
                    fixed_text=caption.fixed_text,
                    fixed_by_id=caption.fixed_by_id,
                    fixed_at=caption.fixed_at,
                    created_at=caption.created_at,
                )
            )
    for project_id, ids in keep.items():
        for chunk in _chunks(ids):
            Caption.objects.filter(pk__in=chunk).update(imported_into_id=project_id)
    Caption.objects.bulk_create(copies, batch_size=1000)
    for chunk in _chunks(orphans):
        Caption.objects.filter(pk__in=chunk).delete()


def _check_reach_is_complete(apps: Any) -> None:
    """Refuses to run when a model points at clips that REACH does not list: its rows
    would stay on the original while their project moved to a copy."""
    Clip = apps.get_model("curation", "Clip")
    listed = {(app, model.lower()) for app, model, _, _ in REACH}
    labels = Clip._meta.get_field("labels").remote_field.through
    # hidden ones too: most of these foreign keys are related_name="+"
    for rel in Clip._meta.get_fields(include_hidden=True):
        if rel.concrete or rel.many_to_many:  # a through model's foreign key is checked
            continue
        model = rel.related_model
        if model is labels:
            continue  # copied with the clip
        if (model._meta.app_label, model._meta.model_name) not in listed:
            raise RuntimeError(
                f"{model._meta.label} points at clips but curation 0008 does not know "
                "which project its rows belong to; add it to REACH."
            )


def local_clips_to_projects(apps: Any, schema_editor: Any) -> None:
    _check_reach_is_complete(apps)
    Clip = apps.get_model("curation", "Clip")
    Links = Clip._meta.get_field("labels").remote_field.through
    reach: dict[int, list[int]] = defaultdict(list)  # clip -> projects, first holder first
    for model, path, rows in _reach(apps):
        found = model.objects.filter(clip__source="local", **rows).order_by("pk")
        for clip_id, projects in _ordered(found.values_list("clip_id", path)).items():
            reach[clip_id] += [p for p in projects if p not in reach[clip_id]]
    owned: dict[int, list[int]] = defaultdict(list)  # project -> clips it owns
    for clip_id, projects in reach.items():
        owned[projects[0]].append(clip_id)
    for project_id, ids in owned.items():
        for chunk in _chunks(ids):
            Clip.objects.filter(pk__in=chunk, project__isnull=True).update(project_id=project_id)
    fields = [f.attname for f in Clip._meta.concrete_fields if not f.primary_key]
    for clip_id, projects in reach.items():
        if len(projects) < 2:
            continue
        original = Clip.objects.get(pk=clip_id)
        labels = list(Links.objects.filter(clip_id=clip_id).values_list("label_id", flat=True))
        for project_id in projects[1:]:
            copy = Clip(**{name: getattr(original, name) for name in fields})
            copy.project_id = project_id
            copy.save()
            Links.objects.bulk_create([Links(clip_id=copy.pk, label_id=pk) for pk in labels])
            for model, path, rows in _reach(apps):
                moved = model.objects.filter(
                    clip_id=clip_id, **{path: project_id}, **rows
                )
                moved.update(clip_id=copy.pk)


def forwards(apps: Any, schema_editor: Any) -> None:
    # captions first: the clips' pass reads imported captions' projects
    captions_to_projects(apps, schema_editor)
    local_clips_to_projects(apps, schema_editor)


class Migration(migrations.Migration):
    # every app whose rows point at clips or captions, so that they are in this state
    dependencies = [
        ("curation", "0007_clip_project_owner"),
        ("annotation", "0005_caption_imported_into"),
        ("crowd", "0001_initial"),
        ("active", "0002_strategy_hybrid"),
        ("modeling", "0001_initial"),
        ("corpus", "0002_synthscenes_format"),
        ("postprocessing", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
