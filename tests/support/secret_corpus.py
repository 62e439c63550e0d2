"""A generated corpus of realistically formatted fake secrets (each kind in several shapes,
inside sentences, JSON and code), for the redaction tests and benchmark.

Every value is made up here from a seeded generator; none is a real credential. Each
case names the secret's kind, the text it sits in and the needles: the pieces of the
secret that must appear nowhere once it was redacted.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
PASSWORD = ALNUM + "!#%*+-.?^_~"


@dataclass(frozen=True)
class Case:
    kind: str
    text: str
    needles: tuple[str, ...]
    token: bool  # a single word: also usable as a tag


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    # at least one digit and one letter, like real keys (when the alphabet has both)
    mixed = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if not mixed or (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            return value


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _pem(rng: random.Random, label: str, escaped: bool) -> tuple[str, tuple[str, ...]]:
    lines = [_r(rng, B64, 64) for _ in range(rng.randint(4, 8))] + [_r(rng, B64, 24) + "=="]
    sep = "\\n" if escaped else "\n"
    block = sep.join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])
    return block, tuple(lines)


def secrets(rng: random.Random) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """(kind, secret as written, needles, is a single token) for each shape of each kind."""
    out: list[tuple[str, str, tuple[str, ...], bool]] = []

    def token(kind: str, value: str) -> None:
        out.append((kind, value, (value,), True))

    def inside(kind: str, written: str, value: str) -> None:
        out.append((kind, written, (value,), False))

    for prefix in ("AKIA", "ASIA"):
        token("aws-access-key", prefix + _r(rng, UPPER, 16))
    for written in (
        "aws_secret_access_key = {}",
        "my AWS secret key is {}",
        "the aws secret access key: {}",
        "AWS secret {} (rotate it monthly)",
    ):
        aws_secret = _aws_secret(rng)
        inside("aws-secret-key", written.format(aws_secret), aws_secret)
    token("gcp-api-key", "AIza" + _r(rng, URLSAFE, 35))
    token("gcp-oauth-secret", "GOCSPX-" + _r(rng, URLSAFE, 28))
    token("gcp-oauth-token", "ya29." + _r(rng, URLSAFE, 120))
    block, lines = _pem(rng, "PRIVATE KEY", escaped=True)  # as in a service-account JSON
    out.append(("private-key", f'"private_key": "{block}\\n"', lines, False))
    token("azure-client-secret", _r(rng, ALNUM, 3) + "8Q~" + _r(rng, URLSAFE + ".~", 34))
    account_key = _r(rng, B64, 86) + "=="
    inside(
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acme;"
        f"AccountKey={account_key};EndpointSuffix=core.windows.net",
        account_key,
    )
    sig = _r(rng, ALNUM, 43) + "%3D"
    inside("azure-sas-signature", f"https://acme.blob.core.windows.net/c?sv=2022&sig={sig}", sig)
    for prefix in ("ghp_", "gho_", "ghs_"):
        token("github-token", prefix + _r(rng, ALNUM, 36))
    token("github-token", "github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59))
    token("gitlab-token", "glpat-" + _r(rng, URLSAFE, 20))
    token("gitlab-token", "gldt-" + _r(rng, URLSAFE, 24))
    digits = string.digits
    token("slack-token", f"xoxb-{_r(rng, digits, 12)}-{_r(rng, digits, 13)}-{_r(rng, ALNUM, 24)}")
    token("slack-token", f"xoxp-{_r(rng, digits, 11)}-{_r(rng, digits, 12)}-{_r(rng, ALNUM, 32)}")
    hook = f"T{_r(rng, UPPER, 8)}/B{_r(rng, UPPER, 10)}/{_r(rng, ALNUM, 24)}"
    inside("slack-webhook", f"https://hooks.slack.com/services/{hook}", hook)
    token("stripe-key", "sk_live_" + _r(rng, ALNUM, 24))
    token("stripe-key", "rk_test_" + _r(rng, ALNUM, 99))
    token("stripe-webhook-secret", "whsec_" + _r(rng, ALNUM, 32))
    token("openai-key", "sk-proj-" + _r(rng, URLSAFE, 156))
    token("openai-key", "sk-" + _r(rng, ALNUM, 48))
    token("anthropic-key", "sk-ant-api03-" + _r(rng, URLSAFE, 93) + "AA")
    token("huggingface-token", "hf_" + _r(rng, ALNUM, 34))
    token("npm-token", "npm_" + _r(rng, ALNUM, 36))
    token("sendgrid-key", f"SG.{_r(rng, URLSAFE, 22)}.{_r(rng, URLSAFE, 43)}")
    for claims in ({"sub": "1234567890", "name": "Jane"}, {"iss": "acme", "exp": 1900000000}):
        header = _b64url({"alg": "HS256", "typ": "JWT"})
        jwt = f"{header}.{_b64url(claims)}.{_r(rng, URLSAFE, 43)}"
        token("jwt", jwt)
    for label in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"):
        block, lines = _pem(rng, label, escaped=False)
        out.append(("private-key", block, lines, False))
    for scheme, user, host in (
        ("postgres", "app", "db.internal:5432/prod"),
        ("mongodb+srv", "admin", "cluster0.example.net/?retryWrites=true"),
        ("redis", "", "cache.local:6379/0"),
        ("https", "deploy", "git.example.com/acme/repo.git"),
    ):
        pw = _r(rng, ALNUM + "!*-_.~", 14)
        inside("url-password", f"{scheme}://{user}:{pw}@{host}", pw)
    for words in (2, 3):  # a password with spaces in it
        pw = " ".join(_r(rng, ALNUM + "!*", 6) for _ in range(words))
        inside("url-password", f"postgres://app:{pw}@db.internal:5432/prod", pw)
    for card in _cards(rng):
        inside("card-number", card, card)
    for _ in range(3):
        ssn = f"{rng.randint(1, 665):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
        inside("us-ssn", f"SSN {ssn}", ssn)
    for written, sep in (("SSN: {}", ""), ("my social security number is {}.", " "),
                         ("Social Security No. {}", "-"), ("ssn#{}", "")):  # fmt: skip
        ssn = (
            f"{rng.randint(1, 665):03d}{sep}{rng.randint(10, 99):02d}{sep}{rng.randint(1000, 9999)}"
        )
        inside("us-ssn", written.format(ssn), ssn)
    for written in (
        "Server=tcp:acme.database.windows.net,1433;Database=prod;User ID=sa;Password={};",
        "Driver={{PostgreSQL}};Server=db;Uid=app;Pwd={};",
        'password = "{}"',
        "DB_PASSWORD={}",
        "passwd: {}",
        "my password: {}",
        "'passphrase': '{}'",
    ):
        pw = _r(rng, PASSWORD, 16)
        inside("password", written.format(pw), pw)
    for written in (
        "Password: {}",
        "my password is {}",
        "the wifi password is {}, use it",
        "Your new passphrase was '{}'.",
    ):
        pw = _r(rng, PASSWORD + "&;,<>", 14) + "&3"  # a tail after & (kept before: issue 28)
        inside("password", written.format(pw), pw)
    for written in (
        "the wifi password is {}",
        "My passphrase is {}.",
        "Password: {}",
    ):
        words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 8)))
                 for _ in range(rng.randint(3, 5))]  # fmt: skip
        phrase = "-".join(words)
        inside("password", written.format(phrase), phrase)
    for country in ("DE", "GB", "FR", "NL", "CH", "NO"):
        iban = _iban(rng, country)
        grouped = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        inside("iban", f"send it to {iban} please", iban)
        inside("iban", f"IBAN: {grouped}.", grouped)
    for written in (
        "secret: {}",
        '"api_key": "{}"',
        "API_KEY={}",
        "client_secret='{}'",
        "access_token := {}",
        "refresh_token => {}",
        "credentials={}",
    ):
        value = _r(rng, ALNUM + "-_", 32)
        inside("secret", written.format(value), value)
    for written in ("Authorization: Bearer {}", "curl -H 'authorization: bearer {}' api"):
        value = _r(rng, URLSAFE + ".", 40)
        inside("bearer-token", written.format(value), value)
    basic = base64.b64encode(f"admin:{_r(rng, ALNUM, 12)}".encode()).decode()
    inside("basic-auth", f"Authorization: Basic {basic}", basic)
    return out


def _luhn_digit(body: str) -> str:
    """The check digit that makes ``body`` + it pass Luhn."""
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def _card(rng: random.Random, prefix: str, length: int, valid: bool = True) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    check = _luhn_digit(body)
    return body + (check if valid else str((int(check) + rng.randint(1, 9)) % 10))


def _cards(rng: random.Random) -> list[str]:
    """Luhn-valid card numbers as people write them: plain, in fours, with dashes; Amex."""
    visa, master, amex, discover = (
        _card(rng, "4", 16), _card(rng, "5" + rng.choice("12345"), 16),
        _card(rng, "3" + rng.choice("47"), 15), _card(rng, "6011", 16),
    )  # fmt: skip
    fours = " ".join(master[i : i + 4] for i in range(0, 16, 4))
    dashed = "-".join(discover[i : i + 4] for i in range(0, 16, 4))
    return [visa, fours, dashed, f"{amex[:4]} {amex[4:10]} {amex[10:]}"]


IBAN_LENGTHS = {"DE": 22, "GB": 22, "FR": 27, "NL": 18, "CH": 21, "NO": 15}


def _iban(rng: random.Random, country: str, valid: bool = True) -> str:
    """An IBAN of ``country``: a random account part and the check digits ISO 7064 gives
    it (``valid=False``: other check digits, so the checksum fails)."""
    length = IBAN_LENGTHS[country]
    bank = "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) if country in (
        "GB", "NL") else ""  # fmt: skip
    account = bank + "".join(rng.choice(string.digits) for _ in range(length - 4 - len(bank)))
    number = int("".join(str(int(c, 36)) for c in account + country + "00"))
    check = 98 - number % 97
    if not valid:
        check = (check + rng.randint(1, 50)) % 97 + 2
        if check == 98 - number % 97:
            check = check % 97 + 2
    return f"{country}{check:02d}{account}"


def _aws_secret(rng: random.Random) -> str:
    while True:
        value = _r(rng, B64, 40)
        if any(c.islower() for c in value) and any(c.isupper() for c in value):
            return value


def decoys(seed: int = 23) -> list[str]:
    """Texts that look like secrets and are not: none may be touched by the redactor."""
    rng = random.Random(seed)
    hexd = "0123456789abcdef"
    out = [
        "Reset your password: click the link in the email.",
        "my password is too short, the site says",
        "The password is case-sensitive.",
        "The password is case-sensitive, and up-to-date rules apply.",
        "the passphrase is state-of-the-art, says the vendor",
        "our password is well-known",
        "the password is well-thought-out, they say",
        "my password is hard-and-fast, they say",
        "the password is long-term-storage, not a cache",
        "The password is case-insensitive-ish",
        "a state-of-the-art, easy-to-use, built-in password manager",
        "invoice DE12 3456 7890 (a reference, not an account)",
        "ticket AB12CDEF34567890123 was closed",
        "part number GB29XYZW1234567819 is out of stock",  # GB's length is 22
        "Your password was changed yesterday.",
        "the password is stored in the vault, ask Ana",
        "my password is in 1Password",
        "Password: required (see the form)",
        "Enter your password: ",
        "the AWS secret key lives in the vault, never in the repo",
        "rotate the aws secret access key every 90 days",
        "call me at 555-123-4567 or +1 415 555 2671",
        "the meeting is on 2024-01-15 at 10:30",
        "ISBN 978-3-16-148410-0",
        "version 1.24.3-rc.1 shipped",
        "server 192.168.10.254:8080 is up",
        "the test card is 4111 1111 1111 1112 (it fails Luhn)",
        "order 1795723950230 shipped",  # an epoch-millisecond timestamp
        "employee id 123456789",
        "the ticket is 000-12-3456",  # never an SSN (area 000)
        "the SSN form has 3 pages and 123456789 boxes",  # named, but not next to it
        "ssn 000123456 is a test value",  # area 000: never an SSN
        "social security office hours 9-17, room 123456789",
        "https://example.com/docs/passwords#reset",
        "postgres://db.internal:5432/prod",
        "TOKEN_URL = https://auth.example.com/token",
    ]
    for _ in range(4):
        out.append(f"commit {''.join(rng.choice(hexd) for _ in range(40))} fixed the build")
        out.append(f"request id {uuid_like(rng)} failed")
        out.append(f"sha256:{''.join(rng.choice(hexd) for _ in range(64))}")
        out.append(f"timestamp {rng.randint(1_600_000_000_000, 1_900_000_000_000)}")
        out.append(f"card ending {_card(rng, '4', 16, valid=False)} was declined")
        bad = _iban(rng, rng.choice(sorted(IBAN_LENGTHS)), valid=False)
        out.append(f"reference {bad} (not an IBAN: its checksum fails)")
    png = base64.b64encode(bytes(rng.randrange(256) for _ in range(120))).decode()
    out.append(f'<img src="data:image/png;base64,{png}">')
    out.append(f"![chart](data:image/jpeg;base64,{png[:80]})")
    return out


def uuid_like(rng: random.Random) -> str:
    hexd = "0123456789abcdef"
    parts = ("".join(rng.choice(hexd) for _ in range(n)) for n in (8, 4, 4, 4, 12))
    return "-".join(parts)


def corpus(seed: int = 19) -> list[Case]:
    """Each secret in a sentence, in a JSON document and in a line of code."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for kind, written, needles, single in secrets(rng):
        cases.append(Case(kind, f"Here you go, use {written} for the deploy tonight.", needles,
                          single))  # fmt: skip
        cases.append(Case(kind, json.dumps({"note": "from the vault", "value": written}),
                          needles, single))  # fmt: skip
        cases.append(Case(kind, f"client = connect(config={written!r})  # do not commit",
                          needles, single))  # fmt: skip
    return cases
