"""The text of a context: pure functions of the chosen memories.

Layout (each header once, each line citable)::

    ## Scratchpad
    [m:3f9c0a1e] goal: book the flight to Lisbon
    ## 2023-05-08 13:56 · Caroline, Melanie
    [m:0b7d2c44] Melanie: What did you do yesterday?
    [m:91aa6e03] Caroline: I went to the LGBTQ support group.

Sessions come in the order they started; inside one, memories in conversation order
(their turns' links first, then time); memories of no session are grouped by day.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from persistence import Memory

REF_LENGTH = 8
"""Characters of a memory id a citation shows (the random end of a generated id)."""
SCRATCHPAD_HEADER = "## Scratchpad"


def citations(memory_ids: Sequence[str]) -> dict[str, str]:
    """Memory id -> its short citation: the last :data:`REF_LENGTH` characters, longer
    where two would be the same (unique in one context, the same for the same set)."""
    ids = sorted(set(memory_ids))
    length = REF_LENGTH
    while len({i[-length:] for i in ids}) < len(ids):
        length += 4
    return {i: i[-length:] for i in ids}


def render(
    scratchpad: Sequence[Memory],
    memories: Sequence[Memory],
    started: Callable[[str], int | None],
    after: Mapping[str, str | None],
) -> tuple[str, list[str]]:
    """The context's text and its memory ids in order of appearance.

    ``started(session_id)``: its start time (ms; ``None``: unknown); ``after``: memory
    id -> the id of the turn after it in its session (conversation order)."""
    refs = citations([m.id for m in scratchpad] + [m.id for m in memories])
    lines: list[str] = []
    order: list[str] = []
    if scratchpad:
        lines.append(SCRATCHPAD_HEADER)
        for m in scratchpad:
            lines.append(scratch_line(m, refs[m.id]))
            order.append(m.id)
    for start, group in _groups(memories, started):
        ordered = _conversation_order(group, after)
        lines.append(header(start, ordered))
        for m in ordered:
            lines.append(line(m, refs[m.id]))
            order.append(m.id)
    return "\n".join(lines), order


class Draft:
    """The lines and headers :func:`render` would write, in a cheaper order (groups as
    first met, lines as added, citations of :data:`REF_LENGTH`), kept as memories are
    added: what a packing trial counts. Each line and header is made once (a header's
    date has the same length whenever its group began, so the first start met stands
    for it)."""

    def __init__(self, started: Callable[[str], int | None]) -> None:
        self._started = started
        self._pad: list[str] = []
        self._groups: dict[str, tuple[list[str], list[str]]] = {}  # key -> (speakers, lines)
        self._starts: dict[str, int] = {}
        self._made: dict[str, str] = {}  # memory id -> line; header key -> header

    def line(self, memory: Memory) -> str:
        """The memory's line (made once)."""
        made = self._made.get(memory.id)
        if made is None:
            made = self._made[memory.id] = line(memory, memory.id[-REF_LENGTH:])
        return made

    def add_pad(self, entry: Memory) -> None:
        """A scratchpad entry's line, after those added."""
        self._pad.append(scratch_line(entry, entry.id[-REF_LENGTH:]))

    def add(self, memories: Sequence[Memory]) -> None:
        """Memories' lines, each at the end of its group (a new group: at the end)."""
        for m in memories:
            key = _group_key(m)
            if key not in self._groups:
                self._groups[key] = ([], [])
                self._starts[key] = _group_start(key, [m], self._started)
            speakers, lines = self._groups[key]
            if m.speaker and m.speaker not in speakers:
                speakers.append(m.speaker)
            lines.append(self.line(m))

    def text(self, pad: Sequence[Memory] = (), memories: Sequence[Memory] = ()) -> str:
        """The draft with ``pad`` and ``memories`` added (the draft itself unchanged)."""
        out = [SCRATCHPAD_HEADER] if self._pad or pad else []
        out += self._pad
        out += [scratch_line(m, m.id[-REF_LENGTH:]) for m in pad]
        more: dict[str, list[Memory]] = {}
        for m in memories:
            more.setdefault(_group_key(m), []).append(m)
        for key in [*self._groups, *(k for k in more if k not in self._groups)]:
            speakers, lines = self._groups.get(key, ((), ()))
            added = more.get(key, ())
            who = dict.fromkeys([*speakers, *(m.speaker for m in added if m.speaker)])
            out.append(self._header(key, added, list(who)))
            out += lines
            out += [self.line(m) for m in added]
        return "\n".join(out)

    def _header(self, key: str, added: Sequence[Memory], who: list[str]) -> str:
        cached = f"\1{key}\1{','.join(who)}"
        made = self._made.get(cached)
        if made is None:
            start = self._starts.get(key)
            if start is None:
                start = _group_start(key, added, self._started)
            made = self._made[cached] = heading(start, who)
        return made


