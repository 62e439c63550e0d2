"""The records of ``remember_many()``: each checked and turned into a new memory before
anything is written (a bad one raises the error ``remember()`` would, naming it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from persistence import (
    NEW_MEMORY_FIELDS,
    InvalidInputError,
    InvalidTypeError,
    Memory,
    MemoryStorage,
    Tier,
    TieredMemoryError,
    check_memory_fields,
    parse_tier,
    require_content,
    require_embedding,
)
from tiered_memory.redaction import Redactor, redact_fields
from tiered_memory.tokens import TokenCounter

RECORD_FIELDS = frozenset({*NEW_MEMORY_FIELDS, "tier", "key"})


@dataclass(frozen=True, slots=True)
class ScratchpadDraft:
    """A ``remember_many()`` record for the scratchpad: the arguments of its
    ``remember()`` (which redacts)."""

    content: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Drafter:
    """Turns records into new memories the way ``remember()`` checks its arguments."""

    store: MemoryStorage  # only for its content size limit
    redactor: Redactor | None
    token_counter: TokenCounter

    def draft(
        self,
        record: object,
        tier: Tier | str,
        defaults: Mapping[str, Any],
        now: int,
        n: int,
        redacted: list[int],
    ) -> Memory | ScratchpadDraft:
        """Record ``n`` checked and turned into a new memory (or the arguments of a
        scratchpad ``remember``); errors name the record; the number of secrets redacted
        from it is appended to ``redacted``."""
        try:
            if isinstance(record, str):
                values: dict[str, Any] = {**defaults, "content": record}
            elif isinstance(record, Mapping):
                check_record_fields(record, "a record", content=True)
                values = {**defaults, **record}
            else:
                raise InvalidTypeError(
                    f"a record is a str or a mapping with 'content', not {type(record).__name__}"
                )
            content = values.pop("content", None)
            chosen = parse_tier(values.pop("tier", tier))
            require_content(content)
            assert isinstance(content, str)
            self.store.memories.check_content_size(content)
            check_new_fields(
                **{k: v for k, v in values.items() if k in _CHECKED},
            )
            if chosen is Tier.SCRATCHPAD:
                return ScratchpadDraft(content, values)
            if values.get("key") is not None:
                raise InvalidInputError("key= names a scratchpad entry: pass tier=Tier.SCRATCHPAD")
            values.pop("key", None)
            metadata = values.pop("metadata", None)
            tags = values.pop("tags", ())
            content, tags, metadata, found = redact_fields(self.redactor, content, tags, metadata)
            redacted.append(found)
            memory = Memory.create(
                content,
                chosen,
                now=now,
                metadata=dict(metadata) if metadata is not None else {},
                tags=tuple(tags) if isinstance(tags, list) else tags,
                token_count=self.token_counter.count(content),
                **values,
            )
            return memory  # the store checks every field before writing any
        except TieredMemoryError as exc:
            exc.add_note(f"in record {n} of remember_many(); nothing was written")
            raise


def check_record_fields(values: Mapping[str, Any], what: str, content: bool = False) -> None:
    """Refuse keys ``remember()`` does not take (``content`` only in a record)."""
    allowed = RECORD_FIELDS | {"content"} if content else RECORD_FIELDS
    unknown = [str(k) for k in values if k not in allowed]
    if unknown:
        raise InvalidInputError(
            f"{what} has unknown field(s) {sorted(unknown)}; use {sorted(allowed)}"
        )
    if content and "content" not in values:
        raise InvalidInputError("a record needs 'content'")


_CHECKED = RECORD_FIELDS - {"tier"}
"""A record's fields that :func:`check_new_fields` checks (``tier`` is parsed apart)."""


def check_new_fields(*, embedding: Any = None, updating: bool = False, **fields: Any) -> None:
    """Refuse a wrong type or value among a write's fields before anything is computed
    from them (the forgetting curve reads ``importance`` first): the rules of
    :func:`persistence.check_memory_fields` for a new write, each error naming the
    argument. ``None`` leaves ``metadata`` empty, and with ``updating`` leaves every
    field unchanged; an ``embedding`` is a finite vector of numbers (its length is
    checked against the file's when written)."""
    if updating:
        fields = {name: value for name, value in fields.items() if value is not None}
    elif "metadata" in fields and fields["metadata"] is None:
        del fields["metadata"]  # (``fields`` is this call's own dict)
    check_memory_fields(new=True, **fields)
    if embedding is not None:
        require_embedding(embedding)
