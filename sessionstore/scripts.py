"""The Lua scripts that commit session changes atomically, each named for what it commits.

Every write script checks the session's owner epoch first (fencing, DESIGN §5.5): a
writer whose epoch is not the one stamped in ``{…}/owner`` is refused with ``FENCED``.
All keys of one script share one hash tag, so they are valid in Redis Cluster.
"""

from __future__ import annotations

# Shared prologue: KEYS[1] = owner key, ARGV[1] = the writer's epoch.
_FENCE = """
local owner = redis.call('GET', KEYS[1])
if owner ~= ARGV[1] then
  return redis.error_reply('FENCED session owned by epoch ' .. (owner or 'none (not claimed)') .. ', writer holds ' .. ARGV[1])
end
"""

# KEYS: owner, state, chunk key of each record. ARGV: epoch, then per record
# (field = u32 LE seqNum, record bytes, seqNum as decimal). Records arrive in seq order.
# All-or-nothing: every record is checked before any is written. A record identical to
# the one already stored is a replay (redis-py retries after a lost reply) and is skipped.
COMMIT_OUTBOUND = _FENCE + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local n = (#ARGV - 1) / 3
local fresh = {}
local top = last
for i = 1, n do
  local field, record, seq = ARGV[3*i-1], ARGV[3*i], tonumber(ARGV[3*i+1])
  if seq <= top then
    if seq <= last and redis.call('HGET', KEYS[i+2], field) == record then
      fresh[i] = false
    else
      return redis.error_reply('SEQREUSE seqNum ' .. seq .. ' already sent (lastSentSeqNum ' .. top .. ')')
    end
  else
    fresh[i] = true
    top = seq
  end
end
local written = 0
for i = 1, n do
  if fresh[i] then
    redis.call('HSET', KEYS[i+2], ARGV[3*i-1], ARGV[3*i])
    written = written + 1
  end
end
if top > last then
  redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', top + 1), 'lastSentSeqNum', struct.pack('<I4', top))
end
return written
"""

# One event turned into one outbound message, exactly once per session.
# KEYS: owner, state, chunk, inbox, orders. ARGV: epoch, field, record, seqNum, inbox id,
# order id, order view ('' = none). Returns 1 stored, -1 already delivered (nothing written).
COMMIT_DELIVERY = _FENCE + """
if redis.call('SISMEMBER', KEYS[4], ARGV[5]) == 1 then return -1 end
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local seq = tonumber(ARGV[4])
if seq <= last then
  return redis.error_reply('SEQREUSE seqNum ' .. seq .. ' already sent (lastSentSeqNum ' .. last .. ')')
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', seq + 1), 'lastSentSeqNum', struct.pack('<I4', seq))
redis.call('SADD', KEYS[4], ARGV[5])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[5], ARGV[6], ARGV[7]) end
return 1
"""

# The ClOrdID idempotency window (seed 002): SET NX PX, fenced like every session write.
# KEYS: owner, clordid key. ARGV: epoch, value, window ms. Returns 1 new, 0 seen before.
CLAIM_CLORDID = _FENCE + """
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 1 end
return 0
"""

# The ClOrdID claim and the request it admits, as one step, for a stream on the same datastore
# (standalone or Sentinel: the keys carry different hash tags, so never on a Cluster).
# KEYS: owner, clordid key, stream. ARGV: epoch, value, window ms, then the entry's
# field/value pairs. Returns the entry id, or 0 when the ClOrdID was seen (nothing appended).
CLAIM_AND_APPEND = _FENCE + """
if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 0 end
local entry = {}
for i = 4, #ARGV do entry[#entry + 1] = ARGV[i] end
return redis.call('XADD', KEYS[3], '*', unpack(entry))
"""

# KEYS: owner, state. ARGV: epoch, then field/value pairs of the state hash.
UPDATE_STATE = _FENCE + """
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i+1])
end
return 1
"""

# KEYS: owner, state, every chunk key 0..N. ARGV: epoch, sessionStartTime (8 bytes),
# highest chunk index the caller covered, next targetSeqNum (4 bytes). Refuses if the state shows more chunks than
# the caller passed (a message was written meanwhile), so no chunk survives a reset.
RESET_SESSION = _FENCE + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local sender = redis.call('HGET', KEYS[2], 'senderSeqNum')
if sender then last = math.max(last, struct.unpack('<I4', sender) - 1) end
if math.floor(last / 1024) > tonumber(ARGV[3]) then
  return redis.error_reply('RETRY chunks changed during reset')
end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
local conn = redis.call('HGET', KEYS[2], 'connectionStartTime')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', 1), 'targetSeqNum', ARGV[4],
           'lastSentSeqNum', struct.pack('<I4', 0), 'sessionStartTime', ARGV[2])
if conn then redis.call('HSET', KEYS[2], 'connectionStartTime', conn) end
return #KEYS - 2
"""

# KEYS: owner. ARGV: epoch. A holder stamps the sessions it will write; an older epoch
# can never overwrite a newer one.
STAMP_OWNER = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < cur then
  return redis.error_reply('FENCED session already stamped by newer epoch ' .. cur)
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""

# Dispatcher lock. KEYS: lock, epoch counter. ARGV: token, ttl ms.
ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""

# KEYS: lock. ARGV: token, ttl ms. Compare-and-expire.
RENEW_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS: lock. ARGV: token. Compare-and-delete.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
