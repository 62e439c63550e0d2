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
    added: what a packing trial counts. Each line is made once and each group's text is
    kept joined until a memory joins it, so a trial joins one piece per group. A header's
    date is that of the group's first memory: a date has the same length whenever the
    group began, and no session is read for a group that is never shown."""

    def __init__(self) -> None:
        self._pad: list[str] = []
        self._groups: dict[str, _Group] = {}
        self._lines: dict[str, str] = {}  # memory id -> its line

    def line(self, memory: Memory) -> str:
        """The memory's line (made once)."""
        made = self._lines.get(memory.id)
        if made is None:
            made = self._lines[memory.id] = line(memory, memory.id[-REF_LENGTH:])
        return made

    def add_pad(self, entry: Memory) -> None:
        """A scratchpad entry's line, after those added."""
        self._pad.append(scratch_line(entry, entry.id[-REF_LENGTH:]))

    def add(self, memories: Sequence[Memory]) -> None:
        """Memories' lines, each at the end of its group (a new group: at the end)."""
        for m in memories:
            key = _group_key(m)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group(m.created_at)
            group.add(m.speaker, self.line(m))

    def text(self, pad: Sequence[Memory] = (), memories: Sequence[Memory] = ()) -> str:
        """The draft with ``pad`` and ``memories`` added (the draft itself unchanged)."""
        out = [SCRATCHPAD_HEADER] if self._pad or pad else []
        out += self._pad
        out += [scratch_line(m, m.id[-REF_LENGTH:]) for m in pad]
        more: dict[str, list[Memory]] = {}
        for m in memories:
            more.setdefault(_group_key(m), []).append(m)
        for key, group in self._groups.items():
            added = more.pop(key, None)
            out.append(group.text() if added is None else group.text(added, self))
        for added in more.values():  # new groups
            out.append(_Group(added[0].created_at).text(added, self))
        return "\n".join(out)


class _Group:
    """One group of a :class:`Draft`: who speaks, its lines, and its text joined."""

    __slots__ = ("_joined", "_lines", "_speakers", "_when")

    def __init__(self, start: int) -> None:
        self._when = _when(start)
        self._speakers: list[str] = []
        self._lines: list[str] = []
        self._joined: str | None = None

    def add(self, speaker: str | None, text: str) -> None:
        if speaker and speaker not in self._speakers:
            self._speakers.append(speaker)
        self._lines.append(text)
        self._joined = None

    def text(self, added: Sequence[Memory] = (), draft: Draft | None = None) -> str:
        """The header and lines, with ``added`` memories' lines at the end (not kept)."""
        if not added and self._joined is not None:
            return self._joined
        who = list(dict.fromkeys([*self._speakers, *(m.speaker for m in added if m.speaker)]))
        head = heading(self._when, who)
        lines = self._lines + [draft.line(m) for m in added] if draft is not None else self._lines
        joined = "\n".join([head, *lines])
        if not added:
            self._joined = joined
        return joined


def header(start: int, group: Sequence[Memory]) -> str:
    """A session's header: when it started (UTC) and who speaks in it."""
    return heading(_when(start), list(dict.fromkeys(m.speaker for m in group if m.speaker)))


def heading(when: str, who: Sequence[str]) -> str:
    """A header of a group that began ``when`` (UTC, as :func:`_when` writes it) in which
    ``who`` speak."""
    return f"## {when} · {', '.join(who)}" if who else f"## {when}"


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
