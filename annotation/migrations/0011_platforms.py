"""Crowd platforms as plug-ins (annotation.platforms): a batch says which platform hands
out its HITs (Batch.platform), and the ids rows have on a platform move from the mturk_*
columns into PlatformRef, every one of them kept; 0012 and crowd 0004 drop the columns."""

from django.db import migrations, models
from django.utils import timezone

MTURK = "mturk"

# (app, model, id column, kind, column of when the decision reached MTurk)
COLUMNS = [
    ("annotation", "Batch", "mturk_hit_type_id", "batch", None),
    ("annotation", "Hit", "mturk_hit_id", "hit", None),
    ("annotation", "Assignment", "mturk_assignment_id", "assignment", "mturk_review_sent_at"),
    ("crowd", "Qualification", "mturk_qualification_type_id", "qualification", None),
    ("crowd", "QualificationAttempt", "mturk_request_id", "attempt", "mturk_decision_sent_at"),
]


def columns_to_refs(apps, schema_editor):
    PlatformRef = apps.get_model("annotation", "PlatformRef")
    now = timezone.now()
    for app, model, column, kind, sent in COLUMNS:
        rows = apps.get_model(app, model).objects.exclude(**{column: ""})
        fields = ["pk", column] + ([sent] if sent else [])
        refs = [
            PlatformRef(
                platform=MTURK,
                kind=kind,
                local_id=row["pk"],
                external_id=row[column],
                reported_at=row[sent] if sent else None,
                # submissions made before MTurk's worker was checked after the submit
                # are taken as they were: their reviews went out under the old checks
                confirmed_at=now if kind == "assignment" else None,
            )
            for row in rows.values(*fields).iterator(chunk_size=2000)
        ]
        PlatformRef.objects.bulk_create(refs, batch_size=2000)
    Batch = apps.get_model("annotation", "Batch")
    Batch.objects.exclude(mturk_hit_type_id="").update(platform=MTURK)


def refs_to_columns(apps, schema_editor):
    PlatformRef = apps.get_model("annotation", "PlatformRef")
    for app, model, column, kind, sent in COLUMNS:
        Model = apps.get_model(app, model)
        for ref in PlatformRef.objects.filter(platform=MTURK, kind=kind).iterator():
            values = {column: ref.external_id}
            if sent:
                values[sent] = ref.reported_at
            Model.objects.filter(pk=ref.local_id).update(**values)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0010_batch_reward_per_clip"),
        ("crowd", "0003_locales_and_mturk_qualifications"),
    ]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="platform",
            field=models.CharField(
                choices=[
                    ("local", "Earmark (the project's annotators)"),
                    ("mturk", "Amazon Mechanical Turk"),
                    ("prolific", "Prolific"),
                ],
                default="local",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="batch",
            name="estimated_minutes",
            field=models.PositiveSmallIntegerField(
                blank=True, help_text="how long one HIT takes a worker, in minutes", null=True
            ),
        ),
        migrations.CreateModel(
            name="PlatformRef",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "platform",
                    models.CharField(
                        choices=[
                            ("local", "Earmark (the project's annotators)"),
                            ("mturk", "Amazon Mechanical Turk"),
                            ("prolific", "Prolific"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("batch", "batch (MTurk HIT type, Prolific study)"),
                            ("hit", "HIT"),
                            ("assignment", "assignment (MTurk assignment, Prolific submission)"),
                            ("qualification", "qualification test (MTurk qualification type)"),
                            ("attempt", "qualification attempt (MTurk qualification request)"),
                            ("worker", "worker (Prolific participant)"),
                            ("block", "block mirrored on the platform"),
                            ("payment", "ledger entry paid there (a Prolific bonus payment)"),
                        ],
                        max_length=16,
                    ),
                ),
                ("local_id", models.PositiveBigIntegerField()),
                ("external_id", models.CharField(max_length=255)),
                ("confirmed_at", models.DateTimeField(blank=True, null=True)),
                ("reported_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=timezone.now)),
            ],
        ),
        migrations.RunPython(columns_to_refs, refs_to_columns),
    ]
