"""The instrument table: symbol ↔ pairId, tick and lot sizes, quantity limits, price band.

Owns the exact conversion between wire decimals and the integer ticks and lots used inside
the cell. A price that is not a whole number of ticks, or a quantity that is not a whole
number of lots, is refused with the reason — never rounded. Pure: no I/O beyond reading
the table file once.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from decimal import Context, Decimal, InvalidOperation
from pathlib import Path

DEFAULT_TABLE = Path(__file__).resolve().parent.parent / "config" / "instruments.toml"


class InstrumentError(ValueError):
    """A price or quantity this instrument cannot take; ``reason`` is a stable code."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


# Wire decimals as FIX writes them (optional sign, digits, optional fraction: no exponent, no
# spaces), at most MAX_DIGITS digits, checked *before* any arithmetic: a 29-digit quantity
# made divmod raise DivisionImpossible in the default 28-digit context.
PLAIN_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\Z")
MAX_DIGITS = 24
# Every conversion below runs in this context: wide enough that a bounded input divided by
# the smallest sensible tick is still exact, so nothing is ever rounded.
EXACT = Context(prec=80, traps=[InvalidOperation])


def to_decimal(text: str | Decimal) -> Decimal:
    """Exact decimal from wire text; refuses anything that is not a plain, bounded number."""
    if isinstance(text, Decimal):
        value = text
    else:
        if not isinstance(text, str) or not PLAIN_DECIMAL.match(text):
            raise InstrumentError("invalid-number", f"{str(text)[:40]!r} is not a plain decimal number")
        # PLAIN_DECIMAL matched: every character but a sign and a point is a digit
        if len(text) - (text[0] in "+-") - ("." in text) > MAX_DIGITS:
            raise InstrumentError("invalid-number", f"{text[:40]!r}... has more than {MAX_DIGITS} digits")
        value = Decimal(text)
    if not value.is_finite():
        raise InstrumentError("invalid-number", f"{text!r} is not a finite number")
    return value


@dataclass(frozen=True, slots=True)
class Instrument:
    symbol: str
    pair_id: int
    tick_size: Decimal
    lot_size: Decimal
    min_quantity: Decimal
    max_quantity: Decimal
    min_price: Decimal
    max_price: Decimal
    # The bands in lots and ticks, worked out once: the cell checks every order against them,
    # and four Decimal divisions an order showed in the conductor's profile (~3%).
    min_lots: int = field(init=False, repr=False, compare=False)
    max_lots: int = field(init=False, repr=False, compare=False)
    min_ticks: int = field(init=False, repr=False, compare=False)
    max_ticks: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("tick_size", "lot_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"instrument {self.symbol}: {name} must be positive")
        for name in ("min_quantity", "max_quantity"):
            if getattr(self, name) % self.lot_size:
                raise ValueError(f"instrument {self.symbol}: {name} is not a whole number of lots")
        for name in ("min_price", "max_price"):
            if getattr(self, name) % self.tick_size:
                raise ValueError(f"instrument {self.symbol}: {name} is not a whole number of ticks")
        object.__setattr__(self, "min_lots", int(self.min_quantity / self.lot_size))  # (frozen: set once, here)
        object.__setattr__(self, "max_lots", int(self.max_quantity / self.lot_size))
        object.__setattr__(self, "min_ticks", int(self.min_price / self.tick_size))
        object.__setattr__(self, "max_ticks", int(self.max_price / self.tick_size))

    def price_to_ticks(self, price: str | Decimal) -> int:
        value = to_decimal(price)
        if value <= 0:
            raise InstrumentError("invalid-price", f"price {value} must be positive")
        ticks, rest = EXACT.divmod(value, self.tick_size)
        if rest:
            raise InstrumentError("off-tick", f"price {value} is not a multiple of the tick size {self.tick_size}")
        if not self.min_price <= value <= self.max_price:
            raise InstrumentError("price-out-of-band",
                                  f"price {value} is outside the band {self.min_price}..{self.max_price}")
        return int(ticks)

    def quantity_to_lots(self, quantity: str | Decimal) -> int:
        value = to_decimal(quantity)
        if value <= 0:
            raise InstrumentError("invalid-quantity", f"quantity {value} must be positive")
        lots, rest = EXACT.divmod(value, self.lot_size)
        if rest:
            raise InstrumentError("off-lot", f"quantity {value} is not a multiple of the lot size {self.lot_size}")
        if not self.min_quantity <= value <= self.max_quantity:
            raise InstrumentError("quantity-out-of-range",
                                  f"quantity {value} is outside {self.min_quantity}..{self.max_quantity}")
        return int(lots)

    def ticks_to_price(self, ticks: int) -> Decimal:
        return (self.tick_size * ticks).normalize() if ticks else Decimal(0)

    def lots_to_quantity(self, lots: int) -> Decimal:
        return (self.lot_size * lots).normalize() if lots else Decimal(0)



@dataclass(frozen=True, slots=True)
class InstrumentTable:
    by_symbol: dict[str, Instrument]
    by_pair: dict[int, Instrument]

    @classmethod
    def load(cls, path: str | Path = DEFAULT_TABLE) -> InstrumentTable:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        items = []
        for i, raw in enumerate(data.get("instrument", [])):
            try:
                items.append(Instrument(
                    symbol=str(raw["symbol"]), pair_id=int(raw["pair_id"]),
                    **{k: to_decimal(str(raw[k])) for k in ("tick_size", "lot_size", "min_quantity", "max_quantity",
                                                           "min_price", "max_price")}))
            except KeyError as exc:
                raise ValueError(f"{path}: instrument #{i + 1} lacks {exc.args[0]}") from None
        return cls.of(items)

    @classmethod
    def of(cls, items: list[Instrument]) -> InstrumentTable:
        by_symbol = {i.symbol: i for i in items}
        by_pair = {i.pair_id: i for i in items}
        if len(by_symbol) != len(items) or len(by_pair) != len(items):
            raise ValueError("instrument table repeats a symbol or a pair_id")
        return cls(by_symbol, by_pair)

    def symbol(self, symbol: str) -> Instrument:
        try:
            return self.by_symbol[symbol]
        except KeyError:
            raise InstrumentError("unknown-symbol", f"unknown symbol {symbol!r}") from None

    def pair(self, pair_id: int) -> Instrument | None:
        return self.by_pair.get(pair_id)
