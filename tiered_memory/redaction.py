"""Redaction on write: secrets are replaced by typed placeholders before anything is stored.

Agents paste API keys, tokens and passwords into conversations; a memory file would keep
them forever, in its backups and exports too. Every write path of the manager (memory
content, scratchpad values, transcript lines, metadata values, tags; ``remember_many``
and ``import_json``) passes text through a :class:`Redactor` first, so a secret never
reaches a table, the keyword index, an embedding, a backup or an export.

The default :class:`SecretRedactor` uses anchored patterns for credentials with a known
shape (cloud keys, vendor tokens, JWTs, private-key blocks, passwords in URLs and
connection strings, ``password=``-style assignments, bearer headers). It was measured
against ``detect-secrets``: that library's line scanner costs about 1 ms per line (the
default plugins and filters), which would cut ``remember()`` throughput several times,
and it misses bearer headers and OpenAI/Anthropic/GCP key shapes; these patterns cost a
few microseconds per memory and found nothing in the LoCoMo conversations or the README.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from persistence import REDACTIONS_KEY, ImportDocument, MemoryStorage, SecretsFoundError

logger = logging.getLogger("tiered_memory.redaction")

PLACEHOLDER = "[REDACTED:{kind}]"
METADATA_KEY = "redacted_secrets"
"""The metadata key where a memory records how many secrets were removed from it."""


@dataclass(frozen=True, slots=True)
class Redaction:
    """What a redactor made of one text: the text to store and the kinds it removed."""

    text: str
    kinds: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many secrets were replaced."""
        return len(self.kinds)


@runtime_checkable
class Redactor(Protocol):
    """Replaces secrets in a text by placeholders; must leave its own output unchanged."""

    def redact(self, text: str) -> Redaction:
        """The text with every secret replaced, and the kind of each one."""
        ...


@dataclass(frozen=True, slots=True)
class _Pattern:
    """One kind of secret: a regex, the group that holds the secret (0: the whole match;
    -1: whichever of groups 1-3 matched), an optional check that the value really looks
    like one, the substrings one of which the text must hold for the regex to be worth
    running (``lower``: looked for in the lower-cased text), and whether the match must
    start a word (checked here: a look-behind would keep ``re`` from skipping ahead)."""

    kind: str
    regex: re.Pattern[str]
    gates: tuple[str, ...]
    group: int = 0
    accept: Callable[[str], bool] | None = None
    lower: bool = False
    starts_word: bool = False
    also: bool = False  # and an assignment's separator (= or :)


def _credential_like(value: str) -> bool:
    """A value of a ``secret:``/``token=`` assignment, not a word of prose or code."""
    if value.startswith(("[REDACTED:", "$", "{", "<", "%(", "os.", "env")):
        return False
    if any(c in value for c in "()[]"):
        return False
    letters = any(c.isalpha() for c in value)
    other = any(not c.isalpha() for c in value)
    return len(value) >= 8 and letters and other


def _password_like(value: str) -> bool:
    """A value of a ``password=`` assignment (anything but a placeholder or a reference)."""
    if value.startswith(("[REDACTED:", "$", "{", "<", "%(", "os.", "env")):
        return False
    return len(value) >= 3 and not any(c in value for c in "()[]") and value.lower() not in {
        "none", "null", "true", "false", "required", "optional", "string", "str", "***",
    }  # fmt: skip


def _luhn(digits: str) -> bool:
    """The Luhn checksum every payment card number satisfies."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_like(value: str) -> bool:
    """13 to 19 digits (spaces or dashes between them) that pass Luhn and start like a
    card (2-6: Mastercard, Amex, Visa, Discover...; never 0, 1, 7-9: timestamps, phone
    numbers and ids start there)."""
    digits = value.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


def _passphrase(value: str) -> bool:
    """Words joined by hyphens, as passphrases are made: four or more words of letters,
    each of three letters or more and two of four or more (``correct-horse-battery-
    staple``), or three words of five letters or more (``purple-monkey-dishwasher``);
    not compounds of prose (``case-sensitive``, ``well-thought-out``, ``hard-and-fast``,
    ``long-term-storage``, ``state-of-the-art``)."""
    words = value.split("-")
    if not all(w.isalpha() for w in words):
        return False
    if len(words) >= 4:
        return all(len(w) >= 3 for w in words) and sum(len(w) >= 4 for w in words) >= 2
    return len(words) == 3 and all(len(w) >= 5 for w in words)


def _spoken_password(value: str) -> bool:
    """The word after "my password is": a password only if it has a digit, a symbol other
    than a hyphen, or a capital after its first letter (``hunter2``, ``Tr0ub4dor&3``; not
    ``too short``, ``case-sensitive``, ``Required``), or is a passphrase of hyphenated
    words (:func:`_passphrase`)."""
    return len(value) >= 4 and (
        any(c.isdigit() for c in value)
        or any(not c.isalnum() and c != "-" for c in value)
        or any(c.isupper() for c in value[1:])
        or _passphrase(value)
    )


IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
"""The IBAN's length in each country that uses one (the ISO 13616 registry)."""


