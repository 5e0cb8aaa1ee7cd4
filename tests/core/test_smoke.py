from __future__ import annotations

from typing import Any

from tests.conftest import login


def test_it_shows_the_home_page_to_a_member(project: Any, ann: Any) -> None:
    response = login(ann).get("/")
    assert response.status_code == 200
    assert b"Everyday sounds" in response.content
