// The Lua scripts of the entity extension. Conventions (beyond scripts.cpp's):
//  - an entity record is a hash {r = revision, v = version, s = state}; revisions and
//    versions are decimal text that Lua compares and stores but never does arithmetic
//    on (a Lua number is a double; 64-bit values would lose precision): the client
//    passes the new revision (expect + 1);
//  - a buffer entry is a member ver8 ‖ [id, message, at_ms] (MessagePack) of the
//    key's lex-ordered zset :b, plus ver8 with score at_ms in the zset :t; an entry of
//    one version is selected with the ZRANGEBYLEX bounds lo..hi the client computes;
//  - totals and the index of keys (entity_layout.hpp) are updated in the same script
//    when their keys are passed (standalone: KEYS[ig], KEYS[ig + 1]); on a cluster
//    they live in another slot, so the script returns what changed and the client
//    sends buffer_account afterwards;
//  - answer codes (script_codes.hpp): CommitCode for commit_entity and write_entity
//    (4 kRevisionMismatch: nothing written), ClaimCode for claim_entity, BufferCode
//    for the buffer (5 kVersionTaken: (key, version) holds another id, 6 kLimit with
//    the limit's name, 7 kAbsent: no entry); every number is commented with its name.
#include "scripts.hpp"

namespace idem::redis::detail {
namespace {

const char* const kEntityPrelude = R"lua(
local function rev_is(rk, expect)
  return (redis.call('HGET', rk, 'r') or '0') == expect
end

local function ent_set(rk, rev, v, s)
  if v ~= '' and s ~= '' then redis.call('HSET', rk, 'r', rev, 'v', v, 's', s)
  elseif v ~= '' then redis.call('HSET', rk, 'r', rev, 'v', v)
  elseif s ~= '' then redis.call('HSET', rk, 'r', rev, 's', s)
  else redis.call('HSET', rk, 'r', rev) end
end

-- Removes the entry lo..hi from b and t. Returns its bytes (keylen + id + message),
-- or 0 if there was none.
local function unbuf(b, t, lo, hi, keylen)
  local m = redis.call('ZRANGEBYLEX', b, lo, hi, 'LIMIT', 0, 1)[1]
  if not m then return 0 end
  redis.call('ZREM', b, m)
  redis.call('ZREM', t, string.sub(m, 1, 8))
  local ok, e = pcall(unpack_mp, string.sub(m, 9))
  if not ok or type(e) ~= 'table' or type(e[1]) ~= 'string' or type(e[2]) ~= 'string' then return keylen end
  return keylen + #e[1] + #e[2]
end

-- The oldest buffered_at (ms) of the key whose times zset is t, or false.
local function oldest(t)
  local o = redis.call('ZRANGE', t, 0, 0, 'WITHSCORES')
  if not o[1] then return false end
  return tonumber(o[2])
end

local function account(tot, idx, member, dc, db, t)
  redis.call('HINCRBY', tot, 'count', dc)
  redis.call('HINCRBY', tot, 'bytes', db)
  local o = oldest(t)
  if o then redis.call('ZADD', idx, o, member) else redis.call('ZREM', idx, member) end
end

-- {0, 0} nothing left to account | {0, 1, bytes, has_oldest, oldest}: the client
-- accounts the removal of an entry of `bytes` (cluster). The code 0 is kCommitted for
-- the entity scripts, kOk for buffer_remove.
local function after_remove(bytes, t, ig, member)
  if bytes == 0 then return {0, 0} end  -- kCommitted / kOk
  if KEYS[ig] then
    account(KEYS[ig], KEYS[ig + 1], member, -1, -bytes, t)
    return {0, 0}  -- kCommitted / kOk
  end
  local o = oldest(t)
  return {0, 1, bytes, o and 1 or 0, o or 0}  -- kCommitted / kOk
end
)lua";

std::string entity_script(const char* body) { return with_prelude((std::string(kEntityPrelude) + body).c_str()); }

}  // namespace

// KEYS D (the id's record), R (entity). ARGV now, owner, lease_ms, fingerprint, slack.
// Returns claim()'s answer; when granted {0, retries, revision, version, state} with
// '' for absent fields.
Script claim_entity_script() {
  return {"claim_entity", entity_script(R"lua(
local c = claim(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]))
if c[1] ~= 0 then return c end  -- not kGranted
local e = redis.call('HMGET', KEYS[2], 'r', 'v', 's')
return {0, c[2], e[1] or '', e[2] or '', e[3] or ''}  -- kGranted
)lua"), {}};
}

// KEYS D, R [, B, T [, totals, index]]. ARGV 1 now, 2 owner, 3 value, 4 prefix,
// 5 px_ms, 6 slack_ms, 7 expect revision, 8 new revision, 9 version ('' keep),
// 10 state ('' keep), 11 lo ('' no unbuffer), 12 hi, 13 entity key, 14 its length.
// The revision is checked first: a mismatch ({4}) writes nothing.
Script commit_entity_script() {
  return {"commit_entity", entity_script(R"lua(
if not rev_is(KEYS[2], ARGV[7]) then return {4} end  -- kRevisionMismatch
local c = commit(KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]))
if c[1] ~= 0 then return c end  -- not kCommitted
ent_set(KEYS[2], ARGV[8], ARGV[9], ARGV[10])
if ARGV[11] == '' then return {0} end  -- kCommitted
return after_remove(unbuf(KEYS[3], KEYS[4], ARGV[11], ARGV[12], tonumber(ARGV[14])), KEYS[4], 5, ARGV[13])
)lua"), {}};
}

