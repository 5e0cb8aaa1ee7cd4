from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("modeling", "0002_run_recipe"),
        ("modeling", "0002_run_warnings"),
    ]

    operations = []
