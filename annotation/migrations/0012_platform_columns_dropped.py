"""The mturk_* columns go: their ids are in PlatformRef since 0011."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_platforms'),
        ('core', '0005_profile_country'),
        ('curation', '0011_merge_broken_media_and_word_label_categories'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='assignment',
            name='assignment_mturk_id_once',
        ),
        migrations.RemoveConstraint(
            model_name='hit',
            name='hit_mturk_id_once',
        ),
        migrations.RemoveField(
            model_name='assignment',
            name='mturk_assignment_id',
        ),
        migrations.RemoveField(
            model_name='assignment',
            name='mturk_review_sent_at',
        ),
        migrations.RemoveField(
            model_name='batch',
            name='mturk_hit_type_id',
        ),
        migrations.RemoveField(
            model_name='hit',
            name='mturk_hit_id',
        ),
        migrations.AddConstraint(
            model_name='batch',
            constraint=models.CheckConstraint(condition=models.Q(('platform__in', ['local', 'mturk', 'prolific'])), name='batch_platform_valid'),
        ),
        migrations.AddConstraint(
            model_name='platformref',
            constraint=models.CheckConstraint(condition=models.Q(('platform__in', ['mturk', 'prolific'])), name='platformref_platform_valid'),
        ),
        migrations.AddConstraint(
            model_name='platformref',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['batch', 'hit', 'assignment', 'qualification', 'attempt', 'worker', 'block', 'payment'])), name='platformref_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='platformref',
            constraint=models.CheckConstraint(condition=models.Q(('external_id', ''), _negated=True), name='platformref_has_id'),
        ),
        migrations.AddConstraint(
            model_name='platformref',
            constraint=models.UniqueConstraint(fields=('platform', 'kind', 'local_id'), name='platformref_once_per_row'),
        ),
        migrations.AddConstraint(
            model_name='platformref',
            constraint=models.UniqueConstraint(fields=('platform', 'kind', 'external_id'), name='platformref_external_once'),
        ),
    ]
