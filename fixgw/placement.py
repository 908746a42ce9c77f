"""Where each matching partition's commands go: its configured datastore (``[[matching.partition]]``,
or the session store's), unless the partition map says it has moved.

The map is one hash beside the gateway's sessions (``sessionstore.keys.partition_map``), written
by ``fixgw-cell relocate`` when it switches a partition (``matching/relocation.py``). The gateway
reads it at start and every half second after; a partition that moved gets a client for its new
datastore (same credentials and TLS settings as its configured one), and commands held while it
was being moved are republished there (``HeldCommands``). Until the switch, the datastore the
partition is leaving refuses every append (its relocation marker), so nothing is lost between.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from datastore.connection import RedisClient, check_credentials, connect, is_cluster, text
from datastore.settings import RedisEndpoint
from sessionstore.keys import partition_map

if TYPE_CHECKING:
    from .config import MatchingLink
    from .context import GatewayContext

log = logging.getLogger("fixgw.placement")

MAP_POLL_S = 0.5


def read_partition_map(client: RedisClient, namespace: str) -> dict[int, str]:
    """partition → address of the datastore that holds it now (only partitions that moved): a
    URL, a Sentinel group or Cluster seeds (``datastore.settings.parse_address``)."""
    raw: dict[Any, Any] = client.hgetall(partition_map(namespace))
    return {int(text(p)): text(url) for p, url in raw.items()}


class PartitionClients:
    """One client per partition, following the partition map. ``clients`` and ``colocated``
    are replaced whole, so a reader on another thread sees one map or the other."""

    def __init__(self, context: GatewayContext, link: MatchingLink) -> None:
        self.context = context
        self.link = link
        self.addresses: dict[int, str] = {}
        self.clients: dict[int, RedisClient] = {}
        self.colocated: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        moved = read_partition_map(context.client, context.namespace)
        for p in range(link.partition_count):
            self._route(p, moved.get(p))
        self._publish()

    def _route(self, partition: int, moved_to: str | None) -> None:
        store: RedisEndpoint = self.context.store_settings
        endpoint: RedisEndpoint = self.link.endpoint(partition, store)
        if moved_to is not None:
            endpoint = endpoint.at(moved_to)
        if endpoint is store or (moved_to is not None and endpoint.address == store.address):
            client = self.context.client
        else:
            client = connect(endpoint)
            where = "the partition map" if moved_to is not None else f"[[matching.partition]] index = {partition}"
            check_credentials(client, endpoint, where)
        self.clients[partition] = client
        self.addresses[partition] = endpoint.address

    def _publish(self) -> None:
        self.clients = dict(self.clients)
        self.colocated = frozenset(p for p, c in self.clients.items()
                                   if c is self.context.client and not is_cluster(c))

    def refresh(self) -> list[int]:
        """Read the map once; route every partition that moved since. Returns those partitions."""
        moved = read_partition_map(self.context.client, self.context.namespace)
        changed = [p for p, address in moved.items() if p in self.addresses and self.addresses[p] != address]
        for p in changed:
            self._route(p, moved[p])
            log.warning("partition %d: routed to %s (partition map)", p, moved[p])
        if changed:
            self._publish()
        return changed

    def watch(self, on_change: Any) -> None:
        def run() -> None:
            failing = False
            while not self._stop.wait(MAP_POLL_S):
                try:
                    if self.refresh():
                        on_change()
                    failing = False
                except (RedisError, OSError) as exc:
                    if not failing:
                        log.error("partition map not readable: %s (routes unchanged)", exc)
                    failing = True
                except Exception:  # noqa: BLE001 (the watcher outlives one bad read)
                    log.exception("partition map: refresh failed")
        self._thread = threading.Thread(target=run, name="partition-map", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
