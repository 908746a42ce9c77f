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

# Group commit (DESIGN §7): a batch of event deliveries for one session, committed under the
# numbers QuickFIX will give them, before any is sent. KEYS: owner, state, inbox, orders,
# unsent, then the chunk key of each record. ARGV: epoch, n, then per record: field, record,
# seqNum, inbox id, order id, order view ('' = none); then numbers sent since the last batch
# (their unsent marks go). The numbers must continue lastSentSeqNum exactly. Returns {} when
# committed; the inbox ids already delivered (nothing written) so the caller drops them; an
# identical replay (redis-py retries after a lost reply) is {} too.
COMMIT_BATCH = _FENCE + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local n = tonumber(ARGV[2])
local first = tonumber(ARGV[5])
if first <= last and redis.call('HGET', KEYS[6], ARGV[3]) == ARGV[4] then return {} end
local seen = {}
for i = 1, n do
  local b = 2 + (i - 1) * 6
  if tonumber(ARGV[b + 3]) ~= last + i then
    return redis.error_reply('SEQREUSE batch number ' .. ARGV[b + 3] .. ' does not follow lastSentSeqNum ' .. last)
  end
  if ARGV[b + 4] ~= '' and redis.call('SISMEMBER', KEYS[3], ARGV[b + 4]) == 1 then seen[#seen + 1] = ARGV[b + 4] end
end
if #seen > 0 then return seen end
for i = 1, n do
  local b = 2 + (i - 1) * 6
  redis.call('HSET', KEYS[5 + i], ARGV[b + 1], ARGV[b + 2])
  if ARGV[b + 4] ~= '' then redis.call('SADD', KEYS[3], ARGV[b + 4]) end
  if ARGV[b + 6] ~= '' then redis.call('HSET', KEYS[4], ARGV[b + 5], ARGV[b + 6]) end
  redis.call('HSET', KEYS[5], ARGV[b + 3], ARGV[b + 4])
end
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', last + n + 1), 'lastSentSeqNum',
           struct.pack('<I4', last + n))
for i = 3 + n * 6, #ARGV do redis.call('HDEL', KEYS[5], ARGV[i]) end
return {}
"""

# One message under a number the batch committed but nobody sent (QuickFIX gave it to a
# message of its own, or the batch's messages shifted): the owner proves the number is unsent
# (above ``sentUpTo``, and marked unsent), the displaced message's inbox entry goes so that its
# event is delivered again if we stop before it is stored anew. Above lastSentSeqNum it is a
# plain commit. KEYS: owner, state, chunk, inbox, orders, unsent. ARGV: epoch, field, record,
# seqNum, sentUpTo, inbox id ('' = none), order id, order view ('' = none).
COMMIT_DISPLACING = _FENCE + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local seq = tonumber(ARGV[4])
if seq <= last and redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[3] then
  -- an identical replay (redis-py retried after a lost reply): make sure the rest is there too
  if ARGV[6] ~= '' then redis.call('SADD', KEYS[4], ARGV[6]) end
  if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], ARGV[7], ARGV[8]) end
  return 0
end
if seq <= last then
  local displaced = redis.call('HGET', KEYS[6], ARGV[4])
  if seq <= tonumber(ARGV[5]) or not displaced then
    return redis.error_reply('SEQREUSE seqNum ' .. seq .. ' already sent (lastSentSeqNum ' .. last .. ')')
  end
  if displaced ~= ARGV[6] then redis.call('SREM', KEYS[4], displaced) end
  redis.call('HDEL', KEYS[6], ARGV[4])
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
if ARGV[6] ~= '' then redis.call('SADD', KEYS[4], ARGV[6]) end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], ARGV[7], ARGV[8]) end
if seq > last then
  redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', seq + 1), 'lastSentSeqNum', struct.pack('<I4', seq))
end
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

# KEYS: owner, state, unsent marks, every chunk key 0..N. ARGV: epoch, sessionStartTime (8 bytes),
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
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end  -- the unsent marks, then every chunk
local conn = redis.call('HGET', KEYS[2], 'connectionStartTime')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', 1), 'targetSeqNum', ARGV[4],
           'lastSentSeqNum', struct.pack('<I4', 0), 'sessionStartTime', ARGV[2])
if conn then redis.call('HSET', KEYS[2], 'connectionStartTime', conn) end
return #KEYS - 3
"""

# KEYS: owner, unsent. ARGV: epoch. A holder stamps the sessions it will write; an older
# epoch can never overwrite a newer one. A new holder treats every stored number as sent, so
# the unsent marks of its predecessor go.
STAMP_OWNER = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < cur then
  return redis.error_reply('FENCED session already stamped by newer epoch ' .. cur)
end
redis.call('SET', KEYS[1], ARGV[1])
if KEYS[2] then redis.call('DEL', KEYS[2]) end
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
