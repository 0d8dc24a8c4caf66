from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0007_call_trace_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="attempt",
            name="continuation",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
