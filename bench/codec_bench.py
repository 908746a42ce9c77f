"""Encodings for the cell's contracts, measured on the real types: a PlaceOrder command and a
deal event (the largest), encoded and decoded with validation, per message.

Candidates: the JSON of before (``json`` + hand validation, as ``parse_command`` did), pydantic
(already a dependency, for settings), msgspec's JSON, msgspec's MessagePack (chosen), pickle
(no validation, unsafe on input: a reference point only).

    .venv/bin/python bench/codec_bench.py [--n 50000]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec  # noqa: E402
import pydantic  # noqa: E402

from matching.contracts import (  # noqa: E402
    Command,
    DealExecuted,
    Event,
    OrderPayload,
    OrderState,
    OrderType,
    PlaceOrder,
    Side,
    TimeInForce,
    encode_command,
    parse_command,
    parse_event,
)

PLACE = PlaceOrder("fix-3f2a9c0d1e7b4a5c6d8e", 7, 1, OrderPayload("o-fix-3f2a9c0d1e7b", Side.BUY, OrderType.LIMIT, 10,
                                                                   20000, TimeInForce.GTC, False, "ACC1",
                                                                   "fix/fsg/CLIENT1", "ORDER-000123"))
STATE = OrderState("o-fix-3f2a9c0d1e7b", 10, 4, 6, 80000, "fix/fsg/CLIENT1", "ORDER-000123", Side.BUY, "ACC1", 20000,
                   OrderType.LIMIT, TimeInForce.GTC)
DEAL = Event("fix-3f2a9c0d1e7b4a5c6d8e:1", 1, 7, "fix-3f2a9c0d1e7b4a5c6d8e",
             DealExecuted(20000, 4, msgspec.structs.replace(STATE, order_id="o-2", owner="fix/fsg/CLIENT2"), STATE,
                          Side.BUY))


class PydanticOrder(pydantic.BaseModel):
    order_id: str
    side: Side
    order_type: OrderType
    quantity: pydantic.StrictInt
    price: pydantic.StrictInt | None = None
    time_in_force: TimeInForce = TimeInForce.GTC
    post_only: bool = False
    account: str = ""
    owner: str = ""
    client_order_id: str = ""


class PydanticPlace(pydantic.BaseModel):
    kind: str
    command_id: str
    pair_id: pydantic.StrictInt
    partition: pydantic.StrictInt
    order: PydanticOrder


def as_dict(value: object) -> object:
    return msgspec.to_builtins(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50000)
    n = ap.parse_args().n
    place_dict, deal_dict = as_dict(PLACE), as_dict(DEAL)
    place_json, deal_json = json.dumps(place_dict), json.dumps(deal_dict)
    place_mp, deal_mp = encode_command(PLACE), DEAL.encode()
    mj_place, mj_deal = msgspec.json.Decoder(Command), msgspec.json.Decoder(Event)
    pyd = PydanticPlace.model_validate(place_dict)
    rows = [
        ("json (dicts; hand validation before)", lambda: json.dumps(place_dict), lambda: json.loads(place_json),
         lambda: json.dumps(deal_dict), lambda: json.loads(deal_json), len(place_json), len(deal_json)),
        ("pydantic v2 (JSON, validated)", lambda: pyd.model_dump_json(),
         lambda: PydanticPlace.model_validate_json(place_json), None, None, len(place_json), None),
        ("msgspec JSON (typed, validated)", lambda: msgspec.json.encode(PLACE), lambda: mj_place.decode(place_json),
         lambda: msgspec.json.encode(DEAL), lambda: mj_deal.decode(deal_json), len(place_json), len(deal_json)),
        ("msgspec MessagePack (chosen)", lambda: encode_command(PLACE), lambda: parse_command(place_mp, 2),
         lambda: DEAL.encode(), lambda: parse_event(deal_mp), len(place_mp), len(deal_mp)),
        ("pickle (no validation; reference)", lambda: pickle.dumps(PLACE), lambda: pickle.loads(pickle.dumps(PLACE)),
         lambda: pickle.dumps(DEAL), None, len(pickle.dumps(PLACE)), len(pickle.dumps(DEAL))),
    ]

    def us(fn: object) -> str:
        return "-" if fn is None else f"{timeit.timeit(fn, number=n) / n * 1e6:.2f}"  # type: ignore[arg-type]

    print(f"\nµs per message ({n} each); sizes in bytes\n")
    print(f"{'':38} {'place enc':>9} {'place dec':>9} {'deal enc':>9} {'deal dec':>9} {'place B':>8} {'deal B':>7}")
    for name, pe, pd, de, dd, pb, db in rows:
        print(f"{name:38} {us(pe):>9} {us(pd):>9} {us(de):>9} {us(dd):>9} {pb:>8} {db or '-':>7}")


if __name__ == "__main__":
    main()