def _iban_like(value: str) -> bool:
    """An IBAN: a country's code, that country's length, and check digits that make the
    ISO 7064 mod-97 checksum come out at 1 (an account-like number that fails it is left
    alone: 1 in 97 random ones pass)."""
    compact = value.replace(" ", "")
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _written_password(value: str) -> bool:
    """The bare word after ``Password:``: a password unless it reads as prose (``Reset your
    password: click the link``); see :func:`_spoken_password`."""
    return _password_like(value) and (_spoken_password(value) or len(value) >= 12)


def _aws_secret_like(value: str) -> bool:
    """40 base64 characters with digits and both cases (an AWS secret access key)."""
    return (
        any(c.isdigit() for c in value) and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
    )  # fmt: skip


_WORD = frozenset(string.ascii_letters + string.digits + "_-")
_E = r"(?![A-Za-z0-9_\-])"  # a token ends here (not inside a longer word)
_PEM = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\:.,-]*)"
)
_PASSWORD_KEYS = r"(?:password|passwd|passphrase|pwd)"
_SECRET_KEYS = (
    r"(?:secret|secret[_-]?key|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|"
    r"access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|token|credentials?)"
)
# key (bare, or quoted as in JSON; as the end of an identifier too: DB_PASSWORD) then
# = : := => and a value: quoted (group 1 or 2; quotes may be escaped, as inside JSON)
# or bare (group 3).
_ASSIGN = (
    r"(?i:{keys})(?:\\?[\"'])?\s*(?::=|=>|=|:)\s*"
    r"(?:\\?\"([^\"\\\n]+)\\?\"|\\?'([^'\\\n]+)\\?'|([^\s\"',;&<>\\]+))"
)
_TOKEN = r"[A-Za-z0-9_\-]"
# A password assignment: a quoted value after any separator, a bare one only after
# = := => (after a colon, a bare word is prose as often as a password: the pattern
# before this one decides, more strictly).
_PASSWORD_ASSIGN = (
    rf"(?i:{_PASSWORD_KEYS})(?:\\?[\"'])?\s*(?:(?::=|=>|=|:)\s*"
    r"(?:\\?\"([^\"\\\n]+)\\?\"|\\?'([^'\\\n]+)\\?')|(?::=|=>|=)\s*([^\s\"',;&<>\\]+))"
)


def _p(kind: str, gates: str | tuple[str, ...], *parts: str, group: int = 0,
       accept: Callable[[str], bool] | None = None, flags: int = 0, lower: bool = False,
       word: bool = False, also: bool = False) -> _Pattern:  # fmt: skip
    gates = (gates,) if isinstance(gates, str) else gates
    regex = re.compile("".join(parts), flags)
    return _Pattern(kind, regex, gates, group, accept, lower, word, also)


