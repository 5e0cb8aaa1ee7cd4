# Imported captions belong to the project they were imported into (curation 0008 fills
# the column, 0006 then requires it), not to every project that holds their clip.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0004_mturk'),
        ('core', '0002_project_audio_sample_rate'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='caption',
            name='caption_imported_once',
        ),
        migrations.AddField(
            model_name='caption',
            name='imported_into',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='imported_captions', to='core.project'),
        ),
        migrations.AddConstraint(
            model_name='caption',
            constraint=models.UniqueConstraint(condition=models.Q(('provenance', 'imported')), fields=('imported_into', 'clip', 'external_id'), name='caption_imported_once_per_project'),
        ),
    ]
