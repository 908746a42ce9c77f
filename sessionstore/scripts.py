"""The Lua scripts that commit session changes atomically, each named for what it commits.

Every write script checks the session's owner epoch first (fencing, DESIGN §5.5): a
writer whose epoch is not the one stamped in ``{…}/owner`` is refused with ``FENCED``.
All keys of one script share one hash tag, so they are valid in Redis Cluster.
"""

from __future__ import annotations

from .keys import CHUNK_SIZE

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

# What a committed message does to its order's records (``OrderIndex``): an open order's
# ClOrdID record (its idempotency entry, which OrigClOrdID lookups read) loses its expiry, so
# a GTC order older than the window can still be canceled; once the order is closed (or a
# replace moved it to a new ClOrdID) the old record gets the window again, counted from now,
# and the closed order is noted for retention (``TRIM_SESSION``). ``now`` is the server's ms.
_TRACK_ORDER = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function track(closed_key, order_id, state, clordid, replaced, clordid_key, replaced_key, window, now)
  if state == '' then return end
  if replaced ~= '' then redis.call('PEXPIRE', replaced_key, window) end
  if state == 'open' then
    if clordid ~= '' then redis.call('PERSIST', clordid_key) end
    redis.call('ZREM', closed_key, order_id)
  else
    if clordid ~= '' then redis.call('PEXPIRE', clordid_key, window) end
    redis.call('ZADD', closed_key, now, order_id)
  end
