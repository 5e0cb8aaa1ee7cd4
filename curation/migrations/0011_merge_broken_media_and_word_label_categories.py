from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0010_clip_media_broken"),
        ("curation", "0010_word_label_extra_categories"),
    ]

    operations = []
