"""A session's keys handed from one group to another (``fixgw-admin move-session``; the steps
around it, the drain and the adoption, are the gateways': ``fixgw/admin.py``).

A session of group ``a`` is ``{ns/a/name}/…`` (seed 004's layout, the group as the gateway);
moved to ``b`` it is ``{ns/b/name}/…``, every key as it was. The order, so that a move cut off
anywhere can be run again and never leaves two writable copies:

1. the directory (``session_groups``) says ``moving``: no gateway accepts the session's Logon;
2. the source is fenced: its owner key says ``moved to b`` (no epoch equals it, and a takeover
   refuses to stamp over it), so a late write of group ``a`` is refused;
3. every other key is copied under ``b``'s tag (DUMP/RESTORE: types, contents and expiries as
   they were; a key already there is replaced: a second run after a cut), then the source keys
   are deleted;
4. the directory says ``b``; group ``b``'s gateway stamps the session with its epoch, rebuilds
   its local copy from the keys, and accepts the Logon.
"""

from __future__ import annotations

from typing import Any

from .keys import SessionKey, session_groups

MOVING = "moving"


def moved_marker(group: str) -> str:
    return f"moved to {group}"


def serving_group(client: Any, namespace: str, name: str) -> str | None:
    """The group the directory says serves session ``name`` (``moving`` during a move), or None:
    the group its configuration names."""
    raw = client.hget(session_groups(namespace), name)
    return raw.decode() if isinstance(raw, bytes) else raw


def set_serving_group(client: Any, namespace: str, name: str, group: str) -> None:
    client.hset(session_groups(namespace), name, group)


def fence_source(client: Any, source: SessionKey, group: str) -> None:
    """Step 2: every fenced write to ``source`` refused from now on."""
    client.set(source.owner, moved_marker(group))


def copy_keys(client: Any, source: SessionKey, group: str) -> int:
    """Step 3: every key of ``source`` but its owner copied under ``group``'s tag, then deleted
    from the source. Returns how many keys were moved."""
    dest = source.moved_to(group)
    marker = client.get(dest.owner)
    if marker is not None and not marker.isdigit():  # moved away from ``group`` before: back now
        client.delete(dest.owner)
    keys = sorted({k.decode() if isinstance(k, bytes) else k for k in client.scan_iter(match=source.every_key,
                                                                                        count=1000)})
    keys = [k for k in keys if k != source.owner]
    prefix = source.tag
    for key in keys:
        dumped, ttl = client.dump(key), client.pttl(key)
        if dumped is None or ttl == -2:
            continue  # expired meanwhile (a ClOrdID window)
        client.restore(dest.tag + key[len(prefix):], max(0, ttl), dumped, replace=True)
    for at in range(0, len(keys), 500):  # (one hash tag: one slot, one DEL a batch)
        client.delete(*keys[at:at + 500])
    return len(keys)
