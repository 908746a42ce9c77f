"""The ground every process stands on: Redis/Valkey endpoints from settings, clients and packed
round trips, the lease behind every single-writer role, how work waits through a failover, and
embedded Valkey processes. Knows nothing of FIX sessions or matching."""
