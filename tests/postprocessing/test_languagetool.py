"""The LanguageTool client against real HTTP servers on 127.0.0.1 speaking /v2/check JSON."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from postprocessing import languagetool
from postprocessing.languagetool import (
    Config,
    LanguageToolClient,
    LanguageToolUnavailable,
    Match,
    apply_matches,
)
from tests.postprocessing.lt_server import FakeLanguageTool, find_matches


def _client(server: FakeLanguageTool, **config: object) -> LanguageToolClient:
    return LanguageToolClient(Config(url=server.url, **config))  # type: ignore[arg-type]


# apply_matches ---------------------------------------------------------------------------


def test_it_applies_the_first_replacement_of_each_match() -> None:
    matches = [
        Match(0, 1, ("An", "One"), "EN_A_VS_AN", "", "MISC"),
        Match(9, 6, ("barks",), "MORFOLOGIK_RULE_EN_US", "", "TYPOS"),
    ]
    correction = apply_matches("A owl is barkss", matches)
    assert correction.text == "An owl is barks"
    assert [(m["original"], m["replacement"]) for m in correction.applied] == [
        ("A", "An"),
        ("barkss", "barks"),
    ]


def test_it_ignores_a_match_that_overlaps_one_already_applied() -> None:
    repeat = Match(0, 3, ("a",), "ENGLISH_WORD_REPEAT_RULE", "", "MISC")
    a_vs_an = Match(2, 1, ("an",), "EN_A_VS_AN", "", "MISC")
    correction = apply_matches("a a owl", [a_vs_an, repeat])
    assert correction.text == "a owl"
    assert [m["rule"] for m in correction.applied] == ["ENGLISH_WORD_REPEAT_RULE"]
    assert correction.ignored[0]["rule"] == "EN_A_VS_AN"
    assert correction.ignored[0]["reason"] == "overlaps the correction by ENGLISH_WORD_REPEAT_RULE"


def test_it_ignores_a_match_without_suggestions() -> None:
    correction = apply_matches("xqzt", [Match(0, 4, (), "MORFOLOGIK_RULE_EN_US", "", "TYPOS")])
    assert correction.text == "xqzt"
    assert correction.ignored[0]["reason"] == "no replacement suggested"


# The client against the fake server ------------------------------------------------------


def test_it_corrects_texts_through_v2_check(lt_server: FakeLanguageTool) -> None:
    corrections = _client(lt_server).correct_many(["A owl hoots", "The the dgo barkss"])
    assert [c.text for c in corrections] == ["An owl hoots", "The dog barks"]
    assert lt_server.requests[0]["language"] == "en-US"


def test_it_sends_many_texts_per_request_as_paragraphs(lt_server: FakeLanguageTool) -> None:
    texts = [f"a owl hoots {i}" for i in range(50)]
    corrections = _client(lt_server).correct_many(texts)
    assert len(lt_server.requests) == 1
    assert lt_server.requests[0]["text"] == "\n\n".join(texts)
    assert all(c.text.startswith("an owl") for c in corrections)


def test_it_splits_batches_at_the_size_limit(lt_server: FakeLanguageTool) -> None:
    texts = ["a owl hoots loudly " * 3] * 40  # 57 characters + separator each
    client = _client(lt_server, max_chars=1_000)
    corrections = client.correct_many(texts)
    assert len(lt_server.requests) == 3  # 17 + 17 + 6
    assert all(len(r["text"]) <= 1_000 for r in lt_server.requests)
    assert all(c.text.count("an owl") == 3 for c in corrections)


def test_it_reuses_one_connection(lt_server: FakeLanguageTool) -> None:
    client = _client(lt_server, max_chars=1_000)
    client.correct_many(["a owl hoots loudly " * 3] * 40)
    assert len({r["client_port"] for r in lt_server.requests}) == 1


def test_it_converts_utf16_offsets_after_emoji(lt_server: FakeLanguageTool) -> None:
    # 🦉 is outside the BMP: two UTF-16 units before the match, one Python character
    text = "🦉🦉 a owl, then a eagle"
    assert find_matches(text)[0]["offset"] == 5  # Java's index; Python's is 3
    correction = _client(lt_server).correct_many([text])[0]
    assert correction.text == "🦉🦉 an owl, then an eagle"
    assert [m["offset"] for m in correction.applied] == [3, 15]


def test_it_converts_lengths_that_contain_emoji(lt_server: FakeLanguageTool) -> None:
    text = "🐝 buzz 🐝🐝 🐝🐝 then dgo"
    correction = _client(lt_server).correct_many([text])[0]
    assert correction.text == "🐝 buzz 🐝🐝 then dog"  # the repeat rule's match spans emoji


def test_it_keeps_offsets_right_in_later_texts_of_a_batch(lt_server: FakeLanguageTool) -> None:
    texts = ["😀 café crème", "naïve 🎵🎵 a owl", "a owl"]
    corrections = _client(lt_server).correct_many(texts)
    assert [c.text for c in corrections] == ["😀 café crème", "naïve 🎵🎵 an owl", "an owl"]


def test_it_applies_overlapping_matches_from_the_server_once(lt_server: FakeLanguageTool) -> None:
    correction = _client(lt_server).correct_many(["a a owl hoots"])[0]
    assert correction.text == "a owl hoots"
    assert [m["rule"] for m in correction.ignored] == ["EN_A_VS_AN", "EN_A_VS_AN"]


def test_it_sends_disabled_rules(lt_server: FakeLanguageTool) -> None:
    client = _client(lt_server, disabled_rules=("EN_A_VS_AN", "PUNCTUATION_PARAGRAPH_END"))
    assert client.correct_many(["a owl"])[0].text == "a owl"
    assert lt_server.requests[0]["disabledRules"] == "EN_A_VS_AN,PUNCTUATION_PARAGRAPH_END"


@pytest.mark.parametrize(
    ("fail", "message"),
    [(500, "answered HTTP 500: Error: the server is overloaded"), ("not-json", "not JSON")],
)
def test_it_reports_a_server_error(lt_server: FakeLanguageTool, fail: object, message: str) -> None:
    lt_server.fail = fail  # type: ignore[assignment]
    with pytest.raises(LanguageToolUnavailable, match=message):
        _client(lt_server).correct_many(["a owl"])


def test_it_reports_an_unreachable_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nobody listens
    client = LanguageToolClient(Config(url=f"http://127.0.0.1:{port}", timeout=5))
    with pytest.raises(LanguageToolUnavailable, match="unreachable"):
        client.correct_many(["a owl"])


# Where the server is -----------------------------------------------------------------------


def test_without_any_languagetool_it_says_why() -> None:
    with pytest.raises(LanguageToolUnavailable, match="LANGUAGETOOL_URL and LTP_JAR_DIR_PATH"):
        languagetool.client_for(Config())
    ok, detail = languagetool.describe(Config())
    assert not ok
    assert detail.startswith("not available")


def test_describe_pings_a_remote_server(lt_server: FakeLanguageTool) -> None:
    assert languagetool.describe(Config(url=lt_server.url)) == (True, f"server at {lt_server.url}")


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "is not a folder"),
        ("LanguageTool", "must keep its unzipped name LanguageTool-<version>"),
        ("LanguageTool-6.8", "holds no languagetool-server.jar or languagetool.jar"),
    ],
)
def test_it_refuses_an_unusable_offline_install(tmp_path: Path, layout: str, message: str) -> None:
    folder = tmp_path / layout
    if layout != "missing":
        folder.mkdir()
    with pytest.raises(LanguageToolUnavailable, match=message):
        languagetool.client_for(Config(jar_dir=str(folder)))
    assert languagetool.describe(Config(jar_dir=str(folder)))[0] is False


def test_it_starts_an_offline_install_once_per_process(lt_jar: Path) -> None:
    config = Config(jar_dir=str(lt_jar))
    client = languagetool.client_for(config)
    assert client.correct_many(["😀 a owl"])[0].text == "😀 an owl"  # Java's own offsets
    assert languagetool.client_for(config).base_url == client.base_url
    assert languagetool.describe(config) == (
        True,
        f"offline install of LanguageTool 6.8 in {lt_jar}",
    )


def test_it_starts_a_copy_from_the_download_cache(
    lt_jar: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / lt_jar.name).mkdir(parents=True)
    (cache / lt_jar.name / "languagetool-server.jar").write_bytes(
        (lt_jar / "languagetool-server.jar").read_bytes()
    )
    monkeypatch.setenv("LTP_PATH", str(cache))
    client = languagetool.client_for(Config())
    assert client.correct_many(["a eagle"])[0].text == "an eagle"
    assert languagetool.describe(Config())[1] == f"downloaded copy LanguageTool-6.8 in {cache}"


def test_a_local_server_that_fails_to_start_is_not_retried_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install = tmp_path / "LanguageTool-6.8"
    install.mkdir()
    (install / "languagetool-server.jar").write_bytes(b"not a jar")
    monkeypatch.setenv("LTP_PATH", str(tmp_path))
    config = Config(jar_dir=str(install))
    with pytest.raises(LanguageToolUnavailable, match="failed to start") as first:
        languagetool.client_for(config)
    with pytest.raises(LanguageToolUnavailable) as second:
        languagetool.client_for(config)
    assert str(second.value) == str(first.value)