// KEYS R [, B, T [, totals, index]]. ARGV 1 expect, 2 new revision, 3 version,
// 4 state, 5 lo ('' none), 6 hi, 7 entity key, 8 its length.
Script write_entity_script() {
  return {"write_entity", entity_script(R"lua(
if not rev_is(KEYS[1], ARGV[1]) then return {4} end  -- kRevisionMismatch
ent_set(KEYS[1], ARGV[2], ARGV[3], ARGV[4])
if ARGV[5] == '' then return {0} end  -- kCommitted
return after_remove(unbuf(KEYS[2], KEYS[3], ARGV[5], ARGV[6], tonumber(ARGV[8])), KEYS[3], 4, ARGV[7])
)lua"), {}};
}

// KEYS B, T [, totals, index]. ARGV 1 lo, 2 hi, 3 member (ver8 ‖ entry), 4 id,
// 5 at_ms, 6 per_key, 7 total, 8 total_bytes, 9 bytes, 10 entity key, 11 mode:
// 'put' stores (limits checked first; total limits only when the totals key is
// given), 'check' only answers whether the entry is there.
// Returns BufferCode: {0, 1} kOk, stored | {0, 0} kOk, the same entry is there |
// {5} kVersionTaken | {6, limit} kLimit | {7} kAbsent.
Script buffer_put_script() {
  return {"buffer_put", entity_script(R"lua(
local b, t = KEYS[1], KEYS[2]
local m = redis.call('ZRANGEBYLEX', b, ARGV[1], ARGV[2], 'LIMIT', 0, 1)[1]
if m then
  local ok, e = pcall(unpack_mp, string.sub(m, 9))
  if ok and type(e) == 'table' and e[1] == ARGV[4] then return {0, 0} end  -- kOk
  return {5}  -- kVersionTaken
end
if ARGV[11] == 'check' then return {7} end  -- kAbsent
if redis.call('ZCARD', b) >= tonumber(ARGV[6]) then return {6, 'per_key'} end  -- kLimit
local bytes = tonumber(ARGV[9])
if KEYS[3] then
  local tt = redis.call('HMGET', KEYS[3], 'count', 'bytes')
  if tonumber(tt[1] or '0') + 1 > tonumber(ARGV[7]) then return {6, 'total'} end  -- kLimit
  if tonumber(tt[2] or '0') + bytes > tonumber(ARGV[8]) then return {6, 'total_bytes'} end  -- kLimit
end
redis.call('ZADD', b, 0, ARGV[3])
redis.call('ZADD', t, ARGV[5], string.sub(ARGV[3], 1, 8))
if KEYS[3] then account(KEYS[3], KEYS[4], ARGV[10], 1, bytes, t) end
return {0, 1}  -- kOk
)lua"), {}};
}

// KEYS B. ARGV stop (max - 1). Returns {0, ver8, id, message, at_ms, …} by version.
Script buffer_read_script() {
  return {"buffer_read", entity_script(R"lua(
local out = {0}  -- kOk
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, ARGV[1])) do
  local ok, e = pcall(unpack_mp, string.sub(m, 9))
  if not ok or type(e) ~= 'table' or type(e[1]) ~= 'string' or type(e[2]) ~= 'string' then
    return {-1, 'IDEMCORRUPT a member of this buffer is not an idem buffer entry'}  -- kScriptError
  end
  out[#out + 1] = string.sub(m, 1, 8)
  out[#out + 1] = e[1]
  out[#out + 1] = e[2]
  out[#out + 1] = e[3]
end
return out
)lua"), {}};
}

// KEYS B, T [, totals, index]. ARGV lo, hi, entity key, its length. As after_remove.
Script buffer_remove_script() {
  return {"buffer_remove", entity_script(R"lua(
return after_remove(unbuf(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[4])), KEYS[2], 3, ARGV[3])
)lua"), {}};
}

// KEYS B, T. Read-only. Returns {0, 0} no entries | {0, count, lowest ver8, oldest_ms}.
Script buffer_key_info_script() {
  return {"buffer_key_info", entity_script(R"lua(
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then return {0, 0} end  -- kOk
local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
return {0, n, string.sub(first, 1, 8), oldest(KEYS[2]) or 0}  -- kOk
)lua"), {}};
}

// Cluster only. KEYS totals, index. ARGV 1 count delta, 2 bytes delta, 3 total limit
// ('' no check), 4 total_bytes limit, 5 entity key, 6 index update ('lt': add or
// lower the score; 'xx': set the score of a present member; '' none), 7 score.
// Returns BufferCode: {0} kOk | {6, limit} kLimit (nothing changed).
Script buffer_account_script() {
  return {"buffer_account", entity_script(R"lua(
local dc, db = tonumber(ARGV[1]), tonumber(ARGV[2])
if ARGV[3] ~= '' then
  local tt = redis.call('HMGET', KEYS[1], 'count', 'bytes')
  if tonumber(tt[1] or '0') + dc > tonumber(ARGV[3]) then return {6, 'total'} end  -- kLimit
  if tonumber(tt[2] or '0') + db > tonumber(ARGV[4]) then return {6, 'total_bytes'} end  -- kLimit
end
if dc ~= 0 then redis.call('HINCRBY', KEYS[1], 'count', dc) end
if db ~= 0 then redis.call('HINCRBY', KEYS[1], 'bytes', db) end
if ARGV[6] == 'lt' then redis.call('ZADD', KEYS[2], 'LT', ARGV[7], ARGV[5])
elseif ARGV[6] == 'xx' then redis.call('ZADD', KEYS[2], 'XX', ARGV[7], ARGV[5]) end
return {0}  -- kOk
)lua"), {}};
}

}  // namespace idem::redis::detail
