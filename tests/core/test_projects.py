"""Researchers create projects and choose the sample rate their clips are stored at.

Alice may create projects because she researches one (the `project` fixture)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from core.models import Project
from tests.conftest import login


def test_a_new_project_stores_clips_at_32k_unless_told(alice: Any, project: Project) -> None:
    response = login(alice).post(reverse("project_new"), {"name": "Birds", "audio_sample_rate": ""})
    assert response.status_code == 200  # the form wants a rate: the field is required

    login(alice).post(reverse("project_new"), {"name": "Birds", "audio_sample_rate": "32000"})
    assert Project.objects.get(slug="birds").audio_sample_rate == 32_000


def test_the_researcher_picks_the_projects_sample_rate(alice: Any, project: Project) -> None:
    response = login(alice).post(
        reverse("project_new"), {"name": "Clotho-like", "audio_sample_rate": "44100"}
    )

    project = Project.objects.get(slug="clotho-like")
    assert response.status_code == 302
    assert project.audio_sample_rate == 44_100


def test_the_form_refuses_a_rate_it_does_not_offer(alice: Any, project: Project) -> None:
    response = login(alice).post(
        reverse("project_new"), {"name": "Odd", "audio_sample_rate": "12345"}
    )

    assert response.status_code == 200
    assert "12345 is not one of the available choices" in response.content.decode()
    assert not Project.objects.filter(slug="odd").exists()


def test_the_database_refuses_an_unsupported_rate(project: Project) -> None:
    project.audio_sample_rate = 12_345
    with pytest.raises(IntegrityError), transaction.atomic():
        project.save(update_fields=["audio_sample_rate"])