_PATTERNS: tuple[_Pattern, ...] = (
    _p("private-key", "PRIVATE KEY", _PEM, flags=re.DOTALL),
    _p("jwt", "eyJ", r"eyJ", _TOKEN, r"{8,}\.eyJ", _TOKEN, r"{8,}\.", _TOKEN, "*", word=True),
    _p("aws-access-key", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
       r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    _p("gcp-api-key", "AIza", r"AIza", _TOKEN, "{35}", _E, word=True),
    _p("gcp-oauth-secret", "GOCSPX-", r"GOCSPX-", _TOKEN, "{20,}", _E, word=True),
    _p("gcp-oauth-token", "ya29.", r"ya29\.", _TOKEN, "{20,}", _E, word=True),
    _p("azure-client-secret", "Q~", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", _E,
       word=True),
    _p("azure-storage-key", ("accountkey=", "sharedaccesskey="),
       r"(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})", group=1, lower=True),
    _p("azure-sas-signature", "sig=", r"[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})", group=1),
    _p("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
       r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_\w{50,255})", _E, word=True),
    _p("gitlab-token", "gl", r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent)-", _TOKEN, "{20,}", _E,
       word=True),
    _p("slack-token", "xox", r"xox[abposre]-(?:\d+-)?[A-Za-z0-9\-]{10,}", _E, word=True),
    _p("slack-webhook", "hooks.slack.com",
       r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{20,}"),
    _p("stripe-key", ("_live_", "_test_"), r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", _E,
       word=True),
    _p("stripe-webhook-secret", "whsec_", r"whsec_[A-Za-z0-9]{24,}", _E, word=True),
    _p("anthropic-key", "sk-ant-", r"sk-ant-[a-z]{2,8}\d{2}-", _TOKEN, "{20,}", _E, word=True),
    _p("openai-key", "sk-", r"sk-(?:(?:proj|svcacct|admin)-)?",
       rf"(?={_TOKEN}*\d)(?={_TOKEN}*[A-Za-z]){_TOKEN}{{20,}}", _E, word=True),
    _p("huggingface-token", "hf_", r"hf_[A-Za-z0-9]{30,}", _E, word=True),
    _p("npm-token", "npm_", r"npm_[A-Za-z0-9]{36}", _E, word=True),
    _p("sendgrid-key", "SG.", r"SG\.", _TOKEN, r"{22}\.", _TOKEN, "{43}", _E, word=True),
    _p("url-password", "://", r"://[^\s:/@\"']*:([^\s@/\"']+)@", group=1),
    # a password with spaces in a URL: up to 64 characters, then @host
    _p("url-password", "://", r"://[^\s:/@\"']+:([^@/\"'\n]{1,64}?)@(?=[A-Za-z0-9])",
       group=1, accept=lambda v: " " in v.strip() and not v.startswith("[REDACTED:")),
    _p("aws-secret-key", "aws",
       r"(?i:aws)(?:[\s_-]*(?i:secret|access|key)){1,3}[\w\s]{0,24}?(?:\bis\b|[:=])?\s*",
       r"[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", group=1, accept=_aws_secret_like,
       lower=True),
    # an IBAN compact or in groups of four (``DE89 3704 0044 0532 0130 00``), before the
    # card numbers: its digits could pass for one
    _p("iban", tuple(string.digits),
       r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)",
       r"(?![A-Za-z0-9])", accept=_iban_like),
    _p("card-number", tuple("23456"), r"(?<![\w.\-/])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\w\-/])",
       accept=_card_like),
    # named as one (``SSN: 123456789``, ``social security number is 123 45 6789``): any
    # separator, or none; unnamed, only the dashed form (nine digits are too common)
    _p("us-ssn", ("ssn", "social security"),
       r"\b(?i:ssn|social[\s-]+security(?:[\s-]+(?:number|no\.?|#))?)\b",
       r"(?:\s*(?:#|:|=|\b(?i:is|was)\b))*\s*",
       r"((?!000|666|9\d\d)\d{3}([ -]?)(?!00)\d{2}\2(?!0000)\d{4})(?![\d-])", group=1,
       lower=True),
    _p("us-ssn", "-", r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])"),
    _p("password", ("password", "passphrase", "passcode"),
       r"\b(?i:my|the|our|your|his|her|their|new|wifi|wi-fi)\s+(?:\w+\s+)?",
       r"(?i:password|passphrase|passcode)\s+(?i:is|was)\s*:?\s*[\"'“]?",
       r"([^\s\"'”]+?)[\"'”]?(?=[.,;!?)]*(?:[\s\"'\\]|$))", group=1, accept=_spoken_password,
       lower=True),
    # ``Password: p&ss;w0rd`` in prose: the whole word after the colon (the assignment
    # below stops at & ; , < > as in connection strings and query strings)
    _p("password", ("pass", "pwd"), r"(?i:{keys})\s*:\s*".replace("{keys}", _PASSWORD_KEYS),
       r"(?![\\\"'])([^\s\"'\\]+?)(?=[.,;!?)]*(?:[\s\"'\\]|$))", group=1, accept=_written_password,
       lower=True),
    _p("bearer-token", "bearer", r"\b(?:[Bb]earer|BEARER)\s+([A-Za-z0-9\-._~+/]{16,}=*)",
       group=1, accept=_credential_like, lower=True),
    _p("basic-auth", "basic", r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic)\s+",
       r"([A-Za-z0-9+/]{8,}={0,2})", group=1, lower=True),
    _p("password", ("pass", "pwd"), _PASSWORD_ASSIGN, group=-1,
       accept=_password_like, lower=True, also=True),
    _p("secret", ("secret", "key", "token", "credential"), _ASSIGN.format(keys=_SECRET_KEYS),
       group=-1, accept=_credential_like, lower=True, also=True),
)  # fmt: skip
"""Most specific first: a later pattern never sees what an earlier one replaced."""


