"""What the HIT page's caption boxes start from before the worker types.

annotation knows no model. An app built on it registers a provider here in its
`AppConfig.ready()` (active: in an edit-mode batch, the promoted run's suggestion for each
clip), so the page can show it without annotation importing that app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.models import Assignment

# A provider maps clip ids to starting texts for one assignment; later providers win.
StartingTexts = Callable[["Assignment"], dict[int, str]]

PROVIDERS: dict[str, StartingTexts] = {}


def provider_register(*, name: str, provider: StartingTexts) -> None:
    """Registers (or replaces, so a reloaded app config adds no copy) a named provider."""
    PROVIDERS[name] = provider


def starting_texts(*, assignment: Assignment) -> dict[int, str]:
    """Each clip's starting text from every registered provider."""
    texts: dict[int, str] = {}
    for provider in PROVIDERS.values():
        texts.update(provider(assignment))
    return texts