end
"""

# Many arguments to one command, in slices that keep pairs whole and stay far below what Lua's
# ``unpack`` can pass (LUAI_MAXCSTACK, 8000).
_SLICES = """
local SLICE = 512
local function append(t, a, b)
  t[#t + 1] = a
  t[#t + 1] = b
end
local function in_slices(command, key, args)
  for i = 1, #args, SLICE do redis.call(command, key, unpack(args, i, math.min(i + SLICE - 1, #args))) end
end
"""

# Group commit (DESIGN §7): a batch of event deliveries for one session, committed under the
# numbers QuickFIX will give them, before any is sent. KEYS: owner, state, inbox, orders,
# unsent, closed, then per record its chunk key, ClOrdID key and replaced ClOrdID key. ARGV:
# epoch, n, ClOrdID window ms, the next targetSeqNum (4 bytes; '' = unchanged), then per
# record: field, record, seqNum, inbox id, order id, order view ('' = none), order state
# ('' | open | closed), ClOrdID, replaced ClOrdID; then numbers sent since the last batch
# (their unsent marks go). The numbers must continue lastSentSeqNum exactly. The target
# number is that of the inbound messages the batch answers (the AT echo): stored with the
# answers, a crash cannot leave one without the other (intake.py). Returns {} when
# committed; the inbox ids already delivered (nothing written) so the caller drops them; an
# identical replay (redis-py retries after a lost reply) is {} too. The inbox is a sorted set
# scored by commit time (retention trims it).
COMMIT_BATCH = _FENCE + _TRACK_ORDER + _SLICES + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local n = tonumber(ARGV[2])
local window = ARGV[3]
if tonumber(ARGV[7]) <= last and redis.call('HGET', KEYS[7], ARGV[5]) == ARGV[6] then return {} end
local ids = {}
for i = 1, n do
  local b = 4 + (i - 1) * 9
  if tonumber(ARGV[b + 3]) ~= last + i then
    return redis.error_reply('SEQREUSE batch number ' .. ARGV[b + 3] .. ' does not follow lastSentSeqNum ' .. last)
  end
  if ARGV[b + 4] ~= '' then ids[#ids + 1] = ARGV[b + 4] end
end
local seen = {}
for i = 1, #ids, SLICE do
  local scores = redis.call('ZMSCORE', KEYS[3], unpack(ids, i, math.min(i + SLICE - 1, #ids)))
  for j = 1, #scores do if scores[j] then seen[#seen + 1] = ids[i + j - 1] end end
end
if #seen > 0 then return seen end
-- Each kind of write gathered over the batch and made in one command (a command from Lua
-- costs ~1.5 µs of the server's time whatever its size); only an order's tracking, whose
-- steps may concern one order twice, stays per message, in order.
local now = now_ms()
local chunks, chunk_keys, inbox, views, unsent = {}, {}, {}, {}, {}
for i = 1, n do
  local b = 4 + (i - 1) * 9
  local key = KEYS[6 + (i - 1) * 3 + 1]
  if not chunks[key] then chunks[key] = {}; chunk_keys[#chunk_keys + 1] = key end
  append(chunks[key], ARGV[b + 1], ARGV[b + 2])
  if ARGV[b + 4] ~= '' then append(inbox, now, ARGV[b + 4]) end
  if ARGV[b + 6] ~= '' then append(views, ARGV[b + 5], ARGV[b + 6]) end
  append(unsent, ARGV[b + 3], ARGV[b + 4])
end
for _, key in ipairs(chunk_keys) do in_slices('HSET', key, chunks[key]) end
in_slices('ZADD', KEYS[3], inbox)
in_slices('HSET', KEYS[4], views)
for i = 1, n do
  local b, k = 4 + (i - 1) * 9, 6 + (i - 1) * 3
  track(KEYS[6], ARGV[b + 5], ARGV[b + 7], ARGV[b + 8], ARGV[b + 9], KEYS[k + 2], KEYS[k + 3], window, now)
end
in_slices('HSET', KEYS[5], unsent)
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', last + n + 1), 'lastSentSeqNum',
           struct.pack('<I4', last + n))
if ARGV[4] ~= '' then redis.call('HSET', KEYS[2], 'targetSeqNum', ARGV[4]) end
local sent = {}
for i = 5 + n * 9, #ARGV do sent[#sent + 1] = ARGV[i] end
in_slices('HDEL', KEYS[5], sent)
return {}
"""

# One message under a number the batch committed but nobody sent (QuickFIX gave it to a
# message of its own, or the batch's messages shifted): the owner proves the number is unsent
# (above ``sentUpTo``, and marked unsent), the displaced message's inbox entry goes so that its
# event is delivered again if we stop before it is stored anew. Above lastSentSeqNum it is a
# plain commit. KEYS: owner, state, chunk, inbox, orders, unsent, closed, ClOrdID key, replaced
# ClOrdID key. ARGV: epoch, field, record, seqNum, sentUpTo, inbox id ('' = none), order id,
# order view ('' = none), order state, ClOrdID, replaced ClOrdID, ClOrdID window ms.
COMMIT_DISPLACING = _FENCE + _TRACK_ORDER + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local seq = tonumber(ARGV[4])
local now = now_ms()
local function order_records()
  if ARGV[6] ~= '' then redis.call('ZADD', KEYS[4], now, ARGV[6]) end
  if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], ARGV[7], ARGV[8]) end
  track(KEYS[7], ARGV[7], ARGV[9], ARGV[10], ARGV[11], KEYS[8], KEYS[9], ARGV[12], now)
end
if seq <= last and redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[3] then
  order_records()  -- an identical replay (redis-py retried after a lost reply): the rest is there too
  return 0
end
if seq <= last then
  local displaced = redis.call('HGET', KEYS[6], ARGV[4])
  if seq <= tonumber(ARGV[5]) or not displaced then
    return redis.error_reply('SEQREUSE seqNum ' .. seq .. ' already sent (lastSentSeqNum ' .. last .. ')')
  end
  if displaced ~= ARGV[6] then redis.call('ZREM', KEYS[4], displaced) end
  redis.call('HDEL', KEYS[6], ARGV[4])
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
order_records()
if seq > last then
  redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', seq + 1), 'lastSentSeqNum', struct.pack('<I4', seq))
