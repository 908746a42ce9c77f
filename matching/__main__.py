"""``python -m matching conductor|outbox`` (console script ``fixgw-cell``): one cell process.

Configuration comes from the environment (seed 000's names, see matching/config.py and
docs/configuration.md). Bad configuration stops the process before it touches a key or a stream.
SIGTERM/SIGINT release the lease so a standby takes over at once.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Callable

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from datastore.availability import Availability
from datastore.connection import RedisClient, check_credentials, connect
from datastore.settings import ConfigError, RedisEndpoint
from sessionstore.keys import GatewayKey

from .amqp import AmqpCommandSource, AmqpEventPublisher, AmqpLink, AmqpUnavailable
from .conductor import BootRefused, Conductor
from .config import CellSettings, freeze_startup_objects, load_cell_settings, stop_on_signals, tune_gc
from .http import CellHttp
from .instruments import InstrumentTable
from .keys import PartitionKeys
from .metrics import ConductorMetrics, CounterFrom, OutboxMetrics
from .outbox import OutboxWorker, Publisher, RedisStreamsPublisher, owner_routes
from .relocation import cell_location, cell_must_stand_down
from .storage import Inboxes, reconcile

log = logging.getLogger("matching")

BOOT_WAIT_S = 60.0  # how long a starting cell waits for its datastore to take writes
RELOCATION_POLL_S = 0.1  # one HGET of the marker: a relocation's freeze waits this long for the cells


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    stop_on_signals(stop)
    return stop


def _serve(http: CellHttp, what: str, run: Callable[[threading.Event], None], client: RedisClient,
           partition: int, commands_from_broker: bool = False) -> int:
    """Say what runs and where its endpoints are, then run until SIGTERM/SIGINT, or until a
    relocation of the partition asks the cell to stand down (``relocation.py``)."""
    # Collected and frozen before it says it runs: the start-up collection (tens of ms, ~100 on
    # a busy machine) is over before anyone is told to send it work or to read its pauses.
    freeze_startup_objects()
    print(f"matching: {what}, http://127.0.0.1:{http.port}/metrics", flush=True)
    stop = _stop_on_signals()
    keys = PartitionKeys(partition)

    def watch_relocation() -> None:
        while not stop.wait(RELOCATION_POLL_S):
            try:
                reason = cell_must_stand_down(client, keys, commands_from_broker)
            except RedisError:
                continue  # the loop itself reports an unreachable datastore
            if reason is not None:
                log.warning("%s: standing down; started again, this process follows the partition", reason)
                stop.set()

    threading.Thread(target=watch_relocation, name="relocation-watch", daemon=True).start()
    try:
        run(stop)
    finally:
        http.stop()
    return 0


def follow_relocation(settings: CellSettings, role: str) -> CellSettings:
    """The settings of the datastore that holds the partition now: a relocated partition's old
    datastore says where it went (``moved``); while it is being moved the cell does not start."""
    partition = _partition(settings)
    for _ in range(8):  # a partition moved several times: each old datastore points on
        client = connect(settings.endpoint(), client_name=f"{role}-p{partition}-boot")
        try:
            where, detail = cell_location(client, PartitionKeys(partition),
                                          commands_from_broker=role == "conductor" and settings.transport == "rabbitmq")
        except RedisError:
            return settings  # unreachable, or refused: the boot that follows says so, as it always did
        finally:
            client.close()
        if where == "here":
            return settings
        if where == "wait":
            raise RelocationUnderWay(f"partition {partition} is being relocated (state {detail}): start the {role} "
                                     "again once `fixgw-cell relocate` has switched it")
        log.warning("partition %d was relocated to %s: following it", partition, detail)
        assert detail is not None
        settings = settings.at(detail)
    raise ConfigError(f"partition {partition}: too many relocation markers to follow")


class RelocationUnderWay(Exception):
    pass


def _partition(settings: CellSettings) -> int:
    if settings.partition is None:
        raise ConfigError("MATCHING_PARTITION is not set: which partition does this process own?")
    return settings.partition


def at_boot(partition: int) -> Availability:
    """A cell started while its datastore fails over (no primary yet, a demoted one, a reset
    connection) waits for it, as a running cell does, instead of exiting: nothing is written
    before the datastore takes writes again."""
    return Availability(f"partition {partition}'s datastore", BOOT_WAIT_S,
                        (RedisConnectionError, RedisTimeoutError, ReadOnlyError))


def broker_link(settings: CellSettings, role: str) -> AmqpLink | None:
    """The broker connection of a ``rabbitmq`` cell, connected now: unreachable stops the process."""
    if settings.transport != "rabbitmq":
        return None
    link = AmqpLink(settings.broker_url(), f"{role}-p{_partition(settings)}")
    try:
        link.connect()
    except AmqpUnavailable as exc:
        raise ConfigError(f"{exc} (MATCHING_AMQP_URL)") from None
    return link


def inbox_of(owner: str) -> str:
    """The inbox stream of the gateway an order owner (``namespace/gateway/session``) belongs to."""
    namespace, gateway, *_ = owner.split("/")
    return GatewayKey(namespace, gateway).inbox_stream


def inbox_endpoint(settings: CellSettings, target: str | None, configured: CellSettings | None = None
                   ) -> RedisEndpoint:
    """Where the gateway's inboxes are: ``--target`` (a URL, a Sentinel group or Cluster seeds,
    with the cell's credentials), else the datastore the cell was configured with (before any
    relocation was followed: the inboxes stay with the gateway)."""
    configured_endpoint = (configured or settings).endpoint()
    return configured_endpoint.at(target) if target else configured_endpoint


def direct_inboxes(settings: CellSettings, target: str | None, also: list[str],
                   configured: CellSettings | None = None) -> Inboxes | None:
    """The conductor's inbox routes for direct delivery, or None (outbox delivery). Asked for
    but not possible here — the inboxes on another datastore (``--target``, or a partition
    relocated away from them) — it falls back to the outbox, saying so."""
    if settings.inbox_delivery != "direct":
        return None
    here = settings.endpoint()
    inboxes = inbox_endpoint(settings, target, configured)
    if inboxes.address != here.address:
        log.warning("partition %s: MATCHING_INBOX_DELIVERY=direct but the gateway inboxes are on another datastore "
                    "(%s): the outbox relays the events", settings.partition, inboxes.address)
        return None
    return owner_routes(inbox_of, also)


def build_conductor(settings: CellSettings, inboxes: Inboxes | None = None) -> Conductor:
    partition = _partition(settings)
    endpoint = settings.endpoint()
    # The loop's commits and their WAITAOF go over a connection of its own (Conductor.run: WAITAOF
    # covers only the writes of the connection that sends it); this one serves the boot and the lease.
    client = connect(endpoint.model_copy(update={"pool": endpoint.pool.model_copy(update={"maxTotal": 1,
                                                                                          "maxIdle": 1})}),
                     client_name=f"conductor-p{partition}")
    table = InstrumentTable.load(settings.instruments)
    link = broker_link(settings, "conductor")
    source = AmqpCommandSource(link, partition, prefetch=settings.batch_size) if link is not None else None
    return Conductor(client, partition=partition, partition_count=settings.partition_count,
                     instruments=table.by_pair, durability=settings.durability_policy, stp_mode=settings.stp_mode,
                     batch_size=settings.batch_size, metrics=ConductorMetrics(partition),
                     lease_ttl_ms=settings.lease_ttl_ms, lease_renew_s=settings.lease_ttl_ms / 3000,
                     command_retention_ms=settings.command_retention_ms, source=source,
                     linger_s=settings.batch_linger_ms / 1000, inboxes=inboxes)


def run_conductor(settings: CellSettings, target: str | None = None, also: list[str] | None = None,
                  configured: CellSettings | None = None) -> int:
    conductor = build_conductor(settings, direct_inboxes(settings, target, also or [], configured))
    booting = at_boot(conductor.partition)
    booting.call(lambda: check_credentials(conductor.client, settings.endpoint(),
                                           "matching (REDIS_USERNAME, REDIS_PASSWORD_ENV)"))
    booting.call(conductor.boot)
    # A broker source is consumed only while the lease is held (``Conductor._step_from_source``):
    # subscribed at start, a standby's consumer could be the one the broker makes active, and
    # the lease holder's would wait behind it for good.
    control = connect(settings.endpoint(), client_name=f"conductor-p{conductor.partition}-http")
    conductor.metrics.registry.register(CounterFrom("matching_lease_renewals", "Confirmed renewals of the "
                                                    "conductor lease", lambda: conductor.lease.renewals))
    http = CellHttp(settings.http_port, conductor.metrics.registry, conductor.ready,
                    lambda pair: reconcile(control, conductor.keys, pair)).start()
    return _serve(http, f"conductor p{conductor.partition} of {settings.partition_count} ({settings.durability}, "
                  f"linger {settings.batch_linger_ms:g}ms)",
                  conductor.run, control, conductor.partition, commands_from_broker=conductor.source is not None)


def run_outbox(settings: CellSettings, target: str | None, also: list[str],
               configured: CellSettings | None = None) -> int:
    """``configured``: the settings before a relocation was followed; without ``target``
    the inboxes stay on that datastore (the gateway's), not on the one the partition moved to."""
    partition = _partition(settings)
    endpoint = settings.endpoint()
    data = connect(endpoint, client_name=f"outbox-p{partition}-data")
    at_boot(partition).call(lambda: check_credentials(data, endpoint, "matching (REDIS_USERNAME, REDIS_PASSWORD_ENV)"))
    control = connect(endpoint, client_name=f"outbox-p{partition}-control")
    inboxes = connect(inbox_endpoint(settings, target, configured), client_name=f"outbox-p{partition}-target")
    link = broker_link(settings, "outbox")
    publisher: Publisher = (AmqpEventPublisher(link, settings.amqp_exchange) if link is not None
                            else RedisStreamsPublisher(inboxes, owner_routes(inbox_of, also),
                                                       replica_acks=settings.target_replica_acks,
                                                       replica_timeout_ms=settings.target_replica_ack_timeout_ms))
    worker = OutboxWorker(data, control, partition, publisher,
                          metrics=OutboxMetrics(partition), lease_ttl_ms=settings.lease_ttl_ms,
                          lease_renew_s=settings.lease_ttl_ms / 3000, durability=settings.durability_policy,
                          linger_s=settings.batch_linger_ms / 1000)
    at_boot(partition).call(worker.ensure_group)  # (the loop ensures it again: a successor may find it gone)
    worker.metrics.registry.register(CounterFrom("matching_lease_renewals", "Confirmed renewals of the outbox "
                                                 "lease", lambda: worker.lease.renewals))
    http = CellHttp(settings.http_port, worker.metrics.registry,
                    lambda: worker.has_lease and (link is None or link.healthy)).start()
    return _serve(http, f"outbox p{partition} draining {PartitionKeys(partition).events} "
                  f"(linger {settings.batch_linger_ms:g}ms)", worker.run, control,
                  partition)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="fixgw-cell", description="One matching-cell process: the conductor "
                                     "or the outbox worker of MATCHING_PARTITION; `fixgw-cell relocate --help`: "
                                     "move a partition to another datastore.")
    parser.add_argument("role", choices=["conductor", "outbox"])
    parser.add_argument("--target", "--target-url", dest="target", metavar="ADDRESS",
                        help="datastore of the gateway inboxes (default: the cell's own): redis://host:port/db, "
                        "sentinel://host:port,host:port/group or cluster://host:port,host:port, with the cell's "
                        "credentials; a conductor with MATCHING_INBOX_DELIVERY=direct delivers only to inboxes on "
                        "its own")
    parser.add_argument("--also", action="append", default=[], help="a stream every event also goes to "
                        "(e.g. the drop-copy gateway inbox); repeatable; give the outbox and a direct conductor "
                        "the same")
    args = parser.parse_args(args_list)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tune_gc()
    try:
        configured = load_cell_settings()
        settings = follow_relocation(configured, args.role)
        if args.role == "conductor":
            return run_conductor(settings, args.target, args.also, configured)
        return run_outbox(settings, args.target, args.also, configured)
    except (ConfigError, BootRefused) as exc:
        print(f"matching: {exc}", file=sys.stderr)
        return 2
    except RelocationUnderWay as exc:
        print(f"matching: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
