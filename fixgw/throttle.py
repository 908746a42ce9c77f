"""Per-session message throttles: a token bucket, pure (the clock is passed in)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenBucket:
    """``rate`` messages per second on average, bursts of up to ``burst`` (default: one second's
    worth, and at least one message: a rate below one a second still lets a message through
    every 1/rate seconds). ``take(now)`` spends a token if one is there; refused messages spend
    nothing."""

    rate: float
    burst: float = 0.0
    tokens: float = field(init=False)
    last: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"a throttle's rate must be positive, got {self.rate}")
        self.burst = self.burst or max(self.rate, 1.0)
        self.tokens = self.burst

    def take(self, now: float) -> bool:
        if self.last is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
