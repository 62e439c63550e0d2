"""Issue 46's design spike: a vector stage that keeps nothing per memory in RAM.

    .venv/bin/python -m benchmarks.disk_vectors --dir /work/vecdata --count 100000
    .venv/bin/python -m benchmarks.disk_vectors --smoke          # 2,000 vectors, seconds

Builds (once, kept in ``--dir``: a rerun measures the same files) one SQLite file per
vector set holding every candidate's tables beside the float32 vectors, then measures
each design in a FRESH process: open + first query time, peak RSS after it (and above a
process that imported the same modules and opened nothing), p50/p99 of ``--queries``
queries, and vector recall@10 against an exact numpy scan, unfiltered and with a filter
keeping a tenth of the rows (``tag = 0``). The table compares them with the issue's
targets at 1M; one JSON line per run is appended to ``benchmarks/results/disk_vectors.jsonl``.

``--sweep 8,16,64`` measures recall@10 and p50 per number of probed cells instead (one
fresh process per design, the first 100 queries, filtered queries probing as many).

Vector sets (``--kinds``, default ``clustered,random``): ``clustered``, the recipe of
``benchmarks/test_recall_bench.py`` (a mixture of Gaussians on the sphere: ``count // 50``
unit centres, each vector a centre plus noise of norm 0.6, normalised) and ``random``
(uniform on the sphere: the worst case for any partitioning), queries a stored vector plus
noise of norm 0.5, normalised, as in ``benchmarks/million.py``; ``model``: the default
compact MiniLM on synthetic memory-like sentences (who did what where when why), queries
other such sentences; its vectors are kept in ``--dir`` (it embeds about 300 texts/s on a
quiet 2-core VM, so a million take about an hour).

Designs (``--designs``):

- ``A``: today's RAM codes: the library's own 3-bit :class:`CodeFit` codes, loaded at open
  from packs of 1,024 (as ``code_sync`` keeps them), searched by its two stages
  (``vector_codes.second_stage``), 128 candidates re-ranked exactly from the float
  BLOBs in numpy. The filter is a byte per slot in RAM (as the tier is today: its best case).
- ``B-int8`` / ``B-bit``: sqlite-vec ``vec0`` with the k-means cell as partition key and
  the tag as a metadata column (the filter runs inside the KNN): the nearest ``probes``
  centroids (kept in a table, loaded at open: RAM per cell) are probed in one statement
  (``cell IN (...)``: SQLite runs vec0's KNN once per cell, ``k`` each), the best
  ``depth`` of them re-ranked by ``vec_distance_cosine`` over the float BLOBs in SQL.
  ``int8[D]``: the vector scaled by one global factor (L2 over them orders as cosine);
  ``bit[D]``: signs of the vector centred on the file's mean (Hamming).
- ``C``: no vec0: the library's 3-bit codes in a ``WITHOUT ROWID`` table clustered by
  ``(cell, id)``; the probed cells' rows read by SQL (the filter in the ``WHERE``) and
  scored in numpy by the same two stages, 128 re-ranked exactly in numpy.
- ``D``: C's codes packed per cell (rows of up to 1,024 codes and their ids, as
  ``code_sync`` packs them today but grouped by cell): the probed cells are a few BLOB
  reads, scored by the same two stages; the filter is the code's first byte (where the
  tier byte is today); 128 re-ranked by ``vec_distance_cosine`` in SQL.
- floors: ``exact`` (numpy over every float vector in RAM, loaded at open: time only) and
  ``vec0-float`` (sqlite-vec's brute-force float KNN, cosine, ``k = 10``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from benchmarks.results_file import record_run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "disk_vectors.jsonl"
DIM = 384
K = 10
TAGS = 10  # tag = id % TAGS; the filter keeps tag 0 (a tenth of the rows)
RERANK = 128  # candidates re-ranked exactly (the library's VECTOR_MIN_CANDIDATES)
PACK = 1_024  # codes per pack row for design A (code_sync.PACK_ROWS)
WARM = 10
DESIGNS = ("A", "B-int8", "B-bit", "C", "D", "exact", "vec0-float")
TARGETS = {"rss_mib": 200.0, "open_first_ms": 150.0, "p50_ms": 40.0, "recall": 0.95}
_CHUNK = 48 * PACK  # rows at a time (whole packs)

# --- the vector sets -------------------------------------------------------------------


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_vectors(kind: str, count: int, dim: int = DIM) -> np.ndarray:
    """``count`` unit vectors: ``clustered`` (test_recall_bench's recipe) or ``random``."""
    rng = np.random.default_rng(count)
    out = np.empty((count, dim), dtype=np.float32)
    centres = _unit(rng, max(count // 50, 1), dim) if kind == "clustered" else None
    for start in range(0, count, _CHUNK):
        n = min(_CHUNK, count - start)
        part = _unit(rng, n, dim)
        if centres is not None:
            part = centres[rng.integers(len(centres), size=n)] + 0.6 * part
            part /= np.linalg.norm(part, axis=1, keepdims=True)
        out[start : start + n] = part
    return out


_PARTS = (  # who, did what, where, when, why ("" leaves a part out)
    "Ann|Bob|Chen|Dara|Eli|Fatima|Gus|Hana|Ivan|Jo|Kemal|Lena|Maya|Nils|Omar|Priya|Quinn|Rosa|"
    "Sven|Tariq|Uma|Vera|Wes|Yuki|Zane|my sister|the landlord|our manager|grandma|the vet",
    "moved|bought|sold|lost|found|painted|fixed|borrowed|returned|cooked|ordered|cancelled|"
    "booked|forgot|planted|adopted|repaired|wrapped|shipped|cleaned|photographed|measured|"
    "insured|donated",
    "the piano|a blue bicycle|the old sofa|two concert tickets|a sourdough starter|the garden "
    "shed|her passport|a vintage camera|the kitchen tiles|a puppy|the wedding cake|a flight to "
    "Osaka|the quarterly report|his car keys|a tomato plant|the rent cheque|an oak bookshelf|"
    "the laptop charger|a pair of hiking boots|the family photo album|a violin|the birthday "
    "present|a box of vinyl records|the insurance papers|a kayak|the thesis draft|a dentist "
    "appointment|the spare room|a chess set|the winter tyres",
    "in Lisbon|at the office|to the cabin|from the market|at home|in the basement|near the "
    "river|at the airport|in Berlin|at school|to the storage unit|at the clinic|in the park|"
    "at the gym|online|at the bakery|in Nairobi|at the hardware store|in the attic|at the station",
    "yesterday|last week|on Monday|this morning|in March|after lunch|before the holidays|two "
    "years ago|on her birthday|last night|in the spring|during the storm|at the weekend|on the "
    "way back|",
    "because it was too expensive|for the new flat|as a surprise|to save money|for the trip|"
    "since nobody used it|for the kids|after the flood||||",
)


def sentences(count: int, seed: int) -> list[str]:
    """Memory-like synthetic sentences (who did what, where, when, why)."""
    rng = np.random.default_rng(seed)
    parts = [part.split("|") for part in _PARTS]
    picks = [rng.integers(len(words), size=count) for words in parts]
    return [
        " ".join(w for w in (words[int(p[i])] for words, p in zip(parts, picks, strict=True)) if w)
        + "."
        for i in range(count)
    ]


def model_vectors(texts: list[str], cache: Path) -> np.ndarray:
    """The default (compact) model's vectors of ``texts``, kept in ``cache``."""
    if cache.exists():
        return np.load(cache)
    from tiered_memory.embedding import compact_model
    from tiered_memory.embedding.embedders import OnnxEmbedder

    model = OnnxEmbedder(compact_model.build(None), model_id="disk-vectors")
    out = np.concatenate([model.embed(texts[s : s + 256]) for s in range(0, len(texts), 256)])
    out = (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)
    np.save(cache, out)
    return out


def make_queries(vectors: np.ndarray, count: int) -> np.ndarray:
    """Stored vectors plus noise of norm 0.5, normalised (as benchmarks/million.py)."""
    rng = np.random.default_rng(5)
    picked = vectors[rng.integers(len(vectors), size=count)]
    noisy = picked + 0.5 * _unit(rng, count, vectors.shape[1])
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def exact_top(vectors: np.ndarray, queries: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """Ids (row numbers) of each query's exact ``K`` nearest, among ``keep`` rows."""
    best = np.full((len(queries), K), -1, dtype=np.int64)
    best_sim = np.full((len(queries), K), -np.inf, dtype=np.float32)
    for start in range(0, len(vectors), _CHUNK):
        sim = queries @ vectors[start : start + _CHUNK].T
        if keep is not None:
            sim[:, ~keep[start : start + _CHUNK]] = -np.inf
        ids = np.broadcast_to(np.arange(start, start + sim.shape[1]), sim.shape)
        both_sim = np.concatenate([best_sim, sim], axis=1)
        both_ids = np.concatenate([best, ids], axis=1)
        top = np.argpartition(-both_sim, K - 1, axis=1)[:, :K]
        best_sim = np.take_along_axis(both_sim, top, 1)
        best = np.take_along_axis(both_ids, top, 1)
    return best


def kmeans(vectors: np.ndarray, cells: int) -> np.ndarray:
    """The library's spherical k-means centroids ``[cells, dim]``, trained on a sample of
    ``vectors`` (64 a cell)."""
    from persistence.sqlite.cell_kmeans import kmeans as train

    rng = np.random.default_rng(1)
    sample = vectors[np.sort(rng.choice(len(vectors), min(len(vectors), 64 * cells), False))]
    return train(np.ascontiguousarray(sample, dtype=np.float32), cells)


def assign_cells(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The library's assignment: each vector's most similar centroid."""
    from persistence.sqlite.cell_kmeans import nearest_cells

    return nearest_cells(vectors, centroids)


# --- building the file -----------------------------------------------------------------


def load_vec(conn: apsw.Connection) -> None:
    from benchmarks.raw_sql import load_sqlite_vec

    load_sqlite_vec(conn)


def int8_scale(vectors: np.ndarray) -> float:
    """One factor for every component: 5 standard deviations map to 127."""
    return 127.0 / (5.0 * float(vectors[:100_000].std()))


def chunk_size_for(mean_cell: float) -> int:
    """vec0 chunk size (a multiple of 8): a typical cell fills about one chunk."""
    return int(min(2_048, max(64, 2 ** round(math.log2(max(mean_cell, 1.0))))))


def build(path: Path, kind: str, count: int, cells: int, queries: int) -> None:
    """The file, its vectors (``.npy``), queries and exact answers beside it."""
    from persistence.records import Tier
    from persistence.sqlite.vector_codes import CAL_ROWS, FIT_ROWS, CodeFit, code_blobs

    started = time.perf_counter()
    if kind == "model":  # queries: other sentences of the same kind, embedded
        vectors = model_vectors(sentences(count, count), path.parent / f"model_{count}.npy")
        qs = model_vectors(sentences(queries + WARM, 5), path.parent / f"model_q{queries}.npy")
    else:
        vectors = make_vectors(kind, count)
        qs = make_queries(vectors, queries + WARM)
    tags = np.arange(count) % TAGS
    truth = exact_top(vectors, qs, None)
    truth_f = exact_top(vectors, qs, tags == 0)
    centroids = kmeans(vectors, cells)
    cell = assign_cells(vectors, centroids)
    order = np.lexsort((np.arange(count), cell))  # rows by (cell, id): clustered inserts
    mean = vectors[:100_000].mean(axis=0)
    scale = int8_scale(vectors)
    rng = np.random.default_rng(2)
    sample = vectors[rng.choice(count, min(count, CAL_ROWS), replace=False)]
    fit = CodeFit.of(sample[:FIT_ROWS]).calibrated(sample)
    chunk = chunk_size_for(count / cells)
    print(
        f"{path.name}: vectors, truth and {cells} cells in {time.perf_counter() - started:.0f} s",
        flush=True,
    )

    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = apsw.Connection(str(tmp))
    load_vec(conn)
    conn.pragma("journal_mode", "off")
    conn.pragma("synchronous", "off")
    conn.execute(f"""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
        CREATE TABLE vectors (id INTEGER PRIMARY KEY, tag INTEGER NOT NULL,
                              embedding BLOB NOT NULL);
        CREATE TABLE cells (cell INTEGER PRIMARY KEY, centroid BLOB NOT NULL,
                            size INTEGER NOT NULL);
        CREATE TABLE a_packs (part INTEGER PRIMARY KEY, ids BLOB NOT NULL, codes BLOB NOT NULL);
        CREATE TABLE c_codes (cell INTEGER, id INTEGER, tag INTEGER NOT NULL, code BLOB NOT NULL,
                              PRIMARY KEY (cell, id)) WITHOUT ROWID;
        CREATE VIRTUAL TABLE b_int8 USING vec0(id INTEGER PRIMARY KEY, cell INTEGER PARTITION KEY,
            tag INTEGER, code int8[{DIM}], chunk_size={chunk});
        CREATE VIRTUAL TABLE b_bit USING vec0(id INTEGER PRIMARY KEY, cell INTEGER PARTITION KEY,
            tag INTEGER, code bit[{DIM}], chunk_size={chunk});
        CREATE VIRTUAL TABLE f_vec USING vec0(id INTEGER PRIMARY KEY,
            embedding float[{DIM}] distance_metric=cosine);
    """)
    for name in ("b_int8", "b_bit"):  # vec0 finds a partition's chunks by a full scan without
        conn.execute(f"CREATE INDEX {name}_chunks_partition ON {name}_chunks(partition00)")
    sizes = np.bincount(cell, minlength=cells)
    with conn:
        meta = {
            "kind": kind,
            "count": count,
            "cells": cells,
            "dim": DIM,
            "scale": scale,
            "mean": mean.astype("<f4").tobytes(),
            "chunk_size": chunk,
            "fit": fit.to_blob(),
            "fitted": fit.fitted,
            "sqrt_factor": fit.sqrt_factor,
        }
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        conn.executemany(
            "INSERT INTO cells VALUES (?, ?, ?)",
            ((c, centroids[c].tobytes(), int(sizes[c])) for c in range(cells)),
        )
    for start in range(0, count, _CHUNK):
        stop = min(start + _CHUNK, count)
        part = vectors[start:stop]
        bits, low = fit.encode(part)
        codes = code_blobs([Tier.EPISODIC] * len(part), bits, low)
        with conn:
            conn.executemany(
                "INSERT INTO vectors VALUES (?, ?, ?)",
                ((i, int(tags[i]), part[i - start].tobytes()) for i in range(start, stop)),
            )
            conn.executemany(
                "INSERT INTO c_codes VALUES (?, ?, ?, ?)",
                ((int(cell[i]), i, int(tags[i]), codes[i - start]) for i in range(start, stop)),
            )
            conn.executemany(
                "INSERT INTO f_vec (id, embedding) VALUES (?, ?)",
                ((i, part[i - start].tobytes()) for i in range(start, stop)),
            )
            for p in range(start // PACK, (stop + PACK - 1) // PACK):
                lo, hi = p * PACK, min((p + 1) * PACK, stop)
                packed = b"".join(codes[lo - start : hi - start])
                conn.execute(
                    "INSERT INTO a_packs VALUES (?, ?, ?)",
                    (p, np.arange(lo, hi, dtype="<i8").tobytes(), packed),
                )
    as_int8 = np.clip(np.rint(vectors * scale), -127, 127).astype(np.int8)
    as_bits = np.packbits(vectors - mean > 0, axis=1, bitorder="little")
    for start in range(0, count, _CHUNK):  # in (cell, id) order: each cell's chunks fill up
        rows = order[start : start + _CHUNK]
        with conn:
            conn.executemany(
                "INSERT INTO b_int8 (id, cell, tag, code) VALUES (?, ?, ?, vec_int8(?))",
                ((int(i), int(cell[i]), int(tags[i]), as_int8[i].tobytes()) for i in rows),
            )
            conn.executemany(
                "INSERT INTO b_bit (id, cell, tag, code) VALUES (?, ?, ?, vec_bit(?))",
                ((int(i), int(cell[i]), int(tags[i]), as_bits[i].tobytes()) for i in rows),
            )
    add_cell_packs(conn)
    conn.close()
    np.save(f"{path}.queries.npy", qs)
    np.save(f"{path}.truth.npy", np.stack([truth, truth_f]))
    tmp.rename(path)
    print(
        f"{path.name}: built in {time.perf_counter() - started:.0f} s, "
        f"{path.stat().st_size / 2**20:,.0f} MiB",
        flush=True,
    )


def add_cell_packs(conn: apsw.Connection) -> None:
    """Design D's table, made from C's rows: each cell's codes in packs of ``PACK``, ids in
    order beside them, the first byte of each code its tag (where the tier byte is today)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'd_packs'").fetchall():
        return
    conn.execute(
        "CREATE TABLE d_packs (part INTEGER PRIMARY KEY, cell INTEGER NOT NULL, "
        "ids BLOB NOT NULL, codes BLOB NOT NULL)"
    )
    conn.execute("CREATE INDEX d_packs_cell ON d_packs (cell)")
    rows = conn.execute("SELECT cell, id, tag, code FROM c_codes ORDER BY cell, id")
    pending: list[tuple[int, int, bytes]] = []
    cell_now, part = None, 0

    def flush() -> None:
        nonlocal part
        if pending:
            ids = np.array([i for i, _, _ in pending], dtype="<i8").tobytes()
            codes = b"".join(bytes([tag]) + code[1:] for _, tag, code in pending)
            conn.execute("INSERT INTO d_packs VALUES (?, ?, ?, ?)", (part, cell_now, ids, codes))
            part += 1
            pending.clear()

    with conn:
        for cell, memory_id, tag, code in rows:
            if cell != cell_now or len(pending) == PACK:
                flush()
                cell_now = cell
            pending.append((memory_id, tag, code))
        flush()


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes each design's tables take in the file (``dbstat``)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    conn.close()
    out: dict[str, int] = {}
    for name, size in rows:
        for prefix in (
            "a_packs",
            "c_codes",
            "d_packs",
            "b_int8",
            "b_bit",
            "f_vec",
            "vectors",
            "cells",
        ):
            if name == prefix or name.startswith(prefix + "_"):
                out[prefix] = out.get(prefix, 0) + int(size)
    return out


# --- the designs (run inside the probe process) ----------------------------------------

Search = Callable[[np.ndarray, bool], list[int]]


def _meta(conn: apsw.Connection) -> dict[str, Any]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def _rerank_numpy(conn: apsw.Connection, ids: list[int], query: np.ndarray) -> list[int]:
    """Exact order of ``ids`` by cosine from the float BLOBs, as the library re-ranks."""
    found = conn.execute(
        "SELECT id, embedding FROM vectors WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    ).fetchall()
    if not found:
        return []
    matrix = np.frombuffer(b"".join(e for _, e in found), dtype=np.float32).reshape(len(found), -1)
    sim = matrix @ query
    top = np.argsort(-sim, kind="stable")[:K]
    return [found[i][0] for i in top]


def _fit(meta: dict[str, Any]) -> Any:
    from persistence.sqlite.vector_codes import CodeFit

    return CodeFit.from_row(meta["dim"], meta["fitted"], meta["sqrt_factor"], meta["fit"])


def _two_stages(
    fit: Any,
    bits: np.ndarray,
    low: np.ndarray,
    query: np.ndarray,
    excluded: np.ndarray | None,
    take: int,
) -> np.ndarray:
    """The library's code search (:func:`~persistence.sqlite.vector_codes.two_stages`,
    the RAM copy's) over these codes."""
    from persistence.sqlite.vector_codes import two_stages

    none = np.zeros(bits.shape[1], dtype=bool)
    return two_stages(fit, bits, low, query, none if excluded is None else excluded, take)


def open_a(conn: apsw.Connection, opts: dict[str, Any]) -> Search:
    from persistence.sqlite.vector_codes import split_packed_codes

    fit = _fit(_meta(conn))
    count = int(_meta(conn)["count"])
    ids = np.empty(count, dtype=np.int64)  # filled pack by pack, as the library loads them
    bits = np.empty((fit.words, count), dtype=np.uint64)
    low = np.empty((count, fit.words * 16), dtype=np.uint8)
    at = 0
    for pack_ids, codes in conn.execute("SELECT ids, codes FROM a_packs ORDER BY part"):
        n = len(pack_ids) // 8
        ids[at : at + n] = np.frombuffer(pack_ids, dtype="<i8")
        _, bits[:, at : at + n], low[at : at + n] = split_packed_codes(codes, n, fit.words)
        at += n
    tag = (ids % TAGS).astype(np.uint8)  # the per-slot byte the filter reads (as the tier)

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        excluded = tag != 0 if filtered else None
        chosen = _two_stages(fit, bits, low, query, excluded, RERANK)
        return _rerank_numpy(conn, ids[chosen].tolist(), query)

    return search


def _centroids(conn: apsw.Connection) -> np.ndarray:
    rows = conn.execute("SELECT centroid FROM cells ORDER BY cell").fetchall()
    return np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1)


def _probes(centroids: np.ndarray, query: np.ndarray, probes: int) -> list[int]:
    sim = centroids @ query
    probes = min(probes, len(sim))
    return np.argpartition(-sim, probes - 1)[:probes].tolist()


_B_SQL = """
WITH knn AS MATERIALIZED (
    SELECT id, distance FROM {table} WHERE code MATCH {quantize}(?) AND k = ?
    AND cell IN (SELECT value FROM json_each(?)) {filter}),
best AS (SELECT id FROM knn ORDER BY distance LIMIT ?)
SELECT v.id FROM best JOIN vectors AS v ON v.id = best.id
ORDER BY vec_distance_cosine(v.embedding, ?) LIMIT {k}
"""


def open_b(conn: apsw.Connection, opts: dict[str, Any], code: str) -> Search:
    meta = _meta(conn)
    centroids = _centroids(conn)
    table, quantize = ("b_int8", "vec_int8") if code == "int8" else ("b_bit", "vec_bit")
    plain = _B_SQL.format(table=table, quantize=quantize, filter="", k=K)
    narrowed = _B_SQL.format(table=table, quantize=quantize, filter="AND tag = 0", k=K)
    scale, mean = meta["scale"], np.frombuffer(meta["mean"], dtype=np.float32)

    def quantized(query: np.ndarray) -> bytes:
        if code == "int8":
            return np.clip(np.rint(query * scale), -127, 127).astype(np.int8).tobytes()
        return np.packbits(query - mean > 0, bitorder="little").tobytes()

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        probes = opts["probes_filtered" if filtered else "probes"]
        cells = json.dumps(_probes(centroids, query, probes))
        args = (quantized(query), opts["k_cell"], cells, opts["depth"], query.tobytes())
        return [r[0] for r in conn.execute(narrowed if filtered else plain, args)]

    return search


def open_c(conn: apsw.Connection, opts: dict[str, Any]) -> Search:
    from persistence.sqlite.vector_codes import split_packed_codes

    meta = _meta(conn)
    fit = _fit(meta)
    centroids = _centroids(conn)
    base = "SELECT id, code FROM c_codes WHERE cell IN (SELECT value FROM json_each(?))"

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        probes = opts["probes_filtered" if filtered else "probes"]
        cells = json.dumps(_probes(centroids, query, probes))
        rows = conn.execute(base + (" AND tag = 0" if filtered else ""), (cells,)).fetchall()
        if not rows:
            return []
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        _, bits, low = split_packed_codes(b"".join(r[1] for r in rows), len(rows), fit.words)
        chosen = _two_stages(fit, bits, low, query, None, RERANK)
        return _rerank_numpy(conn, ids[chosen].tolist(), query)

    return search


def _rerank_sql(conn: apsw.Connection, ids: list[int], query: np.ndarray) -> list[int]:
    """Exact order of ``ids`` by ``vec_distance_cosine`` over the float BLOBs, in SQL."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT id FROM vectors WHERE id IN (SELECT value FROM json_each(?)) "
            f"ORDER BY vec_distance_cosine(embedding, ?) LIMIT {K}",
            (json.dumps(ids), query.tobytes()),
        )
    ]


def open_d(conn: apsw.Connection, opts: dict[str, Any]) -> Search:
    from persistence.sqlite.vector_codes import split_packed_codes

    fit = _fit(_meta(conn))
    centroids = _centroids(conn)
    sql = "SELECT ids, codes FROM d_packs WHERE cell IN (SELECT value FROM json_each(?))"

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        probes = opts["probes_filtered" if filtered else "probes"]
        packs = conn.execute(sql, (json.dumps(_probes(centroids, query, probes)),)).fetchall()
        ids = np.frombuffer(b"".join(i for i, _ in packs), dtype="<i8")
        tags, bits, low = split_packed_codes(b"".join(c for _, c in packs), len(ids), fit.words)
        chosen = _two_stages(fit, bits, low, query, tags != 0 if filtered else None, RERANK)
        return _rerank_sql(conn, ids[chosen].tolist(), query)

    return search


def open_exact(conn: apsw.Connection, opts: dict[str, Any]) -> Search:
    rows = conn.execute("SELECT embedding FROM vectors ORDER BY id").fetchall()
    matrix = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    del rows
    keep = np.flatnonzero(np.arange(len(matrix)) % TAGS == 0)

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        if filtered:
            sim = matrix[keep] @ query
            top = np.argpartition(-sim, K - 1)[:K]
            return keep[top[np.argsort(-sim[top])]].tolist()
        sim = matrix @ query
        top = np.argpartition(-sim, K - 1)[:K]
        return top[np.argsort(-sim[top])].tolist()

    return search


def open_vec0_float(conn: apsw.Connection, opts: dict[str, Any]) -> Search:
    sql = "SELECT id FROM f_vec WHERE embedding MATCH ? AND k = ?"

    def search(query: np.ndarray, filtered: bool) -> list[int]:
        # vec0 has no filter column here: the filtered answer is read deeper and cut.
        if filtered:
            got = [r[0] for r in conn.execute(sql, (query.tobytes(), K * TAGS * 4))]
            return [i for i in got if i % TAGS == 0][:K]
        return [r[0] for r in conn.execute(sql, (query.tobytes(), K))]

    return search


OPENERS: dict[str, Callable[[apsw.Connection, dict[str, Any]], Search]] = {
    "A": open_a,
    "B-int8": lambda conn, opts: open_b(conn, opts, "int8"),
    "B-bit": lambda conn, opts: open_b(conn, opts, "bit"),
    "C": open_c,
    "D": open_d,
    "exact": open_exact,
    "vec0-float": open_vec0_float,
}


def _status() -> dict[str, float]:
    with open("/proc/self/status") as f:
        lines = [ln for ln in f if ln.startswith(("VmHWM", "VmRSS"))]
    return {k: int(v.split()[0]) / 1024 for k, v in (ln.split(":", 1) for ln in lines)}


def run_probe(path: Path, design: str, opts: dict[str, Any]) -> dict[str, Any]:
    """One design, in this (fresh) process: what the table reports."""
    import persistence.sqlite.vector_codes  # noqa: F401 (imported before the baseline)
    import persistence.sqlite.vector_mirror  # noqa: F401

    queries = np.load(f"{path}.queries.npy")
    base = _status()
    start = time.perf_counter()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    load_vec(conn)
    search = OPENERS[design](conn, opts)
    first = search(queries[0], False)
    open_first = time.perf_counter() - start
    after = _status()
    truth = np.load(f"{path}.truth.npy")
    out: dict[str, Any] = {
        "design": design,
        "open_first_ms": open_first * 1000,
        "rss_mib": after["VmHWM"],
        "rss_above_mib": after["VmHWM"] - base["VmHWM"],
        "held_mib": after["VmRSS"],
    }
    if opts.get("sweep"):
        return {**out, "sweep": sweep(search, opts, queries, truth)}
    hits = [len(set(first) & set(truth[0, 0].tolist()))]
    for q in queries[1:WARM]:
        search(q, False)
        search(q, True)
    last = len(queries) if design != "vec0-float" else WARM + opts["floor_queries"]
    for filtered in (False, True):
        took, found = [], hits if not filtered else []
        for n in range(WARM, min(last, len(queries))):
            t = time.perf_counter()
            got = search(queries[n], filtered)
            took.append(time.perf_counter() - t)
            found.append(len(set(got) & set(truth[int(filtered), n].tolist())))
        ms = np.array(took) * 1000
        name = "filtered_" if filtered else ""
        out[name + "p50_ms"] = float(np.percentile(ms, 50))
        out[name + "p99_ms"] = float(np.percentile(ms, 99))
        out[name + "recall"] = float(np.sum(found) / (K * len(found)))
    out["end_rss_mib"] = _status()["VmHWM"]
    return out


def sweep(
    search: Search, opts: dict[str, Any], queries: np.ndarray, truth: np.ndarray
) -> list[dict[str, float]]:
    """Recall@10 and p50 per number of probed cells (``opts["sweep"]``), the same number
    for filtered queries, over the first 100 queries."""
    rows = []
    for probes in opts["sweep"]:
        opts["probes"] = opts["probes_filtered"] = probes  # the search reads them per query
        row: dict[str, float] = {"probes": probes}
        for filtered in (False, True):
            took, found = [], []
            for n in range(WARM, min(len(queries), WARM + 100)):
                t = time.perf_counter()
                got = search(queries[n], filtered)
                took.append(time.perf_counter() - t)
                found.append(len(set(got) & set(truth[int(filtered), n].tolist())))
            name = "filtered_" if filtered else ""
            row[name + "p50_ms"] = float(np.median(took) * 1000)
            row[name + "recall"] = float(np.sum(found) / (K * len(found)))
        rows.append(row)
    return rows


# --- the driver ------------------------------------------------------------------------


def probe(path: Path, design: str, opts: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.disk_vectors",
            "--probe",
            design,
            "--db",
            str(path),
            "--opts",
            json.dumps(opts),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
        cwd=ROOT,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def table(rows: list[dict[str, Any]]) -> Iterator[str]:
    yield (
        f"{'design':<12}{'peak RSS':>10}{'above':>8}{'open+1st':>10}{'p50':>8}{'p99':>8}"
        f"{'p99/p50':>8}{'recall':>8}{'filt p50':>10}{'filt p99':>10}{'filt rec':>9}"
    )
    yield (
        f"{'target 1M':<12}{'<=200':>10}{'':>8}{'<=150':>10}{'<=40':>8}{'':>8}{'<=3':>8}"
        f"{'>=0.95':>8}{'':>10}{'':>10}{'>=0.95':>9}"
    )
    for r in rows:
        yield (
            f"{r['design']:<12}{r['rss_mib']:>7.0f} Mi{r['rss_above_mib']:>5.0f} Mi"
            f"{r['open_first_ms']:>7.0f} ms{r['p50_ms']:>5.1f} ms{r['p99_ms']:>5.1f} ms"
            f"{r['p99_ms'] / r['p50_ms']:>8.2f}{r['recall']:>8.3f}"
            f"{r['filtered_p50_ms']:>7.1f} ms{r['filtered_p99_ms']:>7.1f} ms"
            f"{r['filtered_recall']:>9.3f}"
        )


def print_sweep(kind: str, count: int, rows: list[dict[str, Any]], load: float) -> dict[str, Any]:
    print(f"\n{kind}, {count:,} vectors: recall@10 and p50 by cells probed [load {load:.1f}]")
    print(f"{'design':<10}{'probes':>7}{'recall':>8}{'p50':>10}{'filt recall':>12}{'filt p50':>10}")
    for row in rows:
        for r in row["sweep"]:
            print(
                f"{row['design']:<10}{r['probes']:>7}{r['recall']:>8.3f}{r['p50_ms']:>7.1f} ms"
                f"{r['filtered_recall']:>12.3f}{r['filtered_p50_ms']:>7.1f} ms"
            )
    record = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "kind": kind,
        "count": count,
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],
        "sweep": rows,
    }
    return record


def default_options(count: int, args: argparse.Namespace) -> dict[str, Any]:
    cells = args.cells or max(8, round(math.sqrt(count)))
    return {
        "cells": cells,
        "probes": args.probes,
        "probes_filtered": args.probes_filtered or 2 * args.probes,
        "k_cell": args.k_cell,
        "depth": args.depth,
        "floor_queries": args.floor_queries,
        "sweep": [int(p) for p in args.sweep.split(",")] if args.sweep else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where the files are built and kept")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--kinds", default="clustered,random")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cells", type=int, default=0, help="k-means cells (default sqrt N)")
    parser.add_argument("--probes", type=int, default=16, help="cells probed per query")
    parser.add_argument("--probes-filtered", type=int, default=0, help="(default 2x probes)")
    parser.add_argument("--k-cell", type=int, default=64, help="vec0 k per probed cell")
    parser.add_argument("--depth", type=int, default=128, help="B: candidates re-ranked")
    parser.add_argument(
        "--floor-queries",
        type=int,
        default=50,
        help="queries timed for vec0-float (a full scan each)",
    )
    parser.add_argument(
        "--sweep", default="", help="probes to sweep (e.g. 8,16,64): recall and p50 per value"
    )
    parser.add_argument("--smoke", action="store_true", help="2,000 vectors in a temp dir")
    parser.add_argument("--no-record", action="store_true", help="append no JSON line")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--opts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(run_probe(args.db, args.probe, json.loads(args.opts))))
        return
    if args.smoke:
        args.count, args.queries, args.no_record = 2_000, 20, True
        if args.dir is None:
            import tempfile

            with tempfile.TemporaryDirectory() as folder:
                args.dir = Path(folder)
                run(args)
            return
    if args.dir is None:
        parser.error("--dir is required (outside the repository: the files are large)")
    run(args)


def run(args: argparse.Namespace) -> None:
    """Build what is missing in ``args.dir``, probe each design, print and record."""
    args.dir.mkdir(parents=True, exist_ok=True)
    opts = default_options(args.count, args)
    for kind in args.kinds.split(","):
        path = args.dir / f"{kind}_{args.count}_c{opts['cells']}.db"
        if not path.exists():
            build(path, kind, args.count, opts["cells"], args.queries)
        conn = apsw.Connection(str(path))  # files built before design D: add its table
        add_cell_packs(conn)
        conn.close()
        load = os.getloadavg()[0]
        rows = [probe(path, design, opts) for design in args.designs.split(",")]
        if opts["sweep"]:
            record_run(RESULTS, print_sweep(kind, args.count, rows, load), keep=not args.no_record)
            continue
        print(
            f"\n{kind}, {args.count:,} vectors of {DIM} d, {opts} [load {load:.1f}"
            f"-{os.getloadavg()[0]:.1f}]"
        )
        for line in table(rows):
            print(line)
        sizes = table_bytes(path)
        print("file MiB: " + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in sorted(sizes.items())))
        record = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "kind": kind,
            "count": args.count,
            "dim": DIM,
            "options": opts,
            "load": [round(load, 1), round(os.getloadavg()[0], 1)],
            "table_bytes": sizes,
            "designs": rows,
        }
        record_run(RESULTS, record, keep=not args.no_record)


if __name__ == "__main__":
    main()
