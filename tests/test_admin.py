"""The admin covers every row Earmark stores (README: "every row is in the admin"): each
model of Earmark's apps is registered, or edited inline on the page of one that is, and
reads with proper names ("Batches", "HITs", not "Batchs", "Hits")."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.db.models import Model
from django.test import Client

EARMARK_APPS = (
    "core",
    "curation",
    "annotation",
    "crowd",
    "postprocessing",
    "corpus",
    "modeling",
    "active",
    "demo",
)


def _models() -> list[type[Model]]:
    return [
        model
        for name in EARMARK_APPS
        for model in apps.get_app_config(name).get_models(include_auto_created=False)
    ]


def _inline_models() -> set[type[Model]]:
    return {
        inline.model
        for model_admin in admin.site._registry.values()
        for inline in model_admin.inlines
    }


def test_every_model_is_in_the_admin() -> None:
    inline = _inline_models()

    missing = [m._meta.label for m in _models() if not admin.site.is_registered(m)]

    assert [label for label in missing if apps.get_model(label) not in inline] == []


# a plural Django made by adding "s": "Batchs", "categorys", "statisticss", "serveds"
BAD_PLURAL = re.compile(r"(?:[^aeiou]ys|[cs]hs|ss|eds)$")


def test_every_model_has_a_proper_plural() -> None:
    bad = [
        f"{m._meta.label}: {m._meta.verbose_name_plural}"
        for m in _models()
        if BAD_PLURAL.search(str(m._meta.verbose_name_plural))
    ]

    assert bad == []


@pytest.mark.parametrize(
    ("label", "plural"),
    [
        ("annotation.Batch", "batches"),
        ("annotation.Hit", "HITs"),
        ("annotation.ClipAudioServed", "clip audio served records"),
        ("core.ApiToken", "API tokens"),
    ],
)
def test_names_read_as_people_say_them(label: str, plural: str) -> None:
    assert apps.get_model(label)._meta.verbose_name_plural == plural


@pytest.mark.django_db
def test_every_admin_list_opens(admin_client: Client) -> None:
    broken = []
    for model in admin.site._registry:
        meta = model._meta
        response = admin_client.get(f"/admin/{meta.app_label}/{meta.model_name}/")
        if response.status_code != 200:
            broken.append(f"{meta.label}: {response.status_code}")

    assert broken == []
