from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0005_caption_imported_into'),
        ('curation', '0008_clips_and_captions_to_their_projects'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='caption',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('imported_into__isnull', True), ('provenance', 'crowd')), models.Q(('imported_into__isnull', False), ('provenance', 'imported')), _connector='OR'), name='caption_imported_into_a_project'),
        ),
    ]
