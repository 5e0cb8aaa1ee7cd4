"""The curation pages: who may open and change what, and what researchers can do there.

Olive (a researcher elsewhere) gets 404 everywhere in Alice's project; Ann (annotator) gets
403; Rey (reviewer) reads every page but every change is 403; Alice does everything.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, reverse

from core.models import Job, Role
from core.services import membership_add
from curation import urls as curation_urls
from curation import views
from curation.audiocaps import FLAG_SET, read_flags
from curation.models import Clip, Label, LabelCuration, Recipe, Subset, SubsetClip, WordLabel
from curation.recipes import FLAGS, PRESETS, RecipeSpec, spec_from_text, spec_to_text
from curation.services import RECIPE_FILE_MAX_BYTES
from tests.conftest import login, streamed
from tests.curation.conftest import Curation

URL = Callable[[Curation], str]


def _toml(name: str = "Uploaded", **fields: Any) -> SimpleUploadedFile:
    text = spec_to_text(RecipeSpec(segment_lists=["balanced"], **fields), fmt="toml", name=name)
    return SimpleUploadedFile(f"{name.lower()}.toml", text.encode())


def _recipe_form(c: Curation, **changes: Any) -> dict[str, Any]:
    data = {
        "name": c.recipe.name,
        "segment_lists": ["balanced"],
        "min_clips_per_label": "0",
        "excluded_subtrees": "",
        "drop_clips_with_excluded_labels": "on",
        "excluded_flags": ["excluded"],
        "exclude_abstract": "on",
        "exclude_blacklisted": "on",
        "word_label_set": "site",
        "max_clips_per_label": "",
        "max_label_share": "",
        "val_size": "2",
        "test_size": "2",
        "captions_per_train_clip": "1",
        "captions_per_val_clip": "5",
        "captions_per_test_clip": "5",
        "seed": "0",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


# Pages anyone with a curation role (researcher, reviewer) may open.
PAGES: dict[str, URL] = {
    "ontology": lambda c: reverse("ontology", args=[c.project.slug]),
    "recipe_list": lambda c: reverse("recipe_list", args=[c.project.slug]),
    "recipe_detail": lambda c: reverse("recipe_detail", args=[c.project.slug, c.recipe.slug]),
    "recipe_export": lambda c: reverse(
        "recipe_export", args=[c.project.slug, c.recipe.slug, "toml"]
    ),
    "subset_list": lambda c: reverse("subset_list", args=[c.project.slug]),
    "subset_detail": lambda c: reverse("subset_detail", args=[c.project.slug, c.subset.slug]),
    "subset_chart": lambda c: reverse("subset_chart", args=[c.project.slug, c.subset.slug]),
    "clip_list": lambda c: reverse("clip_list", args=[c.project.slug]),
    "clip_audio": lambda c: reverse("clip_audio", args=[c.project.slug, c.clip.pk]),
    "clip_video": lambda c: reverse("clip_video", args=[c.project.slug, c.clip.pk]),
}
# Changes only researchers may make: URL and a POST body that works for Alice.
ACTIONS: dict[str, tuple[URL, Callable[[Curation], dict[str, Any]]]] = {
    "label_curate": (
        lambda c: reverse("label_curate", args=[c.project.slug, c.label.pk]),
        lambda c: {"excluded": "on", "note": "too broad"},
    ),
    "label_flags_apply": (
        lambda c: reverse("label_flags_apply", args=[c.project.slug]),
        lambda c: {},
    ),
    "recipe_new": (
        lambda c: reverse("recipe_new", args=[c.project.slug]),
        lambda c: {"name": "Fresh", "preset": "audiocaps"},
    ),
    "recipe_import": (
        lambda c: reverse("recipe_import", args=[c.project.slug]),
        lambda c: {"file": _toml()},
    ),
    "recipe_detail": (
        PAGES["recipe_detail"],
        lambda c: _recipe_form(c, name="Renamed", seed="7"),
    ),
    "recipe_upload": (
        lambda c: reverse("recipe_upload", args=[c.project.slug, c.recipe.slug]),
        lambda c: {"file": _toml(seed=9)},
    ),
    "recipe_build": (
        lambda c: reverse("recipe_build", args=[c.project.slug, c.recipe.slug]),
        lambda c: {"name": "Mine"},
    ),
    "subset_fetch": (
        lambda c: reverse("subset_fetch", args=[c.project.slug, c.subset.slug]),
        lambda c: {},
    ),
    "clip_import": (
        lambda c: reverse("clip_import", args=[c.project.slug]),
        lambda c: {"archive": _zip_of_one_wav()},
    ),
}
# Site-wide changes, for staff only (the word labels are the shared ontology's)
STAFF_ACTIONS: dict[str, URL] = {
    "word_labels_import_audiocaps": lambda c: reverse("word_labels_import_audiocaps"),
}
# researchers-only pages that show their form on GET
RESEARCHER_FORMS = {"clip_import"}
POST_ONLY = [name for name in ACTIONS if name not in PAGES and name not in RESEARCHER_FORMS]


def _zip_of_one_wav() -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("a.wav", b"RIFF")
    return SimpleUploadedFile("a.zip", buffer.getvalue(), content_type="application/zip")


def _state(c: Curation) -> tuple[Any, ...]:
    """Everything the actions could change."""
    recipes = sorted(Recipe.objects.values_list("slug", "name", "spec"), key=str)
    flags = sorted(LabelCuration.objects.values_list("project", "label", *FLAGS, "note"))
    words = sorted(Label.objects.values_list("pk", "word_label"), key=str)
    return (flags, words, recipes, Subset.objects.count(), Job.objects.count())


def _post(client: Client, name: str, c: Curation) -> Any:
    url, body = ACTIONS[name]
    return client.post(url(c), body(c))


# Coverage of the URL table -------------------------------------------------------------


def test_it_covers_every_url_in_curation_urls() -> None:
    names = {p.name for p in curation_urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == set(PAGES) | set(ACTIONS) | set(STAFF_ACTIONS)


# Anonymous -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAGES))
def test_it_sends_anonymous_visitors_to_log_in(curation: Curation, name: str) -> None:
    url = PAGES[name](curation)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


# Olive, the outsider -------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAGES))
def test_it_hides_every_page_from_olive(curation: Curation, olive: Any, name: str) -> None:
    response = login(olive).get(PAGES[name](curation))
    assert response.status_code == 404


@pytest.mark.parametrize("name", list(ACTIONS))
def test_it_refuses_olives_changes_with_404(curation: Curation, olive: Any, name: str) -> None:
    before = _state(curation)
    response = _post(login(olive), name, curation)
    assert response.status_code == 404
    assert _state(curation) == before


@pytest.mark.parametrize(
    "url",
    [
        lambda c: reverse("clip_audio", args=["birds", c.clip.pk]),
        lambda c: reverse("clip_video", args=["birds", c.clip.pk]),
        lambda c: reverse("recipe_detail", args=["birds", c.recipe.slug]),
        lambda c: reverse("subset_detail", args=["birds", c.subset.slug]),
        lambda c: reverse("subset_chart", args=["birds", c.subset.slug]),
        lambda c: reverse("clip_list", args=["birds"]) + f"?subset={c.subset.slug}",
    ],
    ids=["audio", "video", "recipe", "subset", "chart", "clips"],
)
def test_it_keeps_alices_objects_out_of_olives_own_project(
    curation: Curation, olive: Any, url: URL
) -> None:
    response = login(olive).get(url(curation))
    assert response.status_code == 404


# Ann and Rey: members who may not curate -----------------------------------------------


@pytest.mark.parametrize("persona", ["ann", "rey"])
@pytest.mark.parametrize("name", list(ACTIONS))
def test_it_forbids_every_change_to_annotators_and_reviewers(
    curation: Curation, request: pytest.FixtureRequest, persona: str, name: str
) -> None:
    before = _state(curation)
    response = _post(login(request.getfixturevalue(persona)), name, curation)
    assert response.status_code == 403
    assert _state(curation) == before


# Ann, an annotator ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAGES))
def test_it_forbids_every_page_to_annotators(curation: Curation, ann: Any, name: str) -> None:
    response = login(ann).get(PAGES[name](curation))
    assert response.status_code == 403


def test_it_gives_annotators_no_curation_links(curation: Curation, ann: Any) -> None:
    response = login(ann).get(curation.project.get_absolute_url())
    assert response.status_code == 200
    assert b'data-testid="curation"' not in response.content


# Rey, a reviewer -----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAGES))
def test_it_opens_every_page_to_reviewers(curation: Curation, rey: Any, name: str) -> None:
    response = login(rey).get(PAGES[name](curation))
    assert response.status_code == 200


def test_it_shows_reviewers_the_ontology_without_forms(curation: Curation, rey: Any) -> None:
    response = login(rey).get(PAGES["ontology"](curation))
    assert response.status_code == 200
    assert b'class="curate"' not in response.content
    assert b"read-only" in response.content


def test_it_shows_reviewers_a_disabled_recipe_editor(curation: Curation, rey: Any) -> None:
    response = login(rey).get(PAGES["recipe_detail"](curation))
    assert response.status_code == 200
    assert b"Save recipe" not in response.content
    assert b"recipe_preview.js" not in response.content
    assert re.search(rb'name="seed"[^>]*disabled', response.content)


def test_it_shows_reviewers_a_subset_without_fetch_or_jobs(curation: Curation, rey: Any) -> None:
    response = login(rey).get(PAGES["subset_detail"](curation))
    assert response.status_code == 200
    assert b'data-testid="fetch"' not in response.content
    assert b'data-testid="jobs"' not in response.content


# Alice, the researcher -----------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAGES))
def test_it_opens_every_page_to_researchers(curation: Curation, alice: Any, name: str) -> None:
    response = login(alice).get(PAGES[name](curation))
    assert response.status_code == 200


@pytest.mark.parametrize("name", POST_ONLY)
def test_it_refuses_get_on_post_only_urls(curation: Curation, alice: Any, name: str) -> None:
    response = login(alice).get(ACTIONS[name][0](curation))
    assert response.status_code == 405


def test_it_refuses_get_on_the_staff_actions(curation: Curation, staff: Any) -> None:
    for url in STAFF_ACTIONS.values():
        assert login(staff).get(url(curation)).status_code == 405


def test_it_links_the_curation_pages_from_the_project(curation: Curation, alice: Any) -> None:
    response = login(alice).get(curation.project.get_absolute_url())
    assert response.status_code == 200
    assert b'data-testid="curation"' in response.content
    assert PAGES["ontology"](curation).encode() in response.content
    assert b'data-testid="members"' in response.content


# Ontology ------------------------------------------------------------------------------


def test_it_renders_the_whole_ontology_in_a_few_queries(
    curation: Curation, alice: Any, django_assert_max_num_queries: Any
) -> None:
    client = login(alice)
    with django_assert_max_num_queries(12):
        response = client.get(PAGES["ontology"](curation))
    assert response.status_code == 200
    html = response.content.decode()
    ids = re.findall(r'<details class="label[^"]*" id="label-(\d+)"', html)
    assert len(ids) == len(set(ids)) == Label.objects.count() == 632
    assert html.count('class="curate"') == 632


def test_it_counts_clips_per_list_for_each_label(curation: Curation, alice: Any) -> None:
    response = login(alice).get(PAGES["ontology"](curation))
    html = response.content.decode()
    row = html[html.index(f'id="label-{curation.label.pk}"') :]
    counts = re.search(r'<span class="counts">(.*?)</span>\s*</summary>', row, re.S)
    assert counts is not None
    assert re.findall(r">(\d+)<", counts.group(1)) == ["9", "0", "0"]


def test_it_filters_the_ontology_by_name_keeping_ancestors(curation: Curation, alice: Any) -> None:
    response = login(alice).get(PAGES["ontology"](curation), {"q": "speech"})
    html = response.content.decode()
    assert 'data-mid="/m/09x0r"' in html  # Speech
    assert 'data-mid="/m/09l8g"' in html  # Human voice, its parent, shown opened
    assert re.search(r'id="label-\d+" data-mid="/m/09l8g" open', html)
    assert 'data-mid="/m/04rlf"' not in html  # Music
    assert "labels match “speech”" in html


def test_it_saves_a_labels_flags_and_returns_to_it(curation: Curation, alice: Any) -> None:
    label = curation.label
    url, _ = ACTIONS["label_curate"]
    response = login(alice).post(
        url(curation), {"needs_visuals": "on", "note": " who speaks? ", "q": "spee"}
    )
    assert response.status_code == 302
    assert response["Location"] == (
        f"{PAGES['ontology'](curation)}?focus={label.pk}&q=spee#label-{label.pk}"
    )
    saved = LabelCuration.objects.get(project=curation.project, label=label)
    assert (saved.needs_visuals, saved.needs_expertise, saved.excluded) == (True, False, False)
    assert saved.note == "who speaks?"
    page = login(alice).get(response["Location"]).content.decode()
    assert re.search(rf'id="label-{label.pk}" data-mid="/m/09x0r" open', page)


def test_the_ontology_page_shows_only_this_projects_flags(
    curation: Curation, alice: Any, olive: Any
) -> None:
    login(olive).post(
        reverse("label_curate", args=["birds", curation.label.pk]),
        {"excluded": "on", "note": "birds only"},
    )

    html = login(alice).get(PAGES["ontology"](curation), {"q": "speech"}).content.decode()

    assert "birds only" not in html
    assert 'class="badge flag-excluded"' not in html
    assert not LabelCuration.objects.filter(project=curation.project).exists()


def test_it_applies_the_audiocaps_flags_from_the_ontology_page(
    curation: Curation, alice: Any
) -> None:
    url, body = ACTIONS["label_flags_apply"]

    response = login(alice).post(url(curation), body(curation), follow=True)

    assert response.redirect_chain == [(PAGES["ontology"](curation), 302)]
    room = LabelCuration.objects.get(project=curation.project, label__mid="/t/dd00125")
    assert room.needs_visuals
    total = len(read_flags(FLAG_SET, known=FLAGS))
    assert f"{total} of the {total} AudioCaps flags are set" in response.content.decode()


@pytest.mark.parametrize("who", ["alice", "rey", "ann", "olive"])
def test_it_refuses_the_shared_word_labels_to_everyone_but_staff(
    curation: Curation, request: pytest.FixtureRequest, who: str
) -> None:
    before = _state(curation)

    response = login(request.getfixturevalue(who)).post(
        STAFF_ACTIONS["word_labels_import_audiocaps"](curation)
    )

    assert response.status_code == 403
    assert _state(curation) == before


def test_staff_import_the_audiocaps_word_labels_from_a_projects_ontology_page(
    curation: Curation, staff: Any
) -> None:
    membership_add(project=curation.project, user=staff, role=Role.RESEARCHER)
    page = PAGES["ontology"](curation)

    response = login(staff).post(
        STAFF_ACTIONS["word_labels_import_audiocaps"](curation), {"next": page}, follow=True
    )

    assert response.redirect_chain == [(page, 302)]
    assert WordLabel.objects.get(name="hiss").super_categories == [
        "other_things",
        "source_ambiguous",
        "animal",
    ]
    assert "69 of the 69 AudioSet labels" in response.content.decode()


def test_the_word_label_import_goes_back_to_this_site_only(curation: Curation, staff: Any) -> None:
    response = login(staff).post(
        STAFF_ACTIONS["word_labels_import_audiocaps"](curation), {"next": "https://evil.test/"}
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("home")


@pytest.mark.parametrize(("user", "offered"), [("alice", False), ("staff", True)])
def test_it_offers_the_word_label_import_to_staff_only(
    curation: Curation, request: pytest.FixtureRequest, user: str, offered: bool
) -> None:
    person = request.getfixturevalue(user)
    membership_add(project=curation.project, user=person, role=Role.RESEARCHER)

    html = login(person).get(PAGES["ontology"](curation)).content.decode()

    assert ('data-testid="import-audiocaps-words"' in html) is offered
    assert 'data-testid="apply-audiocaps-flags"' in html


def test_it_404s_curating_an_unknown_label(curation: Curation, alice: Any) -> None:
    response = login(alice).post(reverse("label_curate", args=[curation.project.slug, 999999]))
    assert response.status_code == 404


# Recipes -------------------------------------------------------------------------------


def test_it_creates_a_recipe_from_a_preset(curation: Curation, alice: Any) -> None:
    response = _post(login(alice), "recipe_new", curation)
    recipe = Recipe.objects.get(project=curation.project, slug="fresh")
    assert response.status_code == 302
    assert response["Location"] == reverse("recipe_detail", args=["sounds", "fresh"])
    assert recipe.spec == PRESETS["audiocaps"].to_dict()
    assert recipe.created_by == alice


def test_it_creates_a_blank_recipe_with_the_defaults(curation: Curation, alice: Any) -> None:
    login(alice).post(ACTIONS["recipe_new"][0](curation), {"name": "Blank", "preset": ""})
    assert Recipe.objects.get(slug="blank").spec == RecipeSpec().to_dict()


@pytest.mark.parametrize(
    ("name", "message"),
    [("Balanced", "already has a recipe"), ("Import", "reserved address"), ("!!!", "letter")],
)
def test_it_refuses_a_new_recipe_name_that_cannot_be_used(
    curation: Curation, alice: Any, name: str, message: str
) -> None:
    before = _state(curation)
    response = login(alice).post(ACTIONS["recipe_new"][0](curation), {"name": name})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert _state(curation) == before


def test_it_saves_an_edited_recipe(curation: Curation, alice: Any) -> None:
    response = _post(login(alice), "recipe_detail", curation)
    assert response.status_code == 302
    curation.recipe.refresh_from_db()
    assert curation.recipe.name == "Renamed"
    assert curation.recipe.slug == "balanced"  # the address stays
    assert curation.recipe.spec["seed"] == 7
    assert curation.recipe.created_by == alice


def test_it_saves_the_audiocaps_recipes_switches_from_the_editor(
    curation: Curation, alice: Any
) -> None:
    form = _recipe_form(
        curation,
        word_label_set="audiocaps",
        only_word_labels="on",
        hard_cap="on",
        captions_per_val_clip="3",
    )

    response = login(alice).post(PAGES["recipe_detail"](curation), form)

    assert response.status_code == 302
    curation.recipe.refresh_from_db()
    spec = curation.recipe.spec
    assert (spec["word_label_set"], spec["only_word_labels"], spec["hard_cap"]) == (
        "audiocaps",
        True,
        True,
    )
    assert spec["captions_per_val_clip"] == 3


def test_it_opens_a_recipe_saved_before_the_new_fields_with_their_defaults(
    curation: Curation, alice: Any
) -> None:
    old = {k: v for k, v in curation.recipe.spec.items() if not k.startswith("captions_per")}
    Recipe.objects.filter(pk=curation.recipe.pk).update(spec=old)

    html = login(alice).get(PAGES["recipe_detail"](curation)).content.decode()

    assert re.search(r'name="captions_per_val_clip" value="5"', html)
    select = re.search(r'<select name="word_label_set"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None
    assert 'data-spec="text"' in select.group(0)
    assert re.findall(r'<option value="(\w+)"', select.group(1)) == ["site", "audiocaps"]


def test_it_offers_the_video_features_heights_on_the_editor(curation: Curation, alice: Any) -> None:
    html = login(alice).get(PAGES["recipe_detail"](curation)).content.decode()

    select = re.search(r'<select name="video_features_height"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None
    assert re.findall(r'<option value="(\d*)"', select.group(1)) == ["", "240", "360", "480"]
    assert 'data-spec="int"' in select.group(0)


def test_it_saves_and_exports_a_recipes_video_features_height(
    curation: Curation, alice: Any
) -> None:
    client = login(alice)
    body = _recipe_form(curation, video_features_height="360")

    response = client.post(PAGES["recipe_detail"](curation), body)

    assert response.status_code == 302
    curation.recipe.refresh_from_db()
    assert curation.recipe.spec["video_features_height"] == 360
    toml = client.get(PAGES["recipe_export"](curation)).content.decode()
    assert "video_features_height = 360" in toml
    client.post(PAGES["recipe_detail"](curation), _recipe_form(curation))  # back to none
    curation.recipe.refresh_from_db()
    assert curation.recipe.spec["video_features_height"] is None


def test_it_refuses_a_video_features_height_not_offered(curation: Curation, alice: Any) -> None:
    before = _state(curation)

    response = login(alice).post(
        PAGES["recipe_detail"](curation), _recipe_form(curation, video_features_height="1080")
    )

    assert response.status_code == 200
    assert 'data-testid="error-video_features_height"' in response.content.decode()
    assert _state(curation) == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_label_share", "1.5", "a fraction between 0 and 1"),
        ("test_size", "0.6", "val and test fractions must leave some train"),
        ("segment_lists", [], "a non-empty list"),
        ("excluded_subtrees", "Music, Jazzz", "No label named Jazzz"),
        ("min_clips_per_label", "many", "Enter a whole number"),
        ("val_size", "a tenth", "Enter a count (500) or a fraction (0.1)"),
    ],
)
def test_it_shows_a_bad_value_next_to_its_field_and_stores_nothing(
    curation: Curation, alice: Any, field: str, value: Any, message: str
) -> None:
    before = _state(curation)
    body = _recipe_form(curation, **{field: value})
    if field == "test_size":  # with val 0.5, nothing is left for train
        body["val_size"] = "0.5"
    response = login(alice).post(PAGES["recipe_detail"](curation), body)
    assert response.status_code == 200
    html = response.content.decode()
    errors = re.search(rf'data-testid="error-{field}">([^<]*)<', html)
    assert errors is not None, html[:2000]
    assert message in errors.group(1).replace("&#x27;", "'")
    assert f'href="#id_{field}">{field}</a>' in html  # named at the top too
    assert _state(curation) == before


def test_it_exports_toml_that_round_trips(curation: Curation, alice: Any) -> None:
    client = login(alice)
    response = client.get(PAGES["recipe_export"](curation))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/toml")
    assert response["Content-Disposition"] == 'attachment; filename="balanced.toml"'
    text = response.content.decode()
    assert spec_from_text(text, fmt="toml") == RecipeSpec.from_dict(curation.recipe.spec)

    again = text.replace('name = "Balanced"', 'name = "Balanced again"')
    upload = SimpleUploadedFile("again.toml", again.encode())
    client.post(ACTIONS["recipe_import"][0](curation), {"file": upload})
    assert Recipe.objects.get(slug="balanced-again").spec == curation.recipe.spec


def test_it_exports_json(curation: Curation, alice: Any) -> None:
    url = reverse("recipe_export", args=[curation.project.slug, curation.recipe.slug, "json"])
    response = login(alice).get(url)
    assert response["Content-Disposition"] == 'attachment; filename="balanced.json"'
    assert response.json()["name"] == "Balanced"
    assert spec_from_text(response.content.decode(), fmt="json").val_size == 2


def test_it_404s_an_unknown_export_format(curation: Curation, alice: Any) -> None:
    url = reverse("recipe_export", args=[curation.project.slug, curation.recipe.slug, "yaml"])
    assert login(alice).get(url).status_code == 404


def test_it_imports_a_recipe_file_as_a_new_recipe(curation: Curation, alice: Any) -> None:
    response = _post(login(alice), "recipe_import", curation)
    assert response.status_code == 302
    assert response["Location"] == reverse("recipe_detail", args=["sounds", "uploaded"])
    assert Recipe.objects.get(slug="uploaded").spec["segment_lists"] == ["balanced"]


def test_it_replaces_a_recipes_spec_from_a_file(curation: Curation, alice: Any) -> None:
    response = _post(login(alice), "recipe_upload", curation)
    assert response.status_code == 302
    curation.recipe.refresh_from_db()
    assert curation.recipe.spec["seed"] == 9
    assert curation.recipe.name == "Balanced"


@pytest.mark.parametrize(
    ("upload", "message"),
    [
        (
            SimpleUploadedFile("big.toml", b"#" * (RECIPE_FILE_MAX_BYTES + 1)),
            "at most 64 KB",
        ),
        (SimpleUploadedFile("recipe.txt", b"seed = 1\n"), "ends in .toml or .json"),
        (SimpleUploadedFile("recipe.json", b"{not json"), "not valid JSON"),
        (SimpleUploadedFile("recipe.toml", b"seed = 'x'\n"), "seed: a whole number"),
        (SimpleUploadedFile("recipe.toml", b"\xff\xfe\x00"), "not UTF-8"),
        (SimpleUploadedFile("recipe.toml", b"colour = 1\n"), "unknown recipe field(s) colour"),
        (
            SimpleUploadedFile("recipe.json", b'{"seed": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"),
            "not valid JSON: nested too deeply",
        ),
        (
            SimpleUploadedFile("recipe.toml", b"seed = 1" + b"0" * 5_000),
            "not valid TOML: a number is too long",
        ),
        (
            SimpleUploadedFile("recipe.toml", b"min_clips_per_label = 1" + b"0" * 4_000),
            "min_clips_per_label: a whole number from 0 to 1,000,000,000",
        ),
        (SimpleUploadedFile("recipe.toml", b"seed = -1\n"), "seed: a whole number from 0 to"),
    ],
    ids=[
        "too-big",
        "wrong-type",
        "bad-json",
        "bad-value",
        "binary",
        "unknown-field",
        "deep-nesting",
        "5000-digits",
        "4000-digits",
        "negative-seed",
    ],
)
@pytest.mark.parametrize("where", ["recipe_import", "recipe_upload"])
def test_it_rejects_a_bad_recipe_file_clearly(
    curation: Curation, alice: Any, upload: SimpleUploadedFile, message: str, where: str
) -> None:
    upload.seek(0)
    before = _state(curation)
    response = login(alice).post(ACTIONS[where][0](curation), {"file": upload}, follow=True)
    assert response.status_code == 200
    html = response.content.decode().replace("&#x27;", "'")
    assert re.search(r'class="flash error"[^>]*>Not imported: [^<]*' + re.escape(message), html)
    assert _state(curation) == before


def test_it_asks_for_a_file_when_none_is_sent(curation: Curation, alice: Any) -> None:
    response = login(alice).post(ACTIONS["recipe_import"][0](curation), follow=True)
    assert "Choose a .toml or .json recipe file" in response.content.decode()


def test_it_queues_a_subset_build_and_shows_its_job(
    curation: Curation, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _post(login(alice), "recipe_build", curation)
    job = Job.objects.get(kind="subset_build")
    assert response.status_code == 302
    assert response["Location"] == job.get_absolute_url()
    assert job.params == {"recipe_id": curation.recipe.pk, "name": "Mine"}
    assert (job.project, job.created_by, job.state) == (curation.project, alice, Job.State.QUEUED)
    assert len(callbacks) == 1  # sent to the broker on commit, not before
    assert Subset.objects.count() == 1  # nothing built in the request


def test_it_lists_recipes_with_their_subset_counts(curation: Curation, rey: Any) -> None:
    response = login(rey).get(PAGES["recipe_list"](curation))
    html = response.content.decode()
    assert PAGES["recipe_detail"](curation) in html
    assert "<td>1</td>" in html
    assert 'data-testid="recipe-new"' not in html  # reviewers cannot create


# Subsets -------------------------------------------------------------------------------


def test_it_shows_a_subsets_report_and_fetch_state(curation: Curation, alice: Any) -> None:
    response = login(alice).get(PAGES["subset_detail"](curation))
    html = response.content.decode()
    report = curation.subset.report
    assert report["selected_clips"] == 50
    assert "<tr><th>Selected clips</th><td>50</td></tr>" in html
    assert '<strong data-status="ready">1</strong>' in html
    assert '<strong data-status="pending">49</strong>' in html
    assert "1 of 50 clips ready (2%)" in html
    assert PAGES["subset_chart"](curation) in html
    assert "/media/" not in html
    assert html.count("<tr><td><a href=") >= report["labels_kept"]
    assert 'data-testid="fetch"' in html


def test_it_serves_the_chart_to_members(curation: Curation, rey: Any) -> None:
    response = login(rey).get(PAGES["subset_chart"](curation))
    assert response["Content-Type"] == "image/png"
    assert streamed(response).startswith(b"\x89PNG")
    assert "private" in response["Cache-Control"]


def test_it_queues_a_fetch_and_shows_it_on_the_subset(
    curation: Curation, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    client = login(alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _post(client, "subset_fetch", curation)
    job = Job.objects.get(kind="clips_fetch")
    assert response.status_code == 302
    assert response["Location"] == PAGES["subset_detail"](curation)
    assert job.params == {"subset_id": curation.subset.pk}
    assert (job.project, job.created_by) == (curation.project, alice)
    assert len(callbacks) == 1
    page = client.get(response["Location"]).content.decode()
    assert f'data-job="{job.pk}" data-state="queued"' in page
    assert "jobs.js" in page


def test_it_explains_when_fetching_is_not_available(
    curation: Curation, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "JOB_KINDS", {})
    client = login(alice)
    assert b'data-testid="fetch"' not in client.get(PAGES["subset_detail"](curation)).content
    response = _post(client, "subset_fetch", curation)
    assert response.status_code == 302
    assert not Job.objects.exists()


def test_it_lists_subsets_with_their_progress(curation: Curation, rey: Any) -> None:
    html = login(rey).get(PAGES["subset_list"](curation)).content.decode()
    assert PAGES["subset_detail"](curation) in html
    assert "1 / 50 ready" in html


# Clips ---------------------------------------------------------------------------------


def _rows(response: Any) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-clip="(\d+)"', response.content.decode())]


def test_it_lists_only_the_projects_clips(curation: Curation, alice: Any) -> None:
    response = login(alice).get(PAGES["clip_list"](curation))
    rows = _rows(response)
    assert len(rows) == 50
    assert curation.stray.pk not in rows


def test_it_pages_the_clip_list(
    curation: Curation, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "CLIPS_PER_PAGE", 20)
    client = login(alice)
    url = PAGES["clip_list"](curation)
    last = client.get(url, {"status": "pending", "page": "3"})
    assert len(_rows(last)) == 9
    assert "page 3 of 3" in last.content.decode()
    first = client.get(url, {"status": "pending"}).content.decode()
    assert "?status=pending&amp;page=2" in first


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "ready"}, 1),
        ({"status": "failed"}, 0),
        ({"split": "val"}, 2),
        ({"label": "/m/09x0r"}, 9),
        ({"label": "speech"}, 9),
        ({"q": "--PJHxphWEs"}, 1),
    ],
)
def test_it_filters_clips(
    curation: Curation, alice: Any, query: dict[str, str], expected: int
) -> None:
    response = login(alice).get(
        PAGES["clip_list"](curation), {"subset": curation.subset.slug, **query}
    )
    assert len(_rows(response)) == expected


def test_it_says_when_a_label_filter_matches_no_label(curation: Curation, alice: Any) -> None:
    response = login(alice).get(PAGES["clip_list"](curation), {"label": "Jazzz"})
    assert _rows(response) == []
    assert "No label named or with id “Jazzz”" in response.content.decode()


def test_it_shows_a_player_and_video_link_for_ready_clips(curation: Curation, rey: Any) -> None:
    html = login(rey).get(PAGES["clip_list"](curation), {"status": "ready"}).content.decode()
    audio = PAGES["clip_audio"](curation)
    assert f'<audio controls preload="none" src="{audio}"></audio>' in html
    assert PAGES["clip_video"](curation) in html
    assert html.count("<audio") == 1


def test_it_shows_why_a_clip_failed(curation: Curation, alice: Any) -> None:
    Clip.objects.filter(pk=curation.clip.pk).update(
        status=Clip.Status.UNAVAILABLE, error="Video unavailable: removed by the uploader"
    )
    html = login(alice).get(PAGES["clip_list"](curation), {"status": "unavailable"})
    assert "Video unavailable: removed by the uploader" in html.content.decode()


def test_it_streams_a_clips_audio_to_members(curation: Curation, alice: Any, rey: Any) -> None:
    with open(curation.clip.audio.path, "rb") as handle:
        expected = handle.read()
    for user in (alice, rey):
        response = login(user).get(PAGES["clip_audio"](curation))
        assert response.status_code == 200
        assert response["Content-Type"] in ("audio/x-wav", "audio/wav")
        assert streamed(response) == expected


def test_it_404s_audio_of_a_clip_in_none_of_the_projects_subsets(
    curation: Curation, alice: Any
) -> None:
    url = reverse("clip_audio", args=[curation.project.slug, curation.stray.pk])
    assert login(alice).get(url).status_code == 404


def test_it_404s_audio_a_clip_does_not_have(curation: Curation, alice: Any) -> None:
    pending = SubsetClip.objects.filter(subset=curation.subset).exclude(clip=curation.clip)[0]
    url = reverse("clip_audio", args=[curation.project.slug, pending.clip_id])
    assert login(alice).get(url).status_code == 404


def test_it_404s_audio_whose_file_is_gone_saying_so_and_fails_the_clip(
    curation: Curation, alice: Any
) -> None:
    name = curation.clip.audio.name
    curation.clip.audio.storage.delete(name)

    response = login(alice).get(PAGES["clip_audio"](curation))

    assert response.status_code == 404
    assert f"its audio file {name} is missing from storage" in response.content.decode()
    html = login(alice).get(PAGES["clip_list"](curation), {"status": "failed"}).content.decode()
    assert f"Broken after it was stored: its audio file {name} is missing from storage" in html


def test_it_serves_no_noise_as_audio(curation: Curation, alice: Any) -> None:
    with curation.clip.audio.storage.open(curation.clip.audio.name, "wb") as handle:
        handle.write(bytes(range(256)) * 16)

    response = login(alice).get(PAGES["clip_audio"](curation))

    assert response.status_code == 404
    assert "is not readable audio" in response.content.decode()
    curation.clip.refresh_from_db()
    assert curation.clip.status == Clip.Status.FAILED