def header(start: int, group: Sequence[Memory]) -> str:
    """A session's header: when it started (UTC) and who speaks in it."""
    return heading(start, list(dict.fromkeys(m.speaker for m in group if m.speaker)))


def heading(start: int, who: Sequence[str]) -> str:
    """A header of a group that began at ``start`` (ms) in which ``who`` speak."""
    return f"## {_when(start)} · {', '.join(who)}" if who else f"## {_when(start)}"


def line(memory: Memory, ref: str) -> str:
    """A memory's line: its citation, its speaker, its content."""
    said = f"{_flat(memory.speaker)}: " if memory.speaker else ""
    return f"[m:{ref}] {said}{_flat(memory.content)}"


def scratch_line(memory: Memory, ref: str) -> str:
    """A scratchpad entry's line: its citation, its key, its content."""
    key = f"{_flat(memory.key)}: " if memory.key and memory.key != memory.id else ""
    return f"[m:{ref}] {key}{_flat(memory.content)}"


def _flat(text: str) -> str:
    """``text`` on one line (its line breaks as spaces): one memory, one citable line,
    and no content can pass for a session header or another memory's line."""
    parts = text.splitlines()
    return text if parts == [text] else " ".join(parts)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _group_key(memory: Memory) -> str:
    """A memory's group: its session, or (none) its UTC day."""
    return (
        memory.session_id if memory.session_id is not None else "\0" + _when(memory.created_at)[:10]
    )


def _group_start(key: str, group: Sequence[Memory], started: Callable[[str], int | None]) -> int:
    """When a group began: its session's start, or its first memory's time if earlier."""
    first = min(m.created_at for m in group)
    start = None if key.startswith("\0") else started(key)
    return first if start is None else min(start, first)


def _groups(
    memories: Sequence[Memory], started: Callable[[str], int | None]
) -> list[tuple[int, list[Memory]]]:
    """Memories by session (those of none: by UTC day), in the order the groups began."""
    groups: dict[str, list[Memory]] = {}
    for m in memories:
        groups.setdefault(_group_key(m), []).append(m)
    begun = sorted((_group_start(key, group, started), key, group) for key, group in groups.items())
    return [(start, group) for start, _key, group in begun]


def _conversation_order(group: list[Memory], after: Mapping[str, str | None]) -> list[Memory]:
    """``group`` in conversation order: runs of consecutive turns kept together (the
    turn links say which follows which), runs ordered by time, then id."""
    by_id = {m.id: m for m in group}
    follows = {nxt: m for m, nxt in after.items() if m in by_id and nxt in by_id}
    heads = sorted((m for m in group if m.id not in follows), key=lambda m: (m.created_at, m.id))
    ordered: list[Memory] = []
    seen: set[str] = set()
    for head in heads:
        current: Memory | None = head
        while current is not None and current.id not in seen:
            seen.add(current.id)
            ordered.append(current)
            nxt = after.get(current.id)
            current = by_id.get(nxt) if nxt is not None else None
    ordered += sorted((m for m in group if m.id not in seen), key=lambda m: (m.created_at, m.id))
    return ordered
