# Clips get an owner: a project's uploads are its own, de-duplicated within the project;
# AudioSet segments stay site-wide. 0008 gives the clips of today their owners.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0002_project_audio_sample_rate'),
        ('curation', '0006_clip_video_features'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='clip',
            name='clip_local_content_once',
        ),
        migrations.AddField(
            model_name='clip',
            name='project',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='clips', to='core.project'),
        ),
        migrations.AddConstraint(
            model_name='clip',
            constraint=models.UniqueConstraint(condition=models.Q(('project__isnull', False), ('source', 'local'), models.Q(('content_sha256', ''), _negated=True)), fields=('project', 'content_sha256'), name='clip_local_content_once_per_project'),
        ),
        migrations.AddConstraint(
            model_name='clip',
            constraint=models.UniqueConstraint(condition=models.Q(('project__isnull', True), ('source', 'local'), models.Q(('content_sha256', ''), _negated=True)), fields=('content_sha256',), name='clip_local_content_once_site_wide'),
        ),
        migrations.AddConstraint(
            model_name='clip',
            constraint=models.CheckConstraint(condition=models.Q(('source', 'local'), ('project__isnull', True), _connector='OR'), name='clip_youtube_site_wide'),
        ),
    ]
