"""Encryption at rest (SQLite3 Multiple Ciphers): no plaintext in the file, its WAL or
its backups; a wrong or missing key changes nothing; crashes during writes and during a
key change leave a file that opens with exactly one key and loses nothing."""

from __future__ import annotations

import logging
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from persistence import (
    DatabaseOpenError,
    EncryptionKeyError,
    EncryptionUnavailableError,
    Memory,
    PlaintextExportError,
    QueryOptions,
    Tier,
)
from persistence.sqlite import SQLiteStore, encryption
from tests.conftest import FakeClock, file_digest
from tests.faults.test_storage_faults import disk, needs_root  # noqa: F401 - a fixture
from tests.support.processes import spawn_worker
from tests.support.worker import SENTENCE
from tiered_memory import AgentMemoryManager

CLI = str(Path(sys.executable).with_name("tiered-memory"))
KEY = "correct horse battery staple"
NEEDLE = b"lighthouse keeper"
WRITE_AND_DIE = """
import os, sys
from persistence import Memory
from persistence.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1], key=os.environ["TIERED_MEMORY_KEY"]).open()
store.put_episodic(Memory.create("written by a process that did not close the file"))
os._exit(0)
"""


def open_manager(path: Path, key: str | bytes | None = KEY, **config: Any) -> AgentMemoryManager:
    config.setdefault("embedder", None)
    config.setdefault("embed_in_background", False)
    config.setdefault("clock", FakeClock())
    return AgentMemoryManager.open(path, key=key, **config)


def remember_sentence(memory: AgentMemoryManager) -> None:
    memory.remember(SENTENCE, tags=["lighthouse"], embedding=[0.1, 0.2, 0.3],
                    metadata={"note": SENTENCE})  # fmt: skip
    memory.scratchpad.put("where", SENTENCE)


def files_of(path: Path) -> dict[str, str]:
    """Every file beside the database (with its -wal/-shm), by name, with its digest."""
    return {p.name: file_digest(p) for p in sorted(path.parent.iterdir()) if p.is_file()}


@pytest.fixture
def encrypted_db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "secret.db"
    with open_manager(path) as memory:
        remember_sentence(memory)
    yield path


@pytest.mark.slow
def test_no_plaintext_in_the_file_its_wal_or_a_backup(tmp_path: Path) -> None:
    plain, secret = tmp_path / "plain" / "m.db", tmp_path / "secret" / "m.db"
    for path, key in ((plain, None), (secret, KEY)):
        path.parent.mkdir()
        with open_manager(path, key) as memory:
            remember_sentence(memory)
            wal = Path(f"{path}-wal").read_bytes()
            assert wal, "the WAL should hold the write before the checkpoint"
            snapshot = memory.backup(tmp_path / f"{path.parent.name}-backup.db")
            hits = [memory.recall("lighthouse keeper", k=1)]
            assert hits[0] and hits[0][0].memory.content == SENTENCE
        # After the close the WAL is checkpointed into the file.
        found = [NEEDLE in blob for blob in (path.read_bytes(), wal, snapshot.read_bytes())]
        # The control proves the search would find it: the plain file holds it.
        assert found == ([True, True, True] if key is None else [False, False, False])
    with open_manager(tmp_path / "secret-backup.db") as restored:
        assert restored.scratchpad.get("where").content == SENTENCE


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, "hunter2-not-it", b"\x00\xffbinary"])
def test_a_wrong_or_missing_key_raises_and_changes_nothing(
    encrypted_db: Path, key: str | bytes | None
) -> None:
    before = files_of(encrypted_db)
    with pytest.raises(EncryptionKeyError) as raised:
        open_manager(encrypted_db, key)
    assert "not a database" not in str(raised.value)
    with pytest.raises(EncryptionKeyError):
        open_manager(encrypted_db, key, read_only=True)
    assert files_of(encrypted_db) == before
    if isinstance(key, str):
        assert key not in str(raised.value)


def test_a_key_for_a_plain_file_raises_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with open_manager(path, None) as memory:
        remember_sentence(memory)
    before = files_of(path)
    for read_only in (False, True):
        with pytest.raises(EncryptionKeyError, match="not encrypted"):
            open_manager(path, KEY, read_only=read_only)
    assert files_of(path) == before


