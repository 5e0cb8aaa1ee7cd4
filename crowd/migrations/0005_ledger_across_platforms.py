"""One ledger across platforms: each entry says which platform paid it and in which
currency (entries of batches on MTurk are MTurk's, in US dollars, as before); the
platforms' reconciliations list what differs from their own records."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def entries_of_batches_on_platforms(apps, schema_editor):
    LedgerEntry = apps.get_model("crowd", "LedgerEntry")
    LedgerEntry.objects.filter(batch__platform="mturk").update(platform="mturk")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0012_platform_columns_dropped'),
        ('core', '0005_profile_country'),
        ('crowd', '0004_platform_columns_dropped'),
    ]

    operations = [
        migrations.AddField(
            model_name='ledgerentry',
            name='currency',
            field=models.CharField(default='USD', max_length=3),
        ),
        migrations.AddField(
            model_name='ledgerentry',
            name='platform',
            field=models.CharField(choices=[('local', "Earmark (the project's annotators)"), ('mturk', 'Amazon Mechanical Turk'), ('prolific', 'Prolific')], default='local', max_length=16),
        ),
        migrations.CreateModel(
            name='LedgerDiscrepancy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('platform', models.CharField(choices=[('local', "Earmark (the project's annotators)"), ('mturk', 'Amazon Mechanical Turk'), ('prolific', 'Prolific')], max_length=16)),
                ('problem', models.TextField()),
                ('found_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('assignment', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.assignment')),
                ('entry', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='crowd.ledgerentry')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='core.project')),
            ],
            options={
                'ordering': ['-found_at', '-id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('problem', ''), _negated=True), name='discrepancy_says_what')],
            },
        ),
        migrations.RunPython(entries_of_batches_on_platforms, migrations.RunPython.noop),
]
