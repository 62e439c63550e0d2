"""SQL for the vector cells (migration v019): their state, centroids, packs, tails and
members, run by :mod:`persistence.sqlite.cell_sync` and
:mod:`persistence.sqlite.cell_vectors`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from persistence.statements import Batch, Row, Statement


@dataclass(frozen=True, slots=True)
class CellState:
    """``vector_cell_state``'s row (migration v019 says what each column holds)."""

    dim: int
    fitted: int
    sqrt_factor: float
    fit: bytes = field(repr=False)
    cells: int
    trained_on: int
    members: int
    generation: int
    seq: int
    seq_id: str | None


_STATE_COLUMNS = (
    "dim, fitted, sqrt_factor, fit, cells, trained_on, members, generation, seq, seq_id"
)
READ_STATE = Statement(f"SELECT {_STATE_COLUMNS} FROM vector_cell_state WHERE only = 1")
"""The cells' state: :func:`to_state` decodes it."""


def to_state(row: Row | None) -> CellState | None:
    """:data:`READ_STATE`'s row, typed (``None``: no cells)."""
    if row is None:
        return None
    dim, fitted, factor, fit, cells, trained, members, generation, seq, seq_id = row
    return CellState(int(dim), int(fitted), float(factor), bytes(fit), int(cells), int(trained),
                     int(members), int(generation), int(seq), seq_id)  # fmt: skip


def write_state(state: CellState) -> Statement:
    """Store the cells' state (replacing any)."""
    return Statement(
        f"INSERT OR REPLACE INTO vector_cell_state (only, {_STATE_COLUMNS}) "
        "VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (state.dim, state.fitted, state.sqrt_factor, state.fit, state.cells, state.trained_on,
         state.members, state.generation, state.seq, state.seq_id),
    )  # fmt: skip


def move_to(seq: int, seq_id: str | None, members: int) -> Statement:
    """The cells now stand at log position ``seq`` and hold ``members`` codes."""
    return Statement(
        "UPDATE vector_cell_state SET seq = ?, seq_id = ?, members = ? WHERE only = 1",
        (seq, seq_id, members),
    )


DROP_ALL = (
    Statement("DELETE FROM vector_cell_state"),
    Statement("DELETE FROM vector_cells"),
    Statement("DELETE FROM vector_cell_packs"),
    Statement("DELETE FROM vector_cell_tail"),
    Statement("DELETE FROM vector_cell_members"),
)
"""No cells: readers use the RAM copy until cells are trained again."""

CENTROIDS = Statement("SELECT cell, centroid FROM vector_cells ORDER BY cell")
"""Every ``(cell, centroid)``, in cell order."""
CENTROID_COUNT = Statement("SELECT count(*) FROM vector_cells")
"""How many centroids the file holds (a reader sizes its copy by it, not by the state's
count, which a damaged row may make negative or huge)."""


def put_centroids(rows: Sequence[tuple[int, bytes]]) -> Batch:
    """Store ``(cell, centroid)`` rows."""
    return Batch("INSERT INTO vector_cells (cell, centroid) VALUES (?, ?)", rows)


def _marks(count: int) -> str:
    return ", ".join("?" for _ in range(count))


def packs_of(cells: Sequence[int]) -> Statement:
    """``(cell, size, width, ids, codes)`` of the packs of ``cells``."""
    sql = (
        "SELECT cell, size, width, CAST(ids AS BLOB), CAST(codes AS BLOB) FROM vector_cell_packs "
        f"WHERE cell IN ({_marks(len(cells))})"
    )
    return Statement(sql, list(cells))


ALL_PACKS = Statement(
    "SELECT cell, size, width, CAST(ids AS BLOB), CAST(codes AS BLOB) FROM vector_cell_packs "
    "ORDER BY cell"
)
"""Every pack (stream it: a million memories' packs are ~180 MB)."""


def damaged_pack(code_bytes: int) -> Statement:
    """A pack whose ids and codes do not add up to codes of ``code_bytes``, if any
    (``length`` reads no blob)."""
    return Statement(
        "SELECT cell, size, width, length(ids), length(codes) FROM vector_cell_packs "
        "WHERE size <= 0 OR width <> ? OR length(ids) % size <> 0 "
        "OR length(ids) < 2 * size OR length(codes) <> size * width LIMIT 1",
        (code_bytes,),
    )


