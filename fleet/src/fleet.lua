-- holdoff fleet: one atomic exchange of a worker with the shared record of one key.
--
-- A line-by-line transcription of holdoff::fleet::apply (core/src/fleet/record.rs): the same
-- field names, the same order of checks. Keep the two in step; the conformance fleet cases run
-- against both (fleet/tests/conformance_redis.rs).
--
-- KEYS[1]  the record, a hash: episode state next_probe_at window_granted recoveries step
--          leases updated_at hold_until (times in store-clock ms; leases =
--          "<expires_at>:<len>:<worker>"...; an absent hold_until reads as 0)
-- ARGV[1]  the caller's ms ("" = use Redis TIME: the store clock; a number = ?clock=caller)
-- ARGV[2]  ttl ms (PEXPIRE on every write)
-- ARGV[3]  the channel to PUBLISH on every change
-- ARGV[4]  the number of ops; then 7 slots per op:
--          open   seen_episode delay_ms retry_later(0|1) - - -
--          claim  worker episode max_probes interval_ms probe_timeout_ms max_wait_ms
--          admit  worker episode probe_timeout_ms - - -
--          answer worker episode ok(0|1) recoveries_needed reopen_ms -
--          reset  seen_episode - - - - -
--          read   - - - - - -
-- Reply: { store_now, episode, state, next_probe_at, window_granted, recoveries, step, leases,
--          updated_at, hold_until, reply... } every number a decimal string; a reply is "applied",
--          "ignored", "refused" or "granted:<expires_at>".
-- A record that is not a valid fleet record (a key of another type included) is refused with
-- the error "CORRUPT <field>: ..." and never used nor changed, except by an exchange carrying
-- an open: that replaces it as a flushed record would. Sizes are checked before any value is
-- read, so a hostile value costs a few O(1) commands, never a load of it.

-- Lua numbers are doubles: every time and count is kept below 2^53 (exact integers).
local LIMIT = 9007199254740991
local MAX_LEASES = 1000
local MAX_WORKER_LEN = 128
local U32 = 4294967295
-- The stored fields, in HMGET order, and the longest value each may hold (a lease is at most
-- 16 digits, ':', 3 digits, ':' and a 128-byte worker).
local FIELDS = { 'episode', 'state', 'next_probe_at', 'window_granted', 'recoveries', 'step',
                 'leases', 'updated_at', 'hold_until' }
local FIELD_LEN = { episode = 16, state = 6, next_probe_at = 16, window_granted = 16,
                    recoveries = 16, step = 16, updated_at = 16, hold_until = 16,
                    leases = MAX_LEASES * (16 + 1 + 3 + 1 + MAX_WORKER_LEN) }

local function s(n) return string.format('%.0f', n) end
local function sat_add(a, b) return math.min(a + b, LIMIT) end

local function int(field, v, max)
  if type(v) ~= 'string' or #v == 0 or #v > 16 or not string.match(v, '^%d+$') then
    return nil, field .. ': not a decimal integer'
  end
  local n = tonumber(v)
  if n > max then return nil, field .. ': more than ' .. s(max) end
  return n
end

-- Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as Rust's
-- String::from_utf8 checks it.
local function utf8_ok(v)
  local i, n = 1, #v
  while i <= n do
    local c = string.byte(v, i)
    local len
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len = 3
    elseif c >= 0xF0 and c <= 0xF4 then len = 4
    else return false end
    if i + len - 1 > n then return false end
    for k = i + 1, i + len - 1 do
      local b = string.byte(v, k)
      if b < 0x80 or b > 0xBF then return false end
    end
    local b = string.byte(v, i + 1)
    if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F) or (c == 0xF0 and b < 0x90)
        or (c == 0xF4 and b > 0x8F) then
      return false
    end
    i = i + len
  end
  return true
end

local function valid_worker(w)
  return #w > 0 and #w <= MAX_WORKER_LEN and utf8_ok(w)
end

