"""Scoring the codes of many vector cells in bounded memory (a filtered search reads
most of the file's packs: at 1M memories, 800 cells and 116 MB of codes).

The packs are read one at a time and scored in groups of about :data:`GROUP_CODES`
codes, copied into one reused buffer: the first stage (sign bits,
:meth:`~persistence.sqlite.vector_codes.CodeFit.first_stage`) keeps each group's best,
merged with the best so far, and the second stage orders only those. The result is the
one :func:`~persistence.sqlite.vector_codes.two_stages` gives over every code at once,
without holding every pack, one copy of all the codes and two of their sign bits (at
800 cells that was ~300 of a search's ~450 ms).
"""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import numpy as np

from persistence.records import Tier
from persistence.sqlite.cell_packs import DamagedPack, pack_keys
from persistence.sqlite.sql import cell_sql
from persistence.sqlite.vector_codes import (
    ID_END,
    TIER_BYTE,
    CodeFit,
    first_stage_depth,
    second_stage,
    split_code_rows,
)
from persistence.statements import rows, stream

GROUP_CODES = 131_072
"""Codes scored at once (about 19 MB at 384 dimensions: a plain search at 1M is one group)."""
_TIERS = tuple(Tier)


def best_codes(
    conn: apsw.Connection, cells: list[int], fit: CodeFit, unit: np.ndarray, count: int,
    tier: Tier | None, skip: list[str], size: int,
) -> list[tuple[str, Tier]]:  # fmt: skip
    """``(id, tier)`` of the ``count`` codes of ``cells`` (packs and tails) nearest the
    normalised query ``unit`` by the two stages, best first (all of them, in order, when
    they are fewer); codes of another ``tier`` (if given) and of the ``skip`` ids never.
    ``size``: about how many codes the cells hold (the first stage keeps
    :func:`first_stage_depth` of it); :class:`DamagedPack` when a pack or tail does not
    add up to codes of the fit's width, or a code's tier byte names no tier."""
    first, second = fit.query_weights(unit.astype(np.float32))
    depth = first_stage_depth(count, size, fit.sqrt_factor)
    skipped = np.array([i.encode() + ID_END for i in skip])
    kept_keys = np.zeros(0, dtype="S1")
    kept_rows = np.zeros((0, fit.code_bytes), dtype=np.uint8)
    kept_scores = np.zeros(0, dtype=np.int32)
    for keys, raw in groups(conn, cells, fit.code_bytes):
        tiers, bits, _ = split_code_rows(raw, fit.words)
        eligible = np.ones(len(keys), dtype=bool) if tier is None else tiers == TIER_BYTE[tier]
        if len(skipped):
            eligible &= ~np.isin(keys, skipped)
        scores = fit.first_stage(first, bits)
        if len(kept_scores) >= depth:  # only what beats the worst kept
            eligible &= scores > kept_scores.min()
        picked = np.flatnonzero(eligible)
        score = scores[picked]
        if len(picked) > depth:
            top = np.argpartition(-score, depth - 1)[:depth]
            picked, score = picked[top], score[top]
        width = max(kept_keys.itemsize, keys.itemsize)
        kept_keys = np.concatenate([kept_keys.astype(f"S{width}"), keys[picked]])
        kept_rows = np.concatenate([kept_rows, raw[picked]])
        kept_scores = np.concatenate([kept_scores, score])
        if len(kept_scores) > depth:
            top = np.argpartition(-kept_scores, depth - 1)[:depth]
            kept_keys, kept_rows, kept_scores = kept_keys[top], kept_rows[top], kept_scores[top]
    tiers, bits, low = split_code_rows(kept_rows, fit.words)
    if len(tiers) and int(tiers.max()) >= len(_TIERS):
        raise DamagedPack(f"a code of cells {cells} holds tier byte {int(tiers.max())}")
    closeness = second_stage(bits, low, second, np.arange(len(kept_keys)))
    best = np.argpartition(-closeness, count - 1)[:count] if count < len(closeness) else None
    order = np.argsort(-closeness if best is None else -closeness[best], kind="stable")
    order = order if best is None else best[order]
    return [(bytes(kept_keys[i])[:-1].decode(), _TIERS[tiers[i]]) for i in order.tolist()]


def groups(
    conn: apsw.Connection, cells: list[int], code_bytes: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(keys, codes)`` of ``cells``' packs then tails, about :data:`GROUP_CODES` codes
    at a time: the keys (id + end byte, fixed width) and the codes as the rows of a
    ``[n, code_bytes]`` view of one buffer reused by the next group (copy what you keep)."""
    buffer = np.empty(GROUP_CODES * code_bytes, dtype=np.uint8)
    keys: list[np.ndarray] = []
    codes: list[bytes] = []
    held = 0
    for cell, size, width, ids, packed in stream(conn, cell_sql.packs_of(cells)):
        if width != code_bytes:
            raise DamagedPack(f"cell {cell}'s pack holds codes of {width} bytes, not {code_bytes}")
        keys.append(pack_keys(cell, size, width, ids, packed))
        codes.append(packed)
        held += len(keys[-1])
        if held >= GROUP_CODES:
            yield _joined(keys, codes, code_bytes, buffer)
            keys, codes, held = [], [], 0
    tail = rows(conn, cell_sql.tails_of(cells, ID_END))
    if any(len(c) != code_bytes for _, c in tail):
        raise DamagedPack(f"a tail of cells {cells} holds a code that is not {code_bytes} bytes")
    if tail:
        keys.append(np.array([bytes(k) for k, _ in tail]))
        codes += [bytes(c) for _, c in tail]
    if keys:
        yield _joined(keys, codes, code_bytes, buffer)


def _joined(
    keys: list[np.ndarray], codes: list[bytes], code_bytes: int, buffer: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The keys end to end, and the codes copied into ``buffer`` (grown if they need
    more) as ``[n, code_bytes]`` rows."""
    total = sum(len(c) for c in codes)
    out = buffer[:total] if total <= len(buffer) else np.empty(total, dtype=np.uint8)
    at = 0
    for blob in codes:
        out[at : at + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        at += len(blob)
    width = max(k.itemsize for k in keys)
    return np.concatenate([k.astype(f"S{width}") for k in keys]), out.reshape(-1, code_bytes)