class SecretRedactor:
    """The default :class:`Redactor`: typed placeholders for well-known secret shapes.

    ``extra`` adds ``(kind, regex)`` pairs of your own (the whole match is replaced),
    tried after the built-in patterns.
    """

    __slots__ = ("_patterns", "_gates")

    def __init__(self, extra: Sequence[tuple[str, str | re.Pattern[str]]] = ()) -> None:
        added = tuple(_Pattern(kind, re.compile(regex), ()) for kind, regex in extra)
        self._patterns = _PATTERNS + added
        self._gates = _any_gate(self._patterns)

    def redact(self, text: str) -> Redaction:
        """Replace every secret in ``text`` by ``[REDACTED:kind]``."""
        kinds: list[str] = []
        lowered = text.lower()
        gates = self._gates
        if gates is not None and not gates[0].search(text) and not gates[1].search(lowered):
            return Redaction(text)  # no pattern's gate: none of them would run
        marked = "=" in text or ":" in text
        for pattern in self._patterns:
            if pattern.also and not marked:
                continue
            if pattern.gates:
                where = lowered if pattern.lower else text
                for gate in pattern.gates:  # a plain loop: cheaper than any() per pattern
                    if gate in where:
                        break
                else:
                    continue
            before = len(kinds)
            text = _apply(pattern, text, kinds)
            if len(kinds) != before:
                lowered = text.lower()
        return Redaction(text, tuple(kinds))


def _any_gate(
    patterns: Sequence[_Pattern],
) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """Two searches that find a gate of any of ``patterns``: in the text and in the
    lower-cased text (``None`` if a pattern has no gates, as ``extra`` ones: it always
    runs). Most texts hold no gate, and these two searches cost less than looking for
    every gate in turn (6.5 -> 3.5 µs for a remember()'s content and tag)."""
    if not all(p.gates for p in patterns):
        return None

    def either(gates: set[str]) -> re.Pattern[str]:
        return re.compile("|".join(map(re.escape, sorted(gates))) or "(?!)")

    exact = {gate for p in patterns if not p.lower for gate in p.gates}
    lower = {gate for p in patterns if p.lower for gate in p.gates}
    return either(exact), either(lower)