local function decode_leases(v)
  local leases, pos = {}, 1
  while pos <= #v do
    local e_end = string.find(v, ':', pos, true)
    if not e_end then return nil, 'leases: malformed' end
    local expires_at, err = int('leases', string.sub(v, pos, e_end - 1), LIMIT)
    if not expires_at then return nil, err end
    local l_end = string.find(v, ':', e_end + 1, true)
    if not l_end then return nil, 'leases: malformed' end
    local len
    len, err = int('leases', string.sub(v, e_end + 1, l_end - 1), MAX_WORKER_LEN)
    if not len then return nil, err end
    if len == 0 or l_end + len > #v then return nil, 'leases: a worker id is empty or cut' end
    if #leases >= MAX_LEASES then return nil, 'leases: more than 1000' end
    local worker = string.sub(v, l_end + 1, l_end + len)
    if not utf8_ok(worker) then return nil, 'leases: worker not UTF-8' end
    leases[#leases + 1] = { worker = worker, expires_at = expires_at }
    pos = l_end + len + 1
  end
  return leases
end

local function encode_leases(leases)
  local parts = {}
  for i, l in ipairs(leases) do parts[i] = s(l.expires_at) .. ':' .. #l.worker .. ':' .. l.worker end
  return table.concat(parts)
end

local function default_record()
  return { episode = 0, state = 'closed', next_probe_at = 0, hold_until = 0, window_granted = 0,
           recoveries = 0, step = 0, leases = {}, updated_at = 0 }
end

-- FleetRecord read and checked as FleetRecord::validate does, field by field.
local function load(key)
  local kind = redis.call('TYPE', key).ok
  if kind == 'none' then return default_record() end
  if kind ~= 'hash' then return nil, 'key: a ' .. kind .. ', not a hash' end
  if redis.call('HLEN', key) > #FIELDS then return nil, 'record: more than ' .. #FIELDS .. ' fields' end
  for _, f in ipairs(FIELDS) do
    if redis.call('HSTRLEN', key, f) > FIELD_LEN[f] then
      return nil, f .. ': longer than ' .. FIELD_LEN[f] .. ' bytes'
    end
  end
  local vals = redis.call('HMGET', key, unpack(FIELDS))
  local h = {}
  for i, f in ipairs(FIELDS) do h[f] = vals[i] end
  local r, err = {}
  r.episode, err = int('episode', h.episode, LIMIT); if err then return nil, err end
  if h.state ~= 'closed' and h.state ~= 'open' then return nil, 'state: not closed or open' end
  r.state = h.state
  r.next_probe_at, err = int('next_probe_at', h.next_probe_at, LIMIT); if err then return nil, err end
  -- Absent in records written without it: no Retry-After known.
  if not h.hold_until then h.hold_until = '0' end
  r.hold_until, err = int('hold_until', h.hold_until, LIMIT); if err then return nil, err end
  r.window_granted, err = int('window_granted', h.window_granted, MAX_LEASES); if err then return nil, err end
  r.recoveries, err = int('recoveries', h.recoveries, MAX_LEASES); if err then return nil, err end
  r.step, err = int('step', h.step, U32); if err then return nil, err end
  if type(h.leases) ~= 'string' then return nil, 'leases: missing' end
  r.leases, err = decode_leases(h.leases); if err then return nil, err end
  r.updated_at, err = int('updated_at', h.updated_at, LIMIT); if err then return nil, err end
  if r.episode == 0 and r.state == 'open' then return nil, 'episode: 0 while open' end
  return r
end

local function open(r, seen_episode, delay_ms, retry_later, now)
  local until_ = sat_add(now, delay_ms)
  if r.state == 'closed' then
    -- A record that lost an episode a worker is in (flushed, expired) takes that episode back.
    r.episode = math.max(sat_add(r.episode, 1), seen_episode)
    r.state = 'open'
    r.next_probe_at = until_
    if retry_later then r.hold_until = until_ else r.hold_until = 0 end
    r.window_granted = 0
    r.recoveries = 0
    r.step = 0
    r.leases = {}
    return 'applied'
  end
  -- Already open: another worker's trip changes nothing; a retry-later restarts recovery and
  -- is never shortened.
  if not retry_later then return 'ignored' end
  r.recoveries = 0
  if until_ > r.next_probe_at then
    r.next_probe_at = until_
    r.window_granted = 0
  end
  r.hold_until = math.max(r.hold_until, until_)
  return 'applied'
end

-- Closes an open record, as its last recovery does.
local function close(r)
  r.state = 'closed'
  r.hold_until = 0
  r.recoveries = 0
  r.step = 0
  r.window_granted = 0
  r.leases = {}
end

local function reset(r, seen_episode)
  if r.state ~= 'open' or r.episode > seen_episode then return 'ignored' end
  close(r)
  return 'applied'
end

local function drop_expired(r, now)
  local kept = {}
  for _, l in ipairs(r.leases) do
    if l.expires_at > now then kept[#kept + 1] = l end
  end
  r.leases = kept
end

local function claim(r, worker, episode, max_probes, interval_ms, probe_timeout_ms, max_wait_ms, now)
  if not valid_worker(worker) or r.state ~= 'open' or episode ~= r.episode then return 'refused' end
  -- A deadline is believed up to the claiming worker's own longest wait.
  if r.next_probe_at > sat_add(now, max_wait_ms) then r.next_probe_at = now end
  if now < r.next_probe_at then return 'refused' end
  local horizon = sat_add(now, math.max(probe_timeout_ms, max_wait_ms))
  local kept = {}
  for _, l in ipairs(r.leases) do
    if l.expires_at > now and l.expires_at <= horizon then kept[#kept + 1] = l end
  end
  r.leases = kept
  local max = math.min(math.max(max_probes, 1), MAX_LEASES)
  if #r.leases >= max then return 'refused' end
  local expires_at = sat_add(now, math.max(probe_timeout_ms, 1))
  r.leases[#r.leases + 1] = { worker = worker, expires_at = expires_at }
  -- The grant that fills the window re-arms it and restarts the count.
  r.window_granted = r.window_granted + 1
  if r.window_granted >= max then
    r.next_probe_at = sat_add(now, interval_ms)
    r.window_granted = 0
  end
  return 'granted:' .. s(expires_at)
end

local function admit(r, worker, episode, probe_timeout_ms, now)
  if r.state ~= 'open' or episode ~= r.episode then return 'ignored' end
  for _, l in ipairs(r.leases) do
    if l.worker == worker and l.expires_at > now then
      l.expires_at = sat_add(now, math.max(probe_timeout_ms, 1))
      return 'applied'
    end
  end
  return 'ignored'
end

local function answer(r, worker, episode, ok, recoveries_needed, reopen_ms, now)
  if r.state ~= 'open' then return 'ignored' end
  drop_expired(r, now)
  local lease = nil
  for i, l in ipairs(r.leases) do
    if l.worker == worker then lease = i; break end
  end
  local current = episode == r.episode and lease ~= nil
  if not current then
    -- Stale: a failure is still evidence, a success proves nothing now.
    if ok or r.recoveries == 0 then return 'ignored' end
    r.recoveries = 0
    return 'applied'
  end
  table.remove(r.leases, lease)
  if ok then
    r.recoveries = r.recoveries + 1
    if r.recoveries >= math.min(math.max(recoveries_needed, 1), MAX_LEASES) then
      close(r)
    end
  else
    -- The next backoff step, not the window's re-arm, and never before a known Retry-After.
    r.recoveries = 0
    r.step = math.min(r.step + 1, U32)
    r.next_probe_at = math.max(sat_add(now, reopen_ms), r.hold_until)
    r.window_granted = 0
    r.leases = {}
  end
  return 'applied'
end

-- The ops, checked before anything is read: a malformed op is the caller's bug.
local function arg_int(name, v, max)
  local n, err = int(name, v, max)
  if not n then error({ err = 'BADOP ' .. err }) end
  return n
end

-- A worker id that could not hold a lease is refused by claim, never by the exchange.
local function worker_arg(v)
  if type(v) ~= 'string' then error({ err = 'BADOP worker: missing' }) end
  return v
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = arg_int('caller_now_ms', ARGV[1], LIMIT)
end
local ttl = arg_int('ttl_ms', ARGV[2], LIMIT)
local channel = ARGV[3]
local count = arg_int('ops', ARGV[4], 100000)

local ops, has_open = {}, false
for i = 1, count do
  local b = 4 + (i - 1) * 7
  local kind = ARGV[b + 1]
  local op = { kind = kind }
  if kind == 'open' then
    op.seen_episode = arg_int('seen_episode', ARGV[b + 2], LIMIT)
    op.delay_ms = arg_int('delay_ms', ARGV[b + 3], LIMIT)
    op.retry_later = ARGV[b + 4] == '1'
    has_open = true
  elseif kind == 'claim' then
    op.worker = worker_arg(ARGV[b + 2])
    op.episode = arg_int('episode', ARGV[b + 3], LIMIT)
    op.max_probes = arg_int('max_probes', ARGV[b + 4], U32)
    op.interval_ms = arg_int('interval_ms', ARGV[b + 5], LIMIT)
    op.probe_timeout_ms = arg_int('probe_timeout_ms', ARGV[b + 6], LIMIT)
    op.max_wait_ms = arg_int('max_wait_ms', ARGV[b + 7], LIMIT)
  elseif kind == 'admit' then
    op.worker = worker_arg(ARGV[b + 2])
    op.episode = arg_int('episode', ARGV[b + 3], LIMIT)
    op.probe_timeout_ms = arg_int('probe_timeout_ms', ARGV[b + 4], LIMIT)
  elseif kind == 'answer' then
    op.worker = worker_arg(ARGV[b + 2])
    op.episode = arg_int('episode', ARGV[b + 3], LIMIT)
    op.ok = ARGV[b + 4] == '1'
    op.recoveries_needed = arg_int('recoveries_needed', ARGV[b + 5], U32)
    op.reopen_ms = arg_int('reopen_ms', ARGV[b + 6], LIMIT)
  elseif kind == 'reset' then
    op.seen_episode = arg_int('seen_episode', ARGV[b + 2], LIMIT)
  elseif kind ~= 'read' then
    error({ err = 'BADOP kind: ' .. tostring(kind) })
  end
  ops[i] = op
end

local r, corrupt = load(KEYS[1])
if not r then
  if not has_open then return redis.error_reply('CORRUPT ' .. corrupt) end
  r = default_record()
end

local replies, changed = {}, corrupt ~= nil
for i, op in ipairs(ops) do
  local reply
  if op.kind == 'open' then
    reply = open(r, op.seen_episode, op.delay_ms, op.retry_later, now)
  elseif op.kind == 'claim' then
    reply = claim(r, op.worker, op.episode, op.max_probes, op.interval_ms, op.probe_timeout_ms,
      op.max_wait_ms, now)
  elseif op.kind == 'admit' then
    reply = admit(r, op.worker, op.episode, op.probe_timeout_ms, now)
  elseif op.kind == 'answer' then
    reply = answer(r, op.worker, op.episode, op.ok, op.recoveries_needed, op.reopen_ms, now)
  elseif op.kind == 'reset' then
    reply = reset(r, op.seen_episode)
  else
    reply = 'ignored'
  end
  if reply ~= 'ignored' and reply ~= 'refused' then
    r.updated_at = now
    changed = true
  end
  replies[i] = reply
end

local leases = encode_leases(r.leases)
if changed then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'episode', s(r.episode), 'state', r.state,
    'next_probe_at', s(r.next_probe_at), 'window_granted', s(r.window_granted),
    'recoveries', s(r.recoveries), 'step', s(r.step), 'leases', leases,
    'updated_at', s(r.updated_at), 'hold_until', s(r.hold_until))
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PUBLISH', channel, s(r.episode) .. ' ' .. r.state)
end

local out = { s(now), s(r.episode), r.state, s(r.next_probe_at), s(r.window_granted),
              s(r.recoveries), s(r.step), leases, s(r.updated_at), s(r.hold_until) }
for _, reply in ipairs(replies) do out[#out + 1] = reply end
return out
