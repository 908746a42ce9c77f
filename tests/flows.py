"""Random order flows for comparing the real cell with the reference matcher."""

from __future__ import annotations

import random
from decimal import Decimal

from matching.contracts import (
    CancelOrder,
    Command,
    OrderPayload,
    OrderType,
    PlaceOrder,
    ReplaceOrder,
    Side,
    TimeInForce,
    partition_of,
)
from matching.instruments import Instrument

TEST_INSTRUMENTS = {
    pair: Instrument(f"P{pair}", pair, Decimal("0.5"), Decimal("1"), Decimal("1"), Decimal("50"),
                     Decimal("90"), Decimal("110"))
    for pair in (0, 2)
}  # both pairs land in partition 0 of 2


def random_flow(seed: int, n: int, partition_count: int = 2, accounts: int = 4) -> list[Command]:
    rng = random.Random(seed)
    live: list[tuple[int, str]] = []
    cmds: list[Command] = []
    for i in range(n):
        pair = rng.choice(list(TEST_INSTRUMENTS))
        part = partition_of(pair, partition_count)
        roll = rng.random()
        owner = f"acct{rng.randrange(accounts)}"
        if roll < 0.12 and live:
            p, oid = rng.choice(live)
            cmds.append(CancelOrder(f"c{seed}-{i}", p, partition_of(p, partition_count), oid,
                                    owner if rng.random() < 0.1 else ""))
        elif roll < 0.22 and live:
            p, oid = rng.choice(live)
            cmds.append(ReplaceOrder(f"c{seed}-{i}", p, partition_of(p, partition_count), oid,
                                     rng.randint(1, 12), rng.randint(194, 206)))
        else:
            oid = f"o{seed}-{i}"
            market = rng.random() < 0.08
            tif = rng.choices([TimeInForce.GTC, TimeInForce.IOC, TimeInForce.FOK], [0.75, 0.15, 0.1])[0]
            price = None if market else rng.randint(192, 208)
            if rng.random() < 0.02:
                price = 999  # out of band
            qty = rng.randint(1, 10) if rng.random() > 0.02 else 0
            order = OrderPayload(oid, rng.choice([Side.BUY, Side.SELL]),
                                 OrderType.MARKET if market else OrderType.LIMIT, qty, price, tif,
                                 post_only=(not market and tif is TimeInForce.GTC and rng.random() < 0.1),
                                 account=owner, owner=owner, client_order_id=f"cl-{oid}")
            cmds.append(PlaceOrder(f"c{seed}-{i}", pair, part, order))
            live.append((pair, oid))
    return cmds
