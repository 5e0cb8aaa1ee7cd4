"""Label curation flags move from the shared ontology to each project (LabelCuration).

The flags used to sit on curation.Label, so one project's researcher changed every
project's future subsets. Each existing project gets a copy of today's flags and notes, so
nothing it builds changes; from here on each project curates its own.
"""

import django.db.models.deletion
from django.db import migrations, models


def copy_global_flags_to_every_project(apps, schema_editor):
    Label = apps.get_model("curation", "Label")
    LabelCuration = apps.get_model("curation", "LabelCuration")
    Project = apps.get_model("core", "Project")
    curated = list(
        Label.objects.filter(
            models.Q(needs_visuals=True)
            | models.Q(needs_expertise=True)
            | models.Q(excluded=True)
            | ~models.Q(curation_note="")
        ).values_list("pk", "needs_visuals", "needs_expertise", "excluded", "curation_note")
    )
    if not curated:
        return
    LabelCuration.objects.bulk_create(
        [
            LabelCuration(
                project_id=project_id,
                label_id=label_id,
                needs_visuals=visuals,
                needs_expertise=expertise,
                excluded=excluded,
                note=note,
            )
            for project_id in Project.objects.values_list("pk", flat=True)
            for label_id, visuals, expertise, excluded, note in curated
        ],
        batch_size=1000,
    )


def copy_back_to_the_ontology(apps, schema_editor):
    """Reversing can keep only one project's judgement per label: the lowest project id's."""
    Label = apps.get_model("curation", "Label")
    LabelCuration = apps.get_model("curation", "LabelCuration")
    done = set()
    for curation in LabelCuration.objects.order_by("project_id", "pk"):
        if curation.label_id in done:
            continue
        done.add(curation.label_id)
        Label.objects.filter(pk=curation.label_id).update(
            needs_visuals=curation.needs_visuals,
            needs_expertise=curation.needs_expertise,
            excluded=curation.excluded,
            curation_note=curation.note,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_initial"),
        ("curation", "0006_clip_video_features"),
    ]

    operations = [
        migrations.CreateModel(
            name="LabelCuration",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("needs_visuals", models.BooleanField(default=False)),
                ("needs_expertise", models.BooleanField(default=False)),
                ("excluded", models.BooleanField(default=False)),
                ("note", models.TextField(blank=True)),
                (
                    "label",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="curations",
                        to="curation.label",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="label_curations",
                        to="core.project",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("project", "label"), name="labelcuration_once_per_project"
                    )
                ],
            },
        ),
        # the old columns go in the next migration: PostgreSQL refuses to alter a table in
        # the transaction that just inserted rows whose foreign-key checks are pending
        migrations.RunPython(copy_global_flags_to_every_project, copy_back_to_the_ontology),
    ]
