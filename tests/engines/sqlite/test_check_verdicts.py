"""`tiered-memory check --json` answers for any path: a JSON verdict on stdout and exit 1
for everything but a sound file (missing, empty, not SQLite, a SQLite file of another
program, header only, truncated at any length, the wrong key, a newer schema)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import apsw
import orjson
import pytest

from tests.engines.sqlite.test_salvage import make, run

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verdicts") / "sound.db"
    make(path)
    return path


def verdict(path: Path, *options: str) -> tuple[int, dict[str, object]]:
    result: subprocess.CompletedProcess[str] = run(*options, "check", str(path), "--json")
    assert result.stdout.strip(), result.stderr  # always a JSON answer on stdout
    data = orjson.loads(result.stdout)
    assert isinstance(data, dict)
    if data["verdict"] != "ok":
        assert result.stderr.startswith("error: "), result.stderr
    return result.returncode, data


def test_a_sound_file_is_ok(sound: Path) -> None:
    code, data = verdict(sound)
    assert (code, data["verdict"], data["ok"]) == (0, "ok", True)


def test_files_that_are_no_database(tmp_path: Path, sound: Path) -> None:
    (tmp_path / "empty.db").touch()
    (tmp_path / "text.db").write_text("just some text\n" * 100)
    (tmp_path / "header.db").write_bytes(sound.read_bytes()[:100])
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.commit()
    expected = {"missing.db": "missing", "empty.db": "empty", "text.db": "not_sqlite",
                "header.db": "damaged", "other.db": "foreign"}  # fmt: skip
    for name, kind in expected.items():
        code, data = verdict(tmp_path / name)
        assert (code, data["verdict"], data["ok"]) == (1, kind, False), (name, data)
        assert data["detail"]
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.slow  # one check per cut
def test_a_file_cut_at_any_length_gets_a_verdict(tmp_path: Path, sound: Path) -> None:
    data = sound.read_bytes()
    page = 4096
    cuts = sorted({100, page, page + 1, 3 * page, *(len(data) * n // 10 for n in range(1, 10))})
    for cut in cuts:
        cut_file = tmp_path / f"cut{cut}.db"
        cut_file.write_bytes(data[:cut])
        code, answer = verdict(cut_file)
        assert code == 1 and answer["ok"] is False, (cut, answer)
        assert answer["verdict"] in {"damaged", "problems", "not_sqlite"}, (cut, answer)


def test_the_wrong_key_and_a_newer_schema(tmp_path: Path) -> None:
    secret = tmp_path / "secret.db"
    make(secret, key="right key")
    (tmp_path / "wrong.key").write_text("wrong key\n")
    code, data = verdict(secret, "--key-file", str(tmp_path / "wrong.key"))
    assert (code, data["verdict"]) == (1, "wrong_key")
    newer = tmp_path / "newer.db"
    make(newer)
    conn = apsw.Connection(str(newer))
    conn.execute("INSERT INTO schema_version VALUES (99, 0, 'future')")
    conn.close()
    code, data = verdict(newer)
    assert (code, data["verdict"]) == (1, "newer_schema")
