from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0010_gemini_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="attempt",
            name="cooldown_s",
            field=models.FloatField(blank=True, null=True, verbose_name="cooling earned (s)"),
        ),
        migrations.AddField(
            model_name="healthtransition",
            name="call_id",
            field=models.CharField(blank=True, db_index=True, default="", max_length=64),
        ),
    ]