def tails_of(cells: Sequence[int], end: bytes) -> Statement:
    """``(UTF-8 id + end, code)`` of the tail rows of ``cells``."""
    sql = (
        "SELECT CAST(id || ? AS BLOB), code FROM vector_cell_tail "
        f"WHERE cell IN ({_marks(len(cells))})"
    )
    return Statement(sql, [end.decode(), *cells])


def tail_of(cell: int) -> Statement:
    """``(id, code)`` of one cell's tail rows."""
    return Statement("SELECT id, code FROM vector_cell_tail WHERE cell = ?", (cell,))


ALL_TAILS = Statement("SELECT cell, id, code FROM vector_cell_tail ORDER BY cell, id")
"""Every tail row."""


def tail_count(cell: int) -> Statement:
    """How many tail rows ``cell`` has."""
    return Statement("SELECT count(*) FROM vector_cell_tail WHERE cell = ?", (cell,))


def pack_size(cell: int) -> Statement:
    """How many codes ``cell``'s pack holds (no row: none)."""
    return Statement("SELECT size FROM vector_cell_packs WHERE cell = ?", (cell,))


def put_pack(cell: int, size: int, width: int, ids: bytes, codes: bytes) -> Statement:
    """Store (or replace) ``cell``'s pack."""
    return Statement(
        "INSERT OR REPLACE INTO vector_cell_packs (cell, size, width, ids, codes) "
        "VALUES (?, ?, ?, ?, ?)",
        (cell, size, width, ids, codes),
    )


def drop_pack(cell: int) -> Statement:
    """Delete ``cell``'s pack."""
    return Statement("DELETE FROM vector_cell_packs WHERE cell = ?", (cell,))


def drop_tail(cell: int) -> Statement:
    """Delete every tail row of ``cell``."""
    return Statement("DELETE FROM vector_cell_tail WHERE cell = ?", (cell,))


def members_of(memory_ids: Sequence[str]) -> Statement:
    """``(id, cell)`` of each of ``memory_ids`` a cell holds."""
    sql = f"SELECT id, cell FROM vector_cell_members WHERE id IN ({_marks(len(memory_ids))})"
    return Statement(sql, list(memory_ids))


def leave(rows: Sequence[tuple[int, str]]) -> tuple[Batch, Batch]:
    """``(cell, id)`` rows leave their tail (if there) and the members."""
    return (
        Batch("DELETE FROM vector_cell_tail WHERE cell = ? AND id = ?", rows),
        Batch("DELETE FROM vector_cell_members WHERE id = ?", [(i,) for _, i in rows]),
    )


def join(rows: Sequence[tuple[int, str, bytes]]) -> tuple[Batch, Batch]:
    """``(cell, id, code)`` rows join their cell's tail and the members."""
    return (
        Batch("INSERT OR REPLACE INTO vector_cell_tail (cell, id, code) VALUES (?, ?, ?)", rows),
        Batch(
            "INSERT OR REPLACE INTO vector_cell_members (id, cell) VALUES (?, ?)",
            [(i, c) for c, i, _ in rows],
        ),
    )


def move_members(rows: Sequence[tuple[int, str]]) -> Batch:
    """``(cell, id)``: each member is now held by ``cell``."""
    return Batch("UPDATE vector_cell_members SET cell = ? WHERE id = ?", rows)


def replace_centroid(cell: int, centroid: bytes) -> Statement:
    """``cell``'s centroid is now ``centroid``."""
    return Statement("UPDATE vector_cells SET centroid = ? WHERE cell = ?", (centroid, cell))


def count_cells(cells: int, generation: int) -> Statement:
    """The cells now number ``cells``; their centroids changed (a new ``generation``)."""
    return Statement(
        "UPDATE vector_cell_state SET cells = ?, generation = ? WHERE only = 1",
        (cells, generation),
    )


def put_members(rows: Sequence[tuple[str, int]]) -> Batch:
    """Store ``(id, cell)`` membership rows."""
    return Batch("INSERT INTO vector_cell_members (id, cell) VALUES (?, ?)", rows)


MEMBERS = Statement("SELECT id, cell FROM vector_cell_members")
"""Every ``(id, cell)`` membership row."""


def in_tail(cell: int, memory_id: str) -> Statement:
    """A row if ``memory_id``'s code is in ``cell``'s tail."""
    return Statement("SELECT 1 FROM vector_cell_tail WHERE cell = ? AND id = ?", (cell, memory_id))


TAIL_CELLS = Statement("SELECT DISTINCT cell FROM vector_cell_tail")
"""The cells that have tail rows."""
