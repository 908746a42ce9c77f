"""``fixgw-cell relocate``: move one matching partition to another datastore (``matching/relocation.py``).

Reads the gateway's own TOML file (the session store holds the partition map; ``[matching]``
gives the partition count, the instruments and where each partition is configured), so it is
run with the file the gateways run with:

    fixgw-cell relocate --config config/gateway.toml --partition 1 --to redis://10.0.0.7:6379/0 --dry-run
    fixgw-cell relocate --config config/gateway.toml --partition 1 --to redis://10.0.0.7:6379/0
    fixgw-cell relocate --config config/gateway.toml --partition 1 --to redis://10.0.0.7:6379/0 --rollback
    fixgw-cell relocate --config config/gateway.toml --partition 1 --to sentinel://s1:26379,s2:26379/matching-p1

Exit status: 0 done (or the dry run's plan printed), 1 a step could not finish (the message says
what to do: run again, or roll back), 2 bad arguments or settings.
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from redis.exceptions import RedisError

from datastore.connection import RedisClient, check_credentials, connect
from datastore.settings import ConfigError
from fixgw.config import load_gateway
from fixgw.placement import read_partition_map
from matching.contracts import partition_of
from matching.instruments import InstrumentTable
from matching.relocation import Relocation, RelocationError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fixgw-cell relocate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="the gateway's TOML file")
    ap.add_argument("--partition", type=int, required=True)
    ap.add_argument("--to", required=True, metavar="ADDRESS",
                    help="the datastore to move the partition to: redis://host:port/db, sentinel://host:port,host:port/"
                    "group or cluster://host:port,... (the partition's configured credentials and TLS settings are used "
                    "there too)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the checks; change nothing")
    ap.add_argument("--rollback", action="store_true", help="undo a relocation that has not switched yet")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds each waiting step may take (default 60)")
    ap.add_argument("--wait-cells", type=float, default=0.0,
                    help="after the switch, wait this long for the conductor and outbox to run on the target")
    args = ap.parse_args(argv)
    try:
        if urlsplit(args.to).password:
            # The URL is written into the partition map and the markers: no secret goes there.
            raise ConfigError("--to must not carry a password: the partition's configured password setting "
                              "([[matching.partition]] passwordEnv, or the session store's) is used there too")
        _, store, link = load_gateway(args.config)
        if not 0 <= args.partition < link.partition_count:
            raise ConfigError(f"--partition {args.partition} is outside 0..{link.partition_count - 1}")
        control = connect(store)
        check_credentials(control, store, "[session_store]")
        configured = link.endpoint(args.partition, store)
        moved = read_partition_map(control, store.namespace)
        source_address = moved.get(args.partition, configured.address)
        target_address = configured.at(args.to).address  # (checks the form; written as the map will hold it)

        def at(address: str) -> RedisClient:
            endpoint = configured.at(address)
            client = connect(endpoint)
            check_credentials(client, endpoint, address)
            return client

        source = at(source_address) if args.partition in moved else connect(configured)
        target = at(target_address)
        table = InstrumentTable.load(link.instruments)
        pairs = sorted(p for p in table.by_pair if partition_of(p, link.partition_count) == args.partition)
        relocation = Relocation(args.partition, source, target, control, store.namespace, source_address, target_address,
                                pairs, say=lambda line: print(line, flush=True), timeout_s=args.timeout,
                                commands_in_broker=link.transport == "rabbitmq")
        if args.dry_run:
            print("\n".join(relocation.plan()))
            return 0
        if args.rollback:
            relocation.rollback()
        else:
            relocation.run(wait_cells_s=args.wait_cells)
        return 0
    except ConfigError as exc:
        print(f"fixgw-cell relocate: {exc}", file=sys.stderr)
        return 2
    except (RelocationError, RedisError) as exc:
        print(f"fixgw-cell relocate: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