@pytest.mark.slow
def test_the_key_is_never_shown(encrypted_db: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = SQLiteStore(encrypted_db, key=KEY)
    assert KEY not in repr(store.options) and KEY.encode().hex() not in repr(store.options)
    with open_manager(encrypted_db) as memory:
        assert memory.encrypted
        assert KEY not in repr(memory.config)
        memory.rekey(KEY + "2")
    with pytest.raises(EncryptionKeyError) as raised:
        open_manager(encrypted_db, KEY)
    shown = caplog.text + str(raised.value) + repr(raised.value.__cause__)
    for secret in (KEY, KEY.encode().hex(), (KEY + "2").encode().hex()):
        assert secret not in shown


def test_read_only_open_and_recall_with_the_key(encrypted_db: Path) -> None:
    before = files_of(encrypted_db)
    with open_manager(encrypted_db, read_only=True) as memory:
        assert [h.memory.content for h in memory.recall("lighthouse", k=1)] == [SENTENCE]
    assert files_of(encrypted_db) == before


@pytest.mark.slow
def test_rekey_changes_the_key_in_one_operation(encrypted_db: Path) -> None:
    with open_manager(encrypted_db) as memory:
        memory.recall("lighthouse", k=1)  # a reader connection with the old key
        memory.rekey(b"new key")
        assert memory.recall("lighthouse", k=1)[0].memory.content == SENTENCE
        memory.remember("written after the key changed")
    with pytest.raises(EncryptionKeyError):
        open_manager(encrypted_db)
    with open_manager(encrypted_db, b"new key") as memory:
        assert memory.statistics().tier_counts[Tier.EPISODIC] == 2


def test_rekey_of_a_plain_file_is_refused(tmp_path: Path) -> None:
    with (
        open_manager(tmp_path / "plain.db", None) as memory,
        pytest.raises(EncryptionKeyError, match="not encrypted"),
    ):
        memory.rekey("k")


@pytest.mark.slow
def test_backups_and_restore_keep_the_key(encrypted_db: Path, tmp_path: Path) -> None:
    with open_manager(encrypted_db) as memory:
        snapshot = memory.backup()
        assert encryption.file_kind(snapshot) == "encrypted"
        memory.scratchpad.delete("where")
        assert memory.restore(snapshot).memories == 2  # the memory and the note
        assert memory.scratchpad.get("where").content == SENTENCE
        plain = tmp_path / "plain.db"
        with open_manager(plain, None) as other:
            plain_snapshot = other.backup()
        with pytest.raises(EncryptionKeyError, match="not encrypted"):
            memory.restore(plain_snapshot)
        memory.rekey("another key")
        with pytest.raises(EncryptionKeyError, match="cannot be decrypted"):
            memory.restore(snapshot)  # made under the old key
        assert memory.statistics().tier_counts[Tier.EPISODIC] == 1
        assert memory.scratchpad.get("where").content == SENTENCE


@pytest.mark.slow
def test_json_export_of_an_encrypted_file_needs_allow_plaintext(
    encrypted_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    with open_manager(encrypted_db) as memory:
        with pytest.raises(PlaintextExportError):
            memory.export_json(out)
        assert not out.exists()
        memory.export_json(out, allow_plaintext=True)
    assert NEEDLE in out.read_bytes()


def test_a_key_without_a_cipher_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stands in for a plain APSW build, which would silently ignore PRAGMA key.
    monkeypatch.setattr(encryption, "cipher_available", lambda: False)
    with pytest.raises(EncryptionUnavailableError, match="apsw-sqlite3mc"):
        open_manager(tmp_path / "new.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_cli_takes_the_key_from_a_file_or_the_environment(
    encrypted_db: Path, tmp_path: Path
) -> None:
    key_file, new_key_file = tmp_path / "key", tmp_path / "new-key"
    key_file.write_text(KEY + "\n")
    new_key_file.write_bytes(b"brand new key")
    env = {k: v for k, v in os.environ.items() if k != "TIERED_MEMORY_KEY"}

    def run(*args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = {} if key is None else {"TIERED_MEMORY_KEY": key}
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120,
                              env=env | extra)  # fmt: skip

    missing = run("stats", str(encrypted_db))
    assert missing.returncode == 1 and "is encrypted" in missing.stderr
    assert run("--key-file", str(key_file), "stats", str(encrypted_db)).returncode == 0
    assert run("check", str(encrypted_db), key=KEY).returncode == 0
    out = tmp_path / "out.json"
    refused = run("--key-file", str(key_file), "export", str(encrypted_db), str(out))
    assert refused.returncode == 1 and "--allow-plaintext" in refused.stderr and not out.exists()
    exported = run("export", str(encrypted_db), str(out), "--allow-plaintext", key=KEY)
    assert exported.returncode == 0, exported.stderr
    rekeyed = run("--key-file", str(key_file), "rekey", str(encrypted_db),
                  "--new-key-file", str(new_key_file))  # fmt: skip
    assert rekeyed.returncode == 0, rekeyed.stderr
    assert KEY not in rekeyed.stdout + rekeyed.stderr
    assert run("stats", str(encrypted_db), key=KEY).returncode == 1
    assert run("stats", str(encrypted_db), key="brand new key").returncode == 0


def _opens_with(path: Path, keys: list[str]) -> list[str]:
    """The keys among ``keys`` that open ``path``; a key that does not changes neither the
    file nor its WAL. (After a crash SQLite rebuilds the -shm, an index of the WAL that
    holds no data, before it reads a page: that one may change.)"""
    opened = []
    for key in keys:
        before = files_of(path)
        try:
            with SQLiteStore(path, key=key):
                opened.append(key)
        except EncryptionKeyError:
            after = files_of(path)
            for name in (path.name, f"{path.name}-wal"):
                assert after.get(name) == before.get(name), f"{name} changed"
    return opened


def _ids_in(path: Path, key: str) -> set[str]:
    with SQLiteStore(path, key=key, read_only=True) as store:
        return {m.id for m in store.query_episodic(QueryOptions(limit=None))}


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
def test_sigkill_during_encrypted_writes_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    rng = random.Random(19)
    written: set[str] = set()
    for _ in range(4):
        worker = spawn_worker("encrypted-write", str(path), env={"TIERED_MEMORY_KEY": KEY})
        lines = worker.kill(after=rng.uniform(0.1, 0.4))
        written |= {line for line in lines if line != "READY"}
        assert _opens_with(path, [KEY, "other"]) == [KEY]
        assert written <= _ids_in(path, KEY)
        for name in (path, Path(f"{path}-wal")):
            assert not name.exists() or NEEDLE not in name.read_bytes()
    assert len(written) > 4


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.subprocess
def test_sigkill_during_rekey_leaves_exactly_one_key(tmp_path: Path) -> None:
    path = tmp_path / "rekey.db"
    keys = [f"key-{n}" for n in range(7)]
    with SQLiteStore(path, key=keys[0]) as store:
        memories = [Memory.create(f"{SENTENCE} {i} " + "x" * 400) for i in range(3000)]
        with store.transaction():
            ids = {store.put_episodic(m).id for m in memories}
    # Delays from READY: before, during (the rekey takes ~60 ms idle) and after the rekey.
    delays = [0.0, 0.01, 0.02, 0.04, 0.07, 0.3]
    current, outcomes = keys[0], []
    for new, delay in zip(keys[1:], delays, strict=True):
        keys_env = {"TIERED_MEMORY_KEY": current, "NEW_KEY": new}
        worker = spawn_worker("rekey", str(path), env=keys_env)
        lines = worker.kill(after=delay)
        opened = _opens_with(path, [current, new])
        assert len(opened) == 1, f"the file opens with {opened}"
        if "REKEYED" in lines:
            assert opened == [new]
        outcomes.append("new" if opened[0] == new else "old")
        current = opened[0]
        assert _ids_in(path, current) == ids
    print(f"key after each kill: {outcomes}")


@pytest.mark.slow  # 3.5 s measured on a busy machine
@pytest.mark.crash
@pytest.mark.subprocess
@needs_root
def test_read_only_storage_reads_an_encrypted_file(disk: Path) -> None:  # noqa: F811
    db, with_wal, bare_wal = disk / "plain-wal.db", disk / "wal.db", disk / "bare.db"
    for path in (db, with_wal):  # created and checkpointed: the tmpfs holds 5 MB
        with open_manager(path) as memory:
            remember_sentence(memory)
    # A writer that exits without closing leaves its -wal and -shm; the copy has no -shm.
    subprocess.run([sys.executable, "-c", WRITE_AND_DIE, str(with_wal)], check=True,
                   timeout=120, env=os.environ | {"TIERED_MEMORY_KEY": KEY})  # fmt: skip
    assert Path(f"{with_wal}-wal").stat().st_size > 0
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{with_wal}{suffix}", f"{bare_wal}{suffix}")
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    before = {p.name: file_digest(p) for p in disk.iterdir()}
    with open_manager(db, read_only=True) as memory:  # opened immutable: no -wal
        assert memory.recall("lighthouse", k=1)[0].memory.content == SENTENCE
    with SQLiteStore(with_wal, key=KEY, read_only=True) as store:  # -wal and -shm
        assert store.query_episodic(QueryOptions(limit=1))
    with pytest.raises(DatabaseOpenError, match="copy the database"):
        SQLiteStore(bare_wal, key=KEY, read_only=True).open()
    with pytest.raises(EncryptionKeyError):
        open_manager(db, "not the key", read_only=True)
    assert {p.name: file_digest(p) for p in disk.iterdir()} == before
