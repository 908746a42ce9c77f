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
import time
from collections.abc import Callable

USERNAME, PASSWORD = 553, 554
LOG2_N, R, P, SALT_BYTES, HASH_BYTES = 14, 8, 1, 16, 32  # interactive-login parameters (scrypt paper)
MAX_SCRYPT_MEMORY = 256 * 2**20  # per Logon check; OWASP's n=2^17, r=8 needs 128 MiB


def scrypt_memory(log2_n: int, r: int, p: int) -> int:
    """What OpenSSL's scrypt needs for these parameters (its own bound, plus a margin)."""
    return 128 * r * (2**log2_n + p + 2) + 2**20


def text_bytes(value: str) -> bytes:
    """A field's value as the bytes that arrived: QuickFIX hands undecodable bytes over as
    surrogates, which a plain ``encode()`` refuses (a Logon must never raise)."""
    return value.encode("utf-8", "surrogateescape")


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
    if scrypt_memory(log2_n, r, p) > MAX_SCRYPT_MEMORY:
        raise ValueError(f"password_hash needs {scrypt_memory(log2_n, r, p) // 2**20} MiB per Logon check, more than "
                         f"{MAX_SCRYPT_MEMORY // 2**20} MiB: choose a smaller n or r")


def verify_password(password: str, encoded: str) -> bool:
    _, log2_n, r, p, salt, expected = encoded.split("$")
    want = base64.b64decode(expected)
    got = hashlib.scrypt(text_bytes(password), salt=base64.b64decode(salt), n=2 ** int(log2_n), r=int(r), p=int(p),
                         dklen=len(want), maxmem=scrypt_memory(int(log2_n), int(r), int(p)))
    return hmac.compare_digest(got, want)


def credentials_problem(fields: dict[int, str], username: str | None, password_hash: str) -> str | None:
    """Why a Logon's credentials are refused, or None. The text goes back in the Logout: it
    never says which of the two was wrong."""
    given_user, given_password = fields.get(USERNAME), fields.get(PASSWORD)
    if given_password is None or (username is not None and given_user is None):
        return "Username (553) and Password (554) are required"
    # Both checks always run, scrypt included: a wrong username takes as long as a wrong password,
    # so the time of the answer does not tell which usernames exist.
    user_ok = username is None or hmac.compare_digest(text_bytes(given_user or ""), text_bytes(username))
    password_ok = verify_password(given_password, password_hash)
    return None if user_ok and password_ok else "bad credentials"


class LogonLockout:
    """Consecutive refused Logons per session: each refusal answers later (0.25 s doubling, at
    most 5 s: the Logout is what a guesser waits for), and ``after`` of them in a row lock the
    session for ``lock_s`` — every Logon refused unchecked, the right password included — so a
    guesser gets a handful of tries per lockout. A correct Logon clears the count. The clock is
    passed in (tests need no sleeps)."""

    def __init__(self, after: int, lock_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.after, self.lock_s, self._clock = after, lock_s, clock
        self._failures: dict[str, int] = {}
        self._locked_until: dict[str, float] = {}

    def locked_for(self, session: str) -> float:
        """Seconds this session stays locked (0: not locked)."""
        until = self._locked_until.get(session)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left > 0:
            return left
        del self._locked_until[session]
        self._failures.pop(session, None)
        return 0.0

    def refused(self, session: str) -> tuple[float, bool]:
        """A refused Logon: how long to wait before answering, and whether it locked the session now."""
        failures = self._failures.get(session, 0) + 1
        self._failures[session] = failures
        locks = self.after > 0 and failures >= self.after and session not in self._locked_until
        if locks:
            self._locked_until[session] = self._clock() + self.lock_s
        return min(0.25 * 2 ** (failures - 1), 5.0), locks

    def accepted(self, session: str) -> None:
        self._failures.pop(session, None)


MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 128


def new_password_problem(new: str, old: str) -> str | None:
    """Why a NewPassword (925) is refused by the policy, or None: 8 to 128 characters, printable,
    not the current one."""
    if not MIN_PASSWORD_LENGTH <= len(new) <= MAX_PASSWORD_LENGTH:
        return f"must be {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters long"
    if not new.isprintable():
        return "must hold printable characters only"
    if hmac.compare_digest(text_bytes(new), text_bytes(old)):
        return "must differ from the current password"
    return None
