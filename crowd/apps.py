from __future__ import annotations

from django.apps import AppConfig


class CrowdConfig(AppConfig):
    name = "crowd"
    verbose_name = "Crowd: reviews, qualifications, blocks, bonuses and the money ledger"