end
return 1
"""

# Retention of a session's delivery records. KEYS: owner, inbox, orders, closed. ARGV: epoch,
# cutoff ms, most to remove per kind. Inbox entries committed before the cutoff go, and so do
# the views of orders closed before it. Returns {views removed, inbox entries removed}.
TRIM_SESSION = _FENCE + """
local closed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
if #closed > 0 then
  redis.call('HDEL', KEYS[3], unpack(closed))
  redis.call('ZREM', KEYS[4], unpack(closed))
end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
if #old > 0 then redis.call('ZREM', KEYS[2], unpack(old)) end
return {#closed, #old}
"""

# The ClOrdID idempotency window (seed 002): SET NX PX, fenced like every session write.
# KEYS: owner, clordid key. ARGV: epoch, value, window ms. Returns 1 new, 0 seen before.
CLAIM_CLORDID = _FENCE + """
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 1 end
return 0
"""

# The ClOrdID claim and the request it admits, as one step, for a stream on the same datastore
# (standalone or Sentinel: the keys carry different hash tags, so never on a Cluster).
# KEYS: owner, clordid key, stream, guard (a key whose existence refuses the step: the
# partition's relocation marker). ARGV: epoch, value, window ms, then the entry's field/value
# pairs. Returns the entry id, 0 when the ClOrdID was seen (nothing appended), or a RELOCATING
# error (nothing claimed, nothing appended).
CLAIM_AND_APPEND = _FENCE + """
if redis.call('EXISTS', KEYS[4]) == 1 then
  return redis.error_reply('RELOCATING the partition is being moved to another datastore')
end
if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return 0 end
local entry = {}
for i = 4, #ARGV do entry[#entry + 1] = ARGV[i] end
return redis.call('XADD', KEYS[3], '*', unpack(entry))
"""

# A ClOrdID's record and the current view of the order it names, in one round trip (a cancel,
# a replace and a status request need both; two reads would be two round trips, the second
# waiting for the first's order id). The record is JSON whose first key is orderId
# (``fixgw.orders.ClOrdIDRecord``): an order id is letters, digits and dashes, never a quote.
# KEYS: ClOrdID key, orders. Returns {record, view}, each nil when absent. ``no-writes``: it
# runs when the datastore refuses writes (full memory), so a cancel is still understood.
ORDER_OF_CLORDID = """#!lua flags=no-writes
local record = redis.call('GET', KEYS[1])
if not record then return {false, false} end
local order_id = string.match(record, '^{"orderId":"([^"]*)"')
if not order_id then return {record, false} end
return {record, redis.call('HGET', KEYS[2], order_id)}
"""

# The next expected inbound number, written only if each ClOrdID claim named holds the value of
# the request that claimed it in the same round trip: a request found a duplicate, or refused,
# is answered in a later round trip, and the number must not cover it before that answer is
# stored (a crash in between would leave the request unanswered, and never asked for again).
# KEYS: owner, state, the claim keys. ARGV: epoch, targetSeqNum (4 bytes), each claim's value.
# Returns 1 written, 0 not (some claim is not its request's).
TARGET_IF_CLAIMED = _FENCE + """
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[i] then return 0 end
end
redis.call('HSET', KEYS[2], 'targetSeqNum', ARGV[2])
return 1
"""

# KEYS: owner, state. ARGV: epoch, then field/value pairs of the state hash.
UPDATE_STATE = _FENCE + """
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i+1])
end
return 1
"""

# An operator's next sender number (``fixgw-admin``). KEYS: owner, state. ARGV: epoch, the number
# (4 bytes). Refused at or below lastSentSeqNum: a number is never sent twice.
SET_NEXT_SENDER = _FENCE + """
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local next = struct.unpack('<I4', ARGV[2])
if next <= last then
  return redis.error_reply('SEQREUSE next sender number ' .. next .. ' is not above the last one sent, ' .. last)
