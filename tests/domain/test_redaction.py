"""Redaction on write: secrets never reach the file, its WAL, a backup or an export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import FakeClock
from tests.support.data_checks import data_checksum
from tests.support.secret_corpus import Case, corpus, decoys
from tiered_memory import AgentMemoryManager, MemoryConfig, Tier
from tiered_memory.errors import InvalidTypeError, SecretsFoundError
from tiered_memory.redaction import METADATA_KEY, Redaction, SecretRedactor

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo-dev.json"
CASES = corpus()


def _open(path: Path, clock: FakeClock, **config: Any) -> AgentMemoryManager:
    config.setdefault("embedder", None)
    return AgentMemoryManager.open(path, clock=clock, embed_in_background=False, **config)


def _leaks(data: bytes, cases: list[Case]) -> list[str]:
    return [n for c in cases for n in c.needles if n.encode() in data]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_every_fake_secret_is_replaced_by_its_typed_placeholder(case: Case) -> None:
    found = SecretRedactor().redact(case.text)
    assert not [n for n in case.needles if n in found.text], found.text
    assert f"[REDACTED:{case.kind}]" in found.text and case.kind in found.kinds
    again = SecretRedactor().redact(found.text)
    assert again == Redaction(found.text)  # its own output is left alone


def test_the_corpus_covers_every_kind_the_issue_names() -> None:
    kinds = {c.kind for c in CASES}
    assert {"aws-access-key", "gcp-api-key", "azure-storage-key", "azure-client-secret",
            "github-token", "gitlab-token", "slack-token", "stripe-key", "openai-key",
            "anthropic-key", "jwt", "private-key", "url-password", "password", "secret",
            "bearer-token", "card-number", "us-ssn", "aws-secret-key", "iban"} <= kinds  # fmt: skip
    assert len(CASES) >= 200


@pytest.mark.parametrize("decoy", decoys())
def test_a_decoy_is_left_untouched(decoy: str) -> None:
    """Commit SHAs, UUIDs, digests, timestamps, base64 images, numbers that fail Luhn and
    prose about passwords look like secrets and are not."""
    assert SecretRedactor().redact(decoy) == Redaction(decoy)


def test_a_hyphenated_passphrase_and_an_iban_are_caught() -> None:
    """Issue 45's misses: a passphrase of hyphenated words stated in prose, and IBANs
    (checked by country, length and the mod-97 checksum)."""
    redact = SecretRedactor().redact
    for phrase in ("correct-horse-battery-staple", "purple-monkey-dishwasher"):
        found = redact(f"the wifi password is {phrase}")
        assert found.text == "the wifi password is [REDACTED:password]"
    for iban in ("DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "NO9386011117947"):
        found = redact(f"pay the rent to {iban} by Friday")
        assert found.text == "pay the rent to [REDACTED:iban] by Friday", found
    assert redact("GB82WEST12345698765433").kinds == ()  # one digit off: the checksum fails


def test_the_issue_28_misses_are_caught_whole() -> None:
    redact = SecretRedactor().redact
    assert redact("Password: Tr0ub4dor&3").text == "Password: [REDACTED:password]"
    assert redact("my password is hunter2!x").text == "my password is [REDACTED:password]"
    assert redact("pay with 4111 1111 1111 1111 today").kinds == ("card-number",)
    assert redact("pay with 4111111111111111 today").kinds == ("card-number",)
    assert redact("pay with 4111 1111 1111 1112 today").count == 0  # fails Luhn
    assert redact("SSN 123-45-6789").text == "SSN [REDACTED:us-ssn]"
    aws = "my AWS secret key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert redact(aws).text == "my AWS secret key is [REDACTED:aws-secret-key]"
    url = redact("postgres://app:my secret pw@db.internal:5432/prod")
    assert url.text == "postgres://app:[REDACTED:url-password]@db.internal:5432/prod"


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_strings(item)


def test_no_false_positive_in_conversations_or_the_readme() -> None:
    """LoCoMo's conversations (when the team's data sits beside the repository, as in
    CI) and the project's own README, documentation pages and CHANGELOG: nothing may be
    redacted."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts = [page.read_text() for page in pages]
    texts += [line for text in texts[:] for line in text.splitlines()]
    if LOCOMO.is_file():
        texts += list(_walk_strings(json.loads(LOCOMO.read_text())))
        assert len(texts) > 10_000
    redactor = SecretRedactor()
    found = [(r.kinds, text[:80]) for text in texts if (r := redactor.redact(text)).count]
    assert found == []


@pytest.mark.slow
def test_nothing_of_a_secret_reaches_the_file_wal_backup_or_export(
    tmp_path: Path, clock: FakeClock
) -> None:
    db = tmp_path / "agent.db"
    with _open(db, clock) as memory:
        session = memory.start_session(metadata={"login": CASES[0].text})
        for n, case in enumerate(CASES):
            way = n % 5
            if way == 0:
                memory.remember(case.text, session_id=session.session_id)
            elif way == 1:
                memory.remember("a note", metadata={"raw": case.text, "nested": [case.text]})
            elif way == 2:
                memory.scratchpad.put(f"k{n}", case.text)
            elif way == 3:
                memory.append_transcript(session.session_id, "user", case.text)
            else:
                tags = [case.text] if case.token else []
                memory.remember_many([{"content": case.text, "tags": tags}])
        tagged = [c for c in CASES if c.token][:3]
        memory.remember("tagged", tags=[c.needles[0] for c in tagged])
        wal = (tmp_path / "agent.db-wal").read_bytes()
        assert wal and _leaks(wal, CASES) == []
        backup = memory.backup(tmp_path / "snap.db")
        export = memory.export_json(tmp_path / "export.json")
        stats = memory.statistics()
    assert _leaks(db.read_bytes(), CASES) == []
    assert _leaks(backup.read_bytes(), CASES) == []
    assert _leaks(export.read_bytes(), CASES) == []
    assert stats.redactions >= len(CASES) + 3
    assert b"[REDACTED:" in db.read_bytes()


