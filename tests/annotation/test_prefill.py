"""annotation.prefill: the hook through which apps above annotation prefill caption boxes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from annotation import prefill
from annotation.models import Assignment


@pytest.fixture
def providers() -> Iterator[dict[str, prefill.StartingTexts]]:
    saved = dict(prefill.PROVIDERS)
    prefill.PROVIDERS.clear()
    yield prefill.PROVIDERS
    prefill.PROVIDERS.clear()
    prefill.PROVIDERS.update(saved)


def test_active_registers_its_suggestions_when_django_starts() -> None:
    assert "active.presuggestions" in prefill.PROVIDERS


def test_no_provider_prefills_nothing(providers: Any) -> None:
    assert prefill.starting_texts(assignment=Assignment()) == {}


def test_later_providers_win_per_clip(providers: Any) -> None:
    prefill.provider_register(name="first", provider=lambda a: {1: "a dog barks", 2: "rain"})
    prefill.provider_register(name="second", provider=lambda a: {2: "heavy rain"})
    assert prefill.starting_texts(assignment=Assignment()) == {
        1: "a dog barks",
        2: "heavy rain",
    }


def test_registering_a_name_again_replaces_it(providers: Any) -> None:
    prefill.provider_register(name="same", provider=lambda a: {1: "old"})
    prefill.provider_register(name="same", provider=lambda a: {1: "new"})
    assert prefill.starting_texts(assignment=Assignment()) == {1: "new"}
