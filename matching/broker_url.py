"""The broker's address as the settings give it (no password in it) and as a connection needs
it (the password added from an environment variable or a file), and as a log line shows it."""

from __future__ import annotations

import os
from urllib.parse import quote, urlsplit, urlunsplit


def amqp_url_with_password(url: str, password_env: str | None = None, password_file: str | None = None) -> str:
    """The broker URL with its password added from an environment variable or a file: a
    password written in the URL itself is refused (configuration files are read by many)."""
    parts = urlsplit(url)
    if parts.scheme not in ("amqp", "amqps"):
        raise ValueError(f"amqp_url must start with amqp:// or amqps://, got {url!r}")
    if parts.password:
        raise ValueError("amqp_url must not carry a password: name an environment variable "
                         "(amqp_password_env / MATCHING_AMQP_PASSWORD_ENV) or a file instead")
    secret: str | None = None
    if password_env:
        secret = os.environ.get(password_env)
        if secret is None:
            raise ValueError(f"the AMQP password variable {password_env} is not set")
    elif password_file:
        try:
            with open(password_file, encoding="utf-8") as f:
                secret = f.read().strip()
        except OSError as exc:
            raise ValueError(f"the AMQP password file {password_file} cannot be read: {exc}") from None
    if secret is None:
        # Without one the broker would be asked as its default user (guest), silently.
        raise ValueError("amqp_url has no password source: name an environment variable (amqp_password_env / "
                         "MATCHING_AMQP_PASSWORD_ENV) or a file (amqp_password_file / MATCHING_AMQP_PASSWORD_FILE)")
    if not parts.username:
        raise ValueError(f"amqp_url must name its user: amqp://user@host:5672/vhost, got {url!r}")
    user = parts.username
    host = parts.hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    netloc = f"{quote(user, safe='')}:{quote(secret, safe='')}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