def test_the_memory_and_statistics_count_what_was_removed(tmp_path: Path, clock: FakeClock) -> None:
    token, jwt = (next(c.needles[0] for c in CASES if c.kind == k) for k in ("github-token", "jwt"))
    with _open(tmp_path / "a.db", clock) as memory:
        m = memory.remember(f"use {token} and {jwt}", tags=["ci", token], metadata={"k": jwt})
        assert m.content == "use [REDACTED:github-token] and [REDACTED:jwt]"
        assert m.tags == ("ci", "[REDACTED:github-token]")
        assert m.metadata == {"k": "[REDACTED:jwt]", METADATA_KEY: 4}
        updated = memory.update(m.id, content=f"now {token}")
        assert updated.content == "now [REDACTED:github-token]"
        assert updated.metadata[METADATA_KEY] == 5
        entry = memory.append_transcript(memory.start_session().session_id, "user", token)
        assert entry.content == "[REDACTED:github-token]"
        pad = memory.remember(token, Tier.SCRATCHPAD, key="k")
        assert pad.content == "[REDACTED:github-token]" and pad.metadata[METADATA_KEY] == 1
        clean = memory.remember("nothing secret here")
        assert METADATA_KEY not in clean.metadata
        assert memory.statistics().redactions == 7
    with _open(tmp_path / "a.db", clock, read_only=True) as again:
        assert again.statistics().redactions == 7
        assert again.get(m.id) == updated


def test_redaction_can_be_turned_off_or_replaced(tmp_path: Path, clock: FakeClock) -> None:
    token = next(c.needles[0] for c in CASES if c.kind == "github-token")
    with _open(tmp_path / "off.db", clock, redact=False) as memory:
        assert memory.remember(token).content == token
    with _open(tmp_path / "none.db", clock, redactor=None) as memory:
        assert memory.remember(token).content == token
        assert memory.statistics().redactions == 0

    class Names:
        def redact(self, text: str) -> Redaction:
            kinds = ("name",) * text.count("Alice")
            return Redaction(text.replace("Alice", "[REDACTED:name]"), kinds)

    with _open(tmp_path / "own.db", clock, redactor=Names()) as memory:
        assert memory.remember(f"Alice has {token}").content == f"[REDACTED:name] has {token}"
    with pytest.raises(InvalidTypeError):
        MemoryConfig(redactor="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        MemoryConfig(redact=1)  # type: ignore[arg-type]


@pytest.fixture
def export_with_secrets(tmp_path: Path, clock: FakeClock) -> Path:
    """An export written without redaction (as an older version would have)."""
    with _open(tmp_path / "old.db", clock, redact=False) as old:
        session = old.start_session()
        for case in CASES[:30]:
            old.remember(case.text, metadata={"v": case.text})
            old.append_transcript(session.session_id, "user", case.text)
        return old.export_json(tmp_path / "old.json")


def test_import_redacts_an_export_that_holds_secrets(
    tmp_path: Path, clock: FakeClock, export_with_secrets: Path
) -> None:
    assert _leaks(export_with_secrets.read_bytes(), CASES[:30])
    for mode in ("replace", "merge"):
        db = tmp_path / f"{mode}.db"
        with _open(db, clock) as memory:
            memory.import_json(export_with_secrets, mode)
            assert memory.statistics().redactions >= 90
            re_export = memory.export_json(tmp_path / f"{mode}.json")
        assert _leaks(db.read_bytes(), CASES[:30]) == []
        assert _leaks(re_export.read_bytes(), CASES[:30]) == []
        doc = orjson.loads(re_export.read_bytes())
        assert all(row["metadata"][METADATA_KEY] >= 2 for row in doc["tables"]["episodic"])


def test_import_can_refuse_secrets_and_then_changes_nothing(
    tmp_path: Path, clock: FakeClock, export_with_secrets: Path
) -> None:
    db = tmp_path / "strict.db"
    with _open(db, clock) as memory:
        memory.remember("kept")
    before = data_checksum(db)
    with _open(db, clock, redact=False) as memory:  # refusing works with redaction off too
        with pytest.raises(SecretsFoundError) as failed:
            memory.import_json(export_with_secrets, refuse_secrets=True)
        assert failed.value.location == "tables.episodic[0].content"
        assert "[REDACTED:" in str(failed.value) and "nothing was imported" in str(failed.value)
        assert [m.content for m in memory.query()] == ["kept"]
    assert data_checksum(db) == before


@pytest.mark.slow
@pytest.mark.subprocess
def test_cli_import_refuses_or_redacts_and_stats_counts(
    tmp_path: Path, export_with_secrets: Path
) -> None:
    from tests.interfaces.test_cli import run

    db = tmp_path / "cli.db"
    refused = run("import", str(db), str(export_with_secrets), "--refuse-secrets")
    assert refused.returncode == 1 and "holds a secret" in refused.stderr
    assert run("import", str(db), str(export_with_secrets)).returncode == 0
    stats = run("stats", str(db))
    assert stats.returncode == 0 and "redacted       " in stats.stdout
    assert _leaks(db.read_bytes(), CASES[:30]) == []
