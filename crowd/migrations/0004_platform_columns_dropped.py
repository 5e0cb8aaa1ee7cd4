"""The mturk_* columns go: their ids are in PlatformRef since 0011."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('crowd', '0003_locales_and_mturk_qualifications'),
        # the ids move to annotation.PlatformRef first
        ('annotation', '0011_platforms'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='qualificationattempt',
            name='qualattempt_mturk_request_once',
        ),
        migrations.RemoveField(
            model_name='qualification',
            name='mturk_qualification_type_id',
        ),
        migrations.RemoveField(
            model_name='qualificationattempt',
            name='mturk_decision_sent_at',
        ),
        migrations.RemoveField(
            model_name='qualificationattempt',
            name='mturk_request_id',
        ),
    ]
