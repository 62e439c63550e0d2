"""``check_integrity``'s ``vector_cells_match``: the vector cells (migration v019) hold
exactly the file's committed vectors, each once, with its current code."""

from __future__ import annotations

import apsw

from persistence.records import Tier
from persistence.sqlite import vector_reads
from persistence.sqlite.cell_kmeans import normalised
from persistence.sqlite.cell_packs import DamagedPack, pack_keys
from persistence.sqlite.cell_sync import centroids_of, embedded_stream, fit_of, read_state
from persistence.sqlite.code_sync import position_kept
from persistence.sqlite.sql import cell_sql
from persistence.sqlite.vector_codes import code_blobs
from persistence.statements import rows, stream

_CHUNK = 4_096


def check(conn: apsw.Connection) -> list[str]:
    """What is wrong with the cells: every memory embedded at their dimension whose vector
    is not logged as changed after their position must be in exactly one cell (its pack
    or its tail, as ``vector_cell_members`` says) with the code its current vector and
    tier make; no cell may hold another."""
    state = read_state(conn)
    if state is None:
        return []
    fit = fit_of(state)
    if fit is None:
        return ["vector_cell_state holds a fit that does not match its dimension"]
    if not position_kept(conn, state.seq, state.seq_id):
        return []  # not used by readers; maintain() trains them again
    try:
        centroids = len(centroids_of(conn, fit.dim))
    except DamagedPack as exc:
        return [f"{exc} (maintain() trains the cells again)"]
    if centroids != state.cells:
        return [
            f"the vector cells hold {centroids} centroids but count {state.cells} "
            "(searches use the RAM copy; maintain() trains the cells again)"
        ]
    pending = set(vector_reads.changed_since(conn, state.seq))
    held: dict[str, tuple[int, bytes]] = {}
    problems: list[str] = []

    def hold(cell: int, memory_id: str, code: bytes) -> None:
        if memory_id in held:
            problems.append(f"memory {memory_id} is in cells {held[memory_id][0]} and {cell}")
        held[memory_id] = (cell, code)

    for cell, size, width, ids, codes in stream(conn, cell_sql.ALL_PACKS):
        blob = bytes(codes)
        try:
            keys = pack_keys(int(cell), size, width, bytes(ids), blob)
        except DamagedPack as exc:
            problems.append(f"{exc} (maintain() trains the cells again)")
            continue
        if int(width) != fit.code_bytes:
            problems.append(f"cell {cell}'s codes are {width} bytes, not {fit.code_bytes}")
        for n, key in enumerate(keys.tolist()):
            try:
                memory_id = key[:-1].decode()
            except UnicodeDecodeError:
                problems.append(f"cell {cell}'s pack holds an id that is not text")
                continue
            hold(int(cell), memory_id, blob[n * width : (n + 1) * width])
    for cell, memory_id, code in stream(conn, cell_sql.ALL_TAILS):
        hold(int(cell), str(memory_id), bytes(code))
    members = {str(i): int(c) for i, c in rows(conn, cell_sql.MEMBERS)}
    for memory_id, (cell, _) in held.items():
        if members.get(memory_id) != cell:
            problems.append(
                f"memory {memory_id} is in cell {cell} but listed in {members.get(memory_id)}"
            )
    for memory_id in members.keys() - held.keys():
        problems.append(f"memory {memory_id} is listed in cell {members[memory_id]} without a code")
    batch: list[tuple[str, Tier, bytes]] = []
    seen: set[str] = set()

    def compare(found: list[tuple[str, Tier, bytes]]) -> None:
        if not found:
            return
        bits, low = fit.encode(normalised([b for _, _, b in found], fit.dim))
        codes = code_blobs([t for _, t, _ in found], bits, low)
        for (memory_id, _, _), code in zip(found, codes, strict=True):
            if memory_id not in held:
                problems.append(f"memory {memory_id} has a vector but is in no cell")
            elif held[memory_id][1] != code:
                problems.append(
                    f"memory {memory_id}'s code in cell {held[memory_id][0]} is not its vector's"
                )

    for memory_id, tier, blob in embedded_stream(conn, fit.dim):
        seen.add(memory_id)
        if memory_id in pending:
            continue
        batch.append((memory_id, tier, blob))
        if len(batch) == _CHUNK:
            compare(batch)
            batch = []
    compare(batch)
    for memory_id in held.keys() - seen - pending:
        problems.append(f"cell {held[memory_id][0]} holds memory {memory_id}, which has no vector")
    return problems
