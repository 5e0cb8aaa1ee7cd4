"""The shared ontology loses its curation columns; 0007 copied them to every project."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("curation", "0007_label_curation_per_project")]

    operations = [
        migrations.RemoveField(model_name="label", name="curation_note"),
        migrations.RemoveField(model_name="label", name="excluded"),
        migrations.RemoveField(model_name="label", name="needs_expertise"),
        migrations.RemoveField(model_name="label", name="needs_visuals"),
    ]