end
redis.call('HSET', KEYS[2], 'senderSeqNum', ARGV[2])
return last
"""

# A session's own password hash (Logon NewPassword). KEYS: owner, password key. ARGV: epoch, hash.
SET_PASSWORD = _FENCE + """
redis.call('SET', KEYS[2], ARGV[2])
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
if math.floor(last / """ + str(CHUNK_SIZE) + """) > tonumber(ARGV[3]) then
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

# A new period of a scheduled session (``fixgw/schedule.py``), once however often it is asked:
# the period is known by its start, stored as sessionStartTime. KEYS: owner, state, unsent marks,
# then per chunk 0..N its key and its archive key. ARGV: epoch, the period's start (8 bytes), the
# sessionStartTime the caller read ('' = none), the highest chunk index covered, keep ms (0: the
# chunks are dropped; else renamed to their archive keys, which expire then). Returns 0 when the
# session is this period's already (a second try, a takeover's), else the chunks dropped or kept.
RESET_PERIOD = _FENCE + """
local stored = redis.call('HGET', KEYS[2], 'sessionStartTime') or ''
if stored == ARGV[2] then return 0 end
if stored ~= ARGV[3] then return redis.error_reply('RETRY the session changed during the reset') end
local last = 0
local raw = redis.call('HGET', KEYS[2], 'lastSentSeqNum')
if raw then last = struct.unpack('<I4', raw) end
local sender = redis.call('HGET', KEYS[2], 'senderSeqNum')
if sender then last = math.max(last, struct.unpack('<I4', sender) - 1) end
if math.floor(last / """ + str(CHUNK_SIZE) + """) > tonumber(ARGV[4]) then
  return redis.error_reply('RETRY chunks changed during reset')
end
local keep = tonumber(ARGV[5])
local moved = 0
for i = 4, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if keep > 0 then
      redis.call('RENAME', KEYS[i], KEYS[i + 1])
      redis.call('PEXPIRE', KEYS[i + 1], keep)
    else
      redis.call('DEL', KEYS[i])
    end
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[3])
local conn = redis.call('HGET', KEYS[2], 'connectionStartTime')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'senderSeqNum', struct.pack('<I4', 1), 'targetSeqNum', struct.pack('<I4', 1),
           'lastSentSeqNum', struct.pack('<I4', 0), 'sessionStartTime', ARGV[2])
if conn then redis.call('HSET', KEYS[2], 'connectionStartTime', conn) end
return moved + 1
"""

# KEYS: owner, unsent. ARGV: epoch. A holder stamps the sessions it will write; an older
# epoch can never overwrite a newer one. A new holder treats every stored number as sent, so
# the unsent marks of its predecessor go.
STAMP_OWNER = """
local raw = redis.call('GET', KEYS[1])
if raw and not tonumber(raw) then  -- 'moved to <group>': the session lives in another group now
  return redis.error_reply('FENCED session ' .. raw)
end
local cur = tonumber(raw or '0')
if tonumber(ARGV[1]) < cur then
  return redis.error_reply('FENCED session already stamped by newer epoch ' .. cur)
end
redis.call('SET', KEYS[1], ARGV[1])
if KEYS[2] then redis.call('DEL', KEYS[2]) end
return 1
"""

# A local copy's check (``sessionstore/reader.py``): what each chunk holds, computed where it is
# stored, so a standby verifies its copy without reading it all back. KEYS: chunk keys of one
# session. Returns per chunk the SHA-1 (hex) of its record values concatenated in seqNum order.
# Declared no-writes: the server refuses any write from it, and runs it on a replica too.
CHUNK_DIGESTS = """#!lua flags=no-writes
local out = {}
for i, key in ipairs(KEYS) do
  local flat = redis.call('HGETALL', key)
  local records = {}
  for j = 1, #flat, 2 do records[#records + 1] = {struct.unpack('<I4', flat[j]), flat[j + 1]} end
  table.sort(records, function(a, b) return a[1] < b[1] end)
  local values = {}
  for j = 1, #records do values[j] = records[j][2] end
  out[i] = redis.sha1hex(table.concat(values))
end
return out
"""
