"""The memory item refuses invalid values with a message that names the field."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jiyi.errors import InvalidInput
from jiyi.model import MemoryItem, MemoryType, Relation, RelationType, Scope, Status


def test_defaults_and_every_field_kept() -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=8)))
    item = MemoryItem.build(
        content="用户偏好深色主题",
        raw="我喜欢深色主题",
        summary="prefers dark theme",
        structured={"key": "theme", "value": "dark"},
        memory_type="preference",
        scope="project",
        project_id="p1",
        user_id="u1",
        tenant_id="acme",
        source="ai",
        source_id="msg-7",
        confidence=0.8,
        importance=0.9,
        visibility="owner_only",
        tags=["ui", "ui", "theme"],
        occurred_at=when,
        expires_at=when + timedelta(days=30),
        relations=[{"type": "supports", "target_id": "abc"}],
        metadata={"k": [1, 2]},
    )
    assert item.scope is Scope.PROJECT
    assert item.scope_key == "project:p1"
    assert item.tags == ("ui", "theme")
    assert item.occurred_at == datetime(2024, 5, 1, 4, 0, tzinfo=UTC)
    assert item.relations == (Relation(type=RelationType.SUPPORTS, target_id="abc"),)
    assert item.status is Status.ACTIVE and item.version == 1 and item.mention_count == 1
    assert MemoryItem.model_validate(item.to_json_dict()) == item


def test_nine_memory_types() -> None:
    assert {t.value for t in MemoryType} == {
        "preference",
        "fact",
        "skill",
        "habit",
        "event",
        "context",
        "constraint",
        "decision",
        "pattern",
    }


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": 42}, "content"),
        ({"memory_type": "opinion"}, "memory_type"),
        ({"scope": "team"}, "scope"),
        ({"confidence": 1.5}, "confidence"),
        ({"importance": -0.1}, "importance"),
        ({"visibility": "secret"}, "visibility"),
        ({"status": "deleted"}, "status"),
        ({"tags": ["ok", " "]}, "tags"),
        ({"access_count": -1}, "access_count"),
        ({"mention_count": 0}, "mention_count"),
        ({"version": 0}, "version"),
        ({"occurred_at": "not a date"}, "occurred_at"),
        ({"relations": [{"type": "likes", "target_id": "x"}]}, "relations.0.type"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_values_name_the_field(fields: dict[str, object], named: str) -> None:
    data: dict[str, object] = {"content": "valid content", "user_id": "u1", **fields}
    with pytest.raises(InvalidInput) as err:
        MemoryItem.build(**data)
    assert err.value.field == named
    message = str(err.value)  # the field first, in the words every interface uses, or quoted
    assert message.startswith(named.split(".")[0]) or repr(named) in message


def test_scope_needs_its_id() -> None:
    with pytest.raises(InvalidInput, match="session_id"):
        MemoryItem.build(content="hello world", scope="session", user_id="u1")


def test_evolve_validates() -> None:
    item = MemoryItem.build(content="valid content", user_id="u1")
    assert item.evolve(confidence=0.5).confidence == 0.5
    with pytest.raises(InvalidInput, match="confidence"):
        item.evolve(confidence=2)
