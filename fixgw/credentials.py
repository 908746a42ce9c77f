"""Logon credentials: scrypt password hashes (pure; the stdlib's OpenSSL-backed scrypt, no
new dependency) and the Logon check against a session's Username(553)/Password(554).

The configuration file holds hashes only: ``scrypt$<log2 n>$<r>$<p>$<salt>$<hash>`` (salt and
hash base64). ``fixgw passwd`` prints one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

USERNAME, PASSWORD = 553, 554
LOG2_N, R, P, SALT_BYTES, HASH_BYTES = 14, 8, 1, 16, 32  # interactive-login parameters (scrypt paper)


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=2**LOG2_N, r=R, p=P, dklen=HASH_BYTES)
    b64 = base64.b64encode
    return f"scrypt${LOG2_N}${R}${P}${b64(salt).decode()}${b64(digest).decode()}"


def check_hash_format(encoded: str) -> None:
    """Raise ValueError naming what is wrong with a configured hash (at startup, not at Logon)."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("password_hash must look like scrypt$14$8$1$<salt>$<hash> (print one with `fixgw passwd`)")
    try:
        log2_n, r, p = (int(x) for x in parts[1:4])
        base64.b64decode(parts[4], validate=True)
        base64.b64decode(parts[5], validate=True)
    except ValueError:
        raise ValueError("password_hash has unreadable parameters, salt or hash") from None
    if not (1 <= log2_n <= 20 and 1 <= r <= 32 and 1 <= p <= 16):
        raise ValueError("password_hash parameters out of range")


def verify_password(password: str, encoded: str) -> bool:
    _, log2_n, r, p, salt, expected = encoded.split("$")
    want = base64.b64decode(expected)
    got = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=2 ** int(log2_n), r=int(r), p=int(p),
                         dklen=len(want), maxmem=2**27)
    return hmac.compare_digest(got, want)


def credentials_problem(fields: dict[int, str], username: str | None, password_hash: str) -> str | None:
    """Why a Logon's credentials are refused, or None. The text goes back in the Logout: it
    never says which of the two was wrong."""
    given_user, given_password = fields.get(USERNAME), fields.get(PASSWORD)
    if given_password is None or (username is not None and given_user is None):
        return "Username (553) and Password (554) are required"
    if (username is not None and not hmac.compare_digest((given_user or "").encode(), username.encode())) \
            or not verify_password(given_password, password_hash):
        return "bad credentials"
    return None
