"""Local blocks mirrored on Prolific (annotation.platforms.prolific.blocks) against the fake
Prolific: one blocklist participant group per project, named by each study's filters, whose
members follow the project's blocks."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.models import Batch
from annotation.platforms import platform_get
from annotation.platforms.prolific.client import study_id
from annotation.platforms.prolific.publish import batch_prolific_publish
from annotation.platforms.prolific.sync import prolific_sync
from crowd.services import worker_block, worker_unblock
from tests.annotation.conftest import prolific_ready as _ready
from tests.annotation.factories import MakeBatch
from tests.annotation.prolific_fake import WORKSPACE, FakeProlific, NotEligible
from tests.annotation.test_prolific import _arrive, _assignment


def _blocklist(prolific: FakeProlific, batch: Batch) -> list[str]:
    study = prolific.studies[study_id(batch)]
    [wanted] = [f for f in study["filters"] if f["filter_id"] == "participant_group_blocklist"]
    return list(wanted["selected_values"])


def _blocked_participant(prolific: FakeProlific, batch: Batch, rey: Any) -> Any:
    """PARTICIPANT1 worked on the batch and is then blocked on its project here."""
    _, session, _ = _arrive(prolific, batch, "PARTICIPANT1")
    worker = _assignment(session).worker
    worker_block(project=batch.project, worker=worker, by=rey, reason="Copies the hints.")
    return worker


def test_studies_of_a_project_share_its_blocklist_group(
    on_prolific: Batch, make_batch: MakeBatch, prolific: FakeProlific, alice: Any
) -> None:
    second = _ready(make_batch(clips=1))
    batch_prolific_publish(batch=second, by=alice)
    [group] = prolific.groups
    assert prolific.groups[group]["workspace_id"] == WORKSPACE
    assert on_prolific.project.name in prolific.groups[group]["name"]
    assert _blocklist(prolific, on_prolific) == _blocklist(prolific, second) == [group]


def test_a_participant_blocked_before_a_publication_is_kept_out_of_its_study(
    on_prolific: Batch, make_batch: MakeBatch, prolific: FakeProlific, alice: Any, rey: Any
) -> None:
    _blocked_participant(prolific, on_prolific, rey)
    second = _ready(make_batch(clips=1))
    batch_prolific_publish(batch=second, by=alice)
    assert prolific.members[_blocklist(prolific, second)[0]] == {"PARTICIPANT1"}
    with pytest.raises(NotEligible):
        prolific.start(study_id(second), "PARTICIPANT1")
    prolific.start(study_id(second), "PARTICIPANT2")  # others still see it


def test_a_block_reaches_running_studies_and_lifting_it_reopens_them(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    worker = _blocked_participant(prolific, on_prolific, rey)
    assert prolific_sync()["blocks_blocked"] == 1
    with pytest.raises(NotEligible):
        prolific.start(study_id(on_prolific), "PARTICIPANT1")
    assert prolific_sync()["blocks_blocked"] == 0  # sent once
    worker_unblock(project=on_prolific.project, worker=worker, by=rey)
    assert platform_get("prolific").blocks_mirror() == {"blocked": 0, "lifted": 1, "refused": 0}
    assert prolific.members[_blocklist(prolific, on_prolific)[0]] == set()
    prolific.start(study_id(on_prolific), "PARTICIPANT1")
    # the study itself was never edited: the group carries the change
    assert not prolific.of("PATCH", "/studies/.*")


def test_a_blocklist_update_prolific_refuses_is_sent_again(
    on_prolific: Batch, prolific: FakeProlific, rey: Any
) -> None:
    _blocked_participant(prolific, on_prolific, rey)
    prolific.fail["/participant-groups/"] = 503
    assert prolific_sync()["blocks_refused"] == 1
    del prolific.fail["/participant-groups/"]
    assert prolific_sync()["blocks_blocked"] == 1
    assert prolific.members[_blocklist(prolific, on_prolific)[0]] == {"PARTICIPANT1"}


def test_a_block_on_another_project_stays_out_of_this_projects_group(
    on_prolific: Batch, prolific: FakeProlific, rey: Any, alice: Any
) -> None:
    from core.services import membership_add, project_create

    worker = _assignment(_arrive(prolific, on_prolific, "PARTICIPANT1")[1]).worker
    other = project_create(name="Other sounds", slug="other", created_by=alice)
    membership_add(project=other, user=rey, role="reviewer")
    membership_add(project=other, user=worker, role="annotator")
    worker_block(project=other, worker=worker, by=rey, reason="Rude notes.")
    assert prolific_sync()["blocks_blocked"] == 0
    prolific.start(study_id(on_prolific), "PARTICIPANT1")