def _apply(pattern: _Pattern, text: str, kinds: list[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if pattern.starts_word and match.start() and text[match.start() - 1] in _WORD:
            return match.group(0)  # inside a longer word
        group = pattern.group
        if group == -1:  # an assignment: the value is whichever alternative matched
            group = next(g for g in (1, 2, 3) if match.group(g) is not None)
        value = match.group(group)
        if value.startswith("[REDACTED:") or (pattern.accept and not pattern.accept(value)):
            return match.group(0)
        kinds.append(pattern.kind)
        start, end = match.span(group)
        whole, offset = match.group(0), match.start(0)
        placeholder = PLACEHOLDER.format(kind=pattern.kind)
        return whole[: start - offset] + placeholder + whole[end - offset :]

    return pattern.regex.sub(replace, text)


DEFAULT_REDACTOR = SecretRedactor()


# --- applying a redactor to the fields of a write ----------------------------------------


def redact_text(redactor: Redactor | None, text: str) -> tuple[str, int]:
    """``text`` with secrets replaced and how many were; unchanged without a redactor."""
    if redactor is None or not isinstance(text, str):
        return text, 0
    found = redactor.redact(text)
    return found.text, found.count


def redact_value(redactor: Redactor | None, value: Any) -> tuple[Any, int]:
    """A metadata value with every string inside it redacted (keys are kept)."""
    if redactor is None:
        return value, 0
    if isinstance(value, str):
        return redact_text(redactor, value)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        total = 0
        for key, item in value.items():
            out[key], n = redact_value(redactor, item)
            total += n
        return (out, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        items = [redact_value(redactor, item) for item in value]
        total = sum(n for _, n in items)
        if not total:
            return value, 0
        redone = [item for item, _ in items]
        return (tuple(redone) if isinstance(value, tuple) else redone), total
    return value, 0


def redact_tags(redactor: Redactor | None, tags: Any) -> tuple[Any, int]:
    """Tags with secrets replaced (a tag that becomes a repeat is dropped)."""
    if redactor is None or isinstance(tags, str | bytes) or not isinstance(tags, Sequence):
        return tags, 0
    total = 0
    out: list[Any] = []
    for tag in tags:
        tag, n = redact_text(redactor, tag)
        total += n
        if not n or tag not in out:
            out.append(tag)
    if not total:
        return tags, 0
    return (tuple(out) if isinstance(tags, tuple) else out), total


def redact_fields(
    redactor: Redactor | None, content: Any, tags: Any, metadata: Any, *, record: bool = True
) -> tuple[Any, Any, Any, int]:
    """A memory's content, tags and metadata redacted (each may be ``None``: left so);
    with ``record`` the metadata then counts them under :data:`METADATA_KEY` (added to
    what it held before)."""
    content, in_content = redact_text(redactor, content)
    tags, in_tags = redact_tags(redactor, tags)
    metadata, in_metadata = redact_value(redactor, metadata)
    total = in_content + in_tags + in_metadata
    if total and record:
        metadata = with_count(metadata, total)
    return content, tags, metadata, total


def with_count(metadata: Mapping[str, Any] | None, added: int) -> dict[str, Any]:
    """``metadata`` with ``added`` more secrets counted under :data:`METADATA_KEY`."""
    out = dict(metadata or {})
    before = out.get(METADATA_KEY)
    already = before if isinstance(before, int) and not isinstance(before, bool) else 0
    out[METADATA_KEY] = already + added
    return out


def redaction_count(metadata: Mapping[str, Any]) -> int:
    """How many secrets were removed from the memory with this metadata."""
    value = metadata.get(METADATA_KEY, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def count_in_file(store: MemoryStorage, count: int) -> None:
    """Add ``count`` to the file's total of redacted secrets (joins the caller's
    transaction, so the count lands with the write it belongs to)."""
    if count:
        store.increment_meta(REDACTIONS_KEY, count)


def total_in_file(store: MemoryStorage) -> int:
    """How many secrets were redacted on the way into the file (``statistics()``)."""
    value = store.get_meta(REDACTIONS_KEY)
    return int(value) if value and value.isdigit() else 0


def document_scrubber(
    redactor: Redactor, *, refuse: bool = False
) -> Callable[[ImportDocument], int]:
    """The import hook: redact every memory, session and transcript line of an export
    before any of it is written (an export from an older version may hold secrets), or
    with ``refuse`` raise :class:`SecretsFoundError` naming the first secret's place."""

    def scrub(doc: ImportDocument) -> int:
        total = 0
        for n, (where, memory) in enumerate(doc.memories):
            content, tags, metadata, found = redact_fields(
                redactor, memory.content, memory.tags, memory.metadata
            )
            if found:
                _refuse_if(refuse, where, redactor, memory.content, memory.tags, memory.metadata)
                doc.memories[n] = (where, replace(memory, content=content, tags=tags,
                                                  metadata=metadata))  # fmt: skip
                total += found
        for n, (where, session) in enumerate(doc.sessions):
            metadata, found = redact_value(redactor, session.metadata)
            if found:
                _refuse_if(refuse, where, redactor, "", (), session.metadata)
                doc.sessions[n] = (where, replace(session, metadata=metadata))
                total += found
        for n, (where, entry) in enumerate(doc.transcripts):
            content, found = redact_text(redactor, entry.content)
            if found:
                _refuse_if(refuse, where, redactor, entry.content, (), {})
                doc.transcripts[n] = (where, replace(entry, content=content))
                total += found
        total += _scrub_notes(doc, redactor, refuse)
        if total:
            logger.info("import: %d secret(s) redacted before writing", total)
        return total

    return scrub


_NOTE_TEXTS = {"notes": (1, 2), "note_versions": (2, 3), "memory_versions": (2,)}
"""Positions of the free-text fields (titles, contents) in the note tables' rows."""


def _scrub_notes(doc: ImportDocument, redactor: Redactor, refuse: bool) -> int:
    """Redact the titles and contents of the document's notes, their versions and the
    memories' earlier contents (or refuse at the first secret)."""
    total = 0
    for table, positions in _NOTE_TEXTS.items():
        rows = doc.notes.rows.get(table, [])
        for n, row in enumerate(rows):
            values = list(row)
            for at in positions:
                text, found = redact_text(redactor, values[at])
                if found:
                    _refuse_if(refuse, f"tables.{table}[{n}]", redactor, values[at], (), {})
                    values[at] = text
                    total += found
            rows[n] = tuple(values)
    return total


def _refuse_if(
    refuse: bool, where: str, redactor: Redactor, content: str, tags: Any, metadata: Any
) -> None:
    if not refuse:
        return
    for field, value in (("content", content), ("tags", tags), ("metadata", metadata)):
        kinds: list[str] = []
        for text in _strings(value):
            kinds += redactor.redact(text).kinds
        if kinds:
            raise SecretsFoundError(
                f"{where}.{field}",
                f"holds a secret ({kinds[0]}); import without refusing to store it as "
                f"{PLACEHOLDER.format(kind=kinds[0])}, or remove it from the document",
            )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []
