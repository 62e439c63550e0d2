"""A truncated file (a copy cut short, a disk that filled mid-copy) gives back every memory
whose page lies before the cut, and nothing else (not the rows of the page cut short, whose
ends SQLite would read as zeros): ``salvage`` and ``check`` against an oracle that reads
the memories' leaf pages straight from the file's bytes, cut inside leaves at several
places."""

from __future__ import annotations

from pathlib import Path

import apsw
import orjson
import pytest

from tests.engines.sqlite.test_salvage import PAGE, damage, leaf_pages, make, run, saved

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at``: its value and the offset after it."""
    value = 0
    for k in range(9):
        byte = data[at + k]
        if k == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + k + 1
    raise AssertionError("unreachable")


def rowids_on_leaf(data: bytes, page: int) -> list[int]:
    """The rowids of the cells of table leaf ``page``, read from the file format itself
    (a cell: payload size, rowid, payload)."""
    base = (page - 1) * PAGE
    header = base + (100 if page == 1 else 0)
    assert data[header] == 0x0D, f"page {page} is not a table leaf"
    cells = int.from_bytes(data[header + 3 : header + 5], "big")
    found = []
    for n in range(cells):
        pointer = header + 8 + 2 * n
        _, at = _varint(data, base + int.from_bytes(data[pointer : pointer + 2], "big"))
        found.append(_varint(data, at)[0])
    return found


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("truncated") / "whole.db"
    return path, make(path)


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75, 1.0])
def test_every_memory_before_the_cut_comes_back(
    whole: tuple[Path, dict[str, str]], tmp_path: Path, share: float
) -> None:
    path, contents = whole
    data = path.read_bytes()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    ids = dict(conn.execute("SELECT rowid, id FROM episodic"))
    conn.close()
    leaves = leaf_pages(path, "episodic")
    inside = leaves[min(int(len(leaves) * share), len(leaves) - 1)]
    length = (inside - 1) * PAGE + PAGE // 2 + 123  # inside a leaf, not at a page's edge
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[:length])
    kept = [page for page in leaves if page * PAGE <= length]  # the page cut short is lost
    expected = {ids[r] for page in kept for r in rowids_on_leaf(data, page)}
    assert 0 < len(expected) < len(contents)  # the cut took some memories, not all

    report = orjson.loads(run("check", str(cut), "--json").stdout)
    assert report["verdict"] == "damaged" and report["readable_memories"] == len(expected)
    out = tmp_path / "saved.db"
    result = run("salvage", str(cut), str(out))
    assert result.returncode == 0, result.stderr
    assert saved(out) == {m: contents[m] for m in expected}
    assert cut.read_bytes() == data[:length]  # the source is only read


def test_a_readable_leaf_between_long_lost_runs_comes_back(tmp_path: Path) -> None:
    """Leaves lost and kept alternate in rowid order (a page's place in the file is not
    its place in the tree): three lost, one kept, three lost. Jumping ahead past the
    first run (doubling the step) landed beyond the kept leaf, whose rows were then
    reported lost though every page of theirs was whole; they come back."""
    path = tmp_path / "islands.db"
    contents = make(path)
    data = path.read_bytes()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    ids = dict(conn.execute("SELECT rowid, id FROM episodic"))
    conn.close()
    in_order = sorted(leaf_pages(path, "episodic"), key=lambda p: rowids_on_leaf(data, p)[0])
    assert len(in_order) >= 9
    lost, kept = in_order[1:4] + in_order[5:8], in_order[4]
    damage(path, lost)
    gone = {ids[r] for page in lost for r in rowids_on_leaf(data, page)}
    island = {ids[r] for r in rowids_on_leaf(data, kept)}

    out = tmp_path / "saved.db"
    result = run("salvage", str(path), str(out))
    assert result.returncode == 0, result.stderr
    back = saved(out)
    assert island <= set(back)
    assert back == {m: c for m, c in contents.items() if m not in gone}
