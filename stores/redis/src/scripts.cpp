// The Lua scripts. Each runs atomically on the server. Conventions:
//  - a record is one string key holding a MessagePack array
//      [state, owner, lease_until, expires, retries, fingerprint|false, result|false]
//    state: 'i' in progress, 'p' pending (retry count only), 'c' completed,
//    'x' dead-lettered; expires is the record's expiry for c/x and the retry count's
//    expiry for i/p; times are unix ms; the fingerprint is a decimal string; the
//    client encodes the same format (record_codec.hpp) for fresh claims and commits;
//  - times come from the caller's `now` (ARGV), never from the server clock; the key's
//    PX is the latest deadline - now + slack, a safety net that frees memory;
//  - a commit is SET PX GET (the old value is checked after the write, and put back,
//    with its own expiry, if the commit must be rejected: nobody can observe the
//    difference, the script is atomic); when the old value starts with the owner's
//    lease prefix it is accepted without decoding;
//  - every script returns an array whose first element is a code (script_codes.hpp
//    names each; the Lua text comments every number with its name); -1 carries an error
//    message (a key of the wrong type, a value that is not an idem record), so that a
//    bad key fails its own call only, also inside the combined and batch scripts.
#include "scripts.hpp"

namespace idem::redis::detail {
namespace {

const char* const kPrelude = R"lua(
local pack, unpack_mp = cmsgpack.pack, cmsgpack.unpack

local function enc(s, o, l, e, n, f, r) return pack({s, o, l, e, n, f, r}) end

-- The record in value v, or nil and an error message.
local function decode(v)
  local ok, t = pcall(unpack_mp, v)
  if not ok or type(t) ~= 'table' or type(t[1]) ~= 'string' or type(t[2]) ~= 'string' or
     type(t[3]) ~= 'number' or type(t[4]) ~= 'number' or type(t[5]) ~= 'number' then
    return nil, 'IDEMCORRUPT the value at this key is not an idem record'
  end
  local s = t[1]
  if s ~= 'i' and s ~= 'p' and s ~= 'c' and s ~= 'x' then
    return nil, 'IDEMCORRUPT unknown record state "' .. s .. '"'
  end
  return {s = s, o = t[2], l = t[3], e = t[4], n = t[5], f = t[6], res = t[7]}
end

-- r if it is live at now (with flags done / leased and an expired retry count
-- zeroed), else nil.
local function live(r, now)
  if r.s == 'c' or r.s == 'x' then
    if r.e > now then r.done = true return r end
    return nil
  end
  if not (r.n > 0 and r.e > now) then r.n = 0 end
  r.leased = r.s == 'i' and r.l > now
  if r.leased or r.n > 0 then return r end
  return nil
end

-- The live record at k, or nil; or nil and an error message.
local function load(k, now)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' and v.err then return nil, v.err end
  if not v then return nil end
  local r, err = decode(v)
  if not r then return nil, err end
  return live(r, now)
end

local function deadline(r)
  if r.s == 'i' then return math.max(r.l, r.e) end
  return r.e
end

local function put(k, now, slack, value, until_ms)
  redis.call('SET', k, value, 'PX', math.max(until_ms - now, 1) + slack)
end

-- ClaimCode: {0, retries} kGranted | {1, dead, has_result, result} kCompleted |
-- {2, owner, lease_left} kLeased | {3} kConflict
local function claim(k, now, owner, lease, fp, slack)
  local l = now + lease
  local f = fp ~= '' and fp or false
  local set = redis.pcall('SET', k, enc('i', owner, l, 0, 0, f, false), 'NX', 'PX', lease + slack)
  if type(set) == 'table' then
    if set.err then return {-1, set.err} end  -- kScriptError
    return {0, 0}  -- kGranted
  end
  local r, err = load(k, now)
  if err then return {-1, err} end  -- kScriptError
  if r and (r.leased or r.done) then
    if r.f and f and r.f ~= f then return {3} end  -- kConflict
    if r.leased then return {2, r.o, r.l - now} end  -- kLeased
    return {1, r.s == 'x' and 1 or 0, r.res and 1 or 0, r.res or ''}  -- kCompleted
  end
  local n, e = 0, 0
  if r then n, e = r.n, r.e end
  put(k, now, slack, enc('i', owner, l, e, n, f, false), math.max(l, e))
  return {0, n}  -- kGranted
end

-- CommitCode: {0} kCommitted | {1} kAlreadyCompleted | {2, owner} kLeasedByOther.
-- value: the committed record (encoded by the client); prefix: the first bytes of an
-- in-progress record of this owner (then the commit is accepted without decoding).
-- commit_checked: the rest of a commit whose SET … GET returned `old`, a value that
-- is not an in-progress record of this owner.
local function commit_checked(k, now, owner, old, slack)
  local r, err = decode(old)
  if not r then
    redis.call('SET', k, old)  -- not ours: put it back as it was
    return {-1, err}  -- kScriptError
  end
  local reject
  if live(r, now) then
    if r.done then
      reject = {1}  -- kAlreadyCompleted
    elseif r.leased and r.o ~= owner then
      reject = {2, r.o}  -- kLeasedByOther
    end
  end
  if reject then put(k, now, slack, old, deadline(r)) end
  return reject or {0}  -- kCommitted
end

local function commit(k, now, owner, value, prefix, px, slack)
  local old = redis.pcall('SET', k, value, 'PX', px, 'GET')
  if type(old) == 'table' and old.err then return {-1, old.err} end  -- kScriptError
  if not old or string.sub(old, 1, #prefix) == prefix then return {0} end  -- kCommitted
  return commit_checked(k, now, owner, old, slack)
end
)lua";

}  // namespace

std::string with_prelude(const char* body) { return std::string(kPrelude) + body; }

// KEYS[1] record; ARGV now, owner, lease_ms, fingerprint ('' none), slack_ms.
Script claim_script() {
  return {"claim", with_prelude(R"lua(
return claim(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]))
)lua"), {}};
}

// KEYS[1] record; ARGV now, owner, value, prefix, px_ms, slack_ms. The common case
// (the key absent or this owner's lease) answers before the prelude's functions are
// even defined: no closure is built for it.
Script commit_script() {
  return {"commit", std::string(R"lua(
local old = redis.pcall('SET', KEYS[1], ARGV[3], 'PX', ARGV[5], 'GET')
if type(old) == 'table' and old.err then return {-1, old.err} end  -- kScriptError
if not old or string.sub(old, 1, #ARGV[4]) == ARGV[4] then return {0} end  -- CommitCode::kCommitted
)lua") + with_prelude(R"lua(
return commit_checked(KEYS[1], tonumber(ARGV[1]), ARGV[2], old, tonumber(ARGV[6]))
)lua"), {}};
}

// KEYS[1] record; ARGV now, owner, count_retry ('1'/'0'), retry_ttl_ms, slack_ms.
// Returns {0, retries after the call}: no code but 0 and kScriptError.
Script release_script() {
  return {"release", with_prelude(R"lua(
local k, now, owner, count = KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'
local retry_ttl, slack = tonumber(ARGV[4]), tonumber(ARGV[5])
local r, err = load(k, now)
if err then return {-1, err} end  -- kScriptError
if not r then
  if not count then return {0, 0} end
  local e = now + retry_ttl
  put(k, now, slack, enc('p', '', 0, e, 1, false, false), e)
  return {0, 1}
end
if r.done then return {0, 0} end
if r.leased and r.o ~= owner then return {0, r.n} end
local n, e = r.n, r.e
if count then n, e = n + 1, now + retry_ttl end
if n == 0 then
  redis.call('DEL', k)
  return {0, 0}
end
put(k, now, slack, enc('p', '', 0, e, n, r.f or false, false), e)
return {0, n}
)lua"), {}};
}

// KEYS[1] record; ARGV now, owner, lease_ms, slack_ms.
// Returns ExtendCode: {0} kExtended | {1} kNotHeld (not held by owner) | {2} kExpired.
Script extend_script() {
  return {"extend", with_prelude(R"lua(
local k, now, owner, lease, slack = KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local r, err = load(k, now)
if err then return {-1, err} end  -- kScriptError
if not r or r.s ~= 'i' or r.o ~= owner then return {1} end  -- kNotHeld
if not r.leased then return {2} end  -- kExpired
local l = now + lease
put(k, now, slack, enc('i', r.o, l, r.e, r.n, r.f or false, false), math.max(l, r.e))
return {0}  -- kExtended
)lua"), {}};
}

// Batch forms for a standalone server (one script for many keys; not for a cluster,
// whose scripts must keep to one slot). claim_many: KEYS the records; ARGV[1]
// slack_ms, then per key now, owner, lease_ms, fingerprint; returns one answer per
// key, in order, as the single-key script would.
Script claim_many_script() {
  return {"claim_many", with_prelude(R"lua(
local slack, out = tonumber(ARGV[1]), {}
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 4
  out[i] = claim(KEYS[i], tonumber(ARGV[b + 1]), ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4], slack)
end
return out
)lua"), {}};
}

// commit_many: the commits of one owner at one `now` with one ttl, the arguments they
// share passed once. KEYS: the records; ARGV slack_ms, now, owner, prefix, px_ms, then
// one value per key. Returns {codes, details…}: codes has one byte per key, the digit
// of its CommitCode ('0' kCommitted, '1' kAlreadyCompleted, '2' kLeasedByOther) or
// 'e' (kCommitManyError: kScriptError); details holds, in key order, the owner of each
// '2' and the message of each 'e'.
Script commit_many_script() {
  return {"commit_many", with_prelude(R"lua(
local slack, now, owner, prefix, px = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local np, codes, out = #prefix, {}, {''}
for i = 1, #KEYS do
  local k = KEYS[i]
  local old = redis.pcall('SET', k, ARGV[5 + i], 'PX', px, 'GET')
  if type(old) == 'table' and old.err then
    codes[i] = 'e'  -- kCommitManyError
    out[#out + 1] = old.err
  elseif not old or string.sub(old, 1, np) == prefix then
    codes[i] = '0'  -- kCommitted
  else
    local r = commit_checked(k, now, owner, old, slack)
    if r[1] == 0 then  -- kCommitted
      codes[i] = '0'
    elseif r[1] == 1 then  -- kAlreadyCompleted
      codes[i] = '1'
    elseif r[1] == 2 then  -- kLeasedByOther
      codes[i] = '2'
      out[#out + 1] = r[2]
    else
      codes[i] = 'e'  -- kCommitManyError
      out[#out + 1] = r[2]
    end
  end
end
out[1] = table.concat(codes)
return out
)lua"), {}};
}

// KEYS[1] record. Read-only. Returns InspectCode: {0} kAbsent (no key) |
// {1, s, o, l, e, n, f|nil, r|nil} kFound (stored fields, liveness not applied) |
// {-1, error}.
Script inspect_script() {
  return {"inspect", with_prelude(R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then return {-1, v.err} end  -- kScriptError
if not v then return {0} end  -- kAbsent
local r, err = decode(v)
if not r then return {-1, err} end  -- kScriptError
return {1, r.s, r.o, r.l, r.e, r.n, r.f, r.res}  -- kFound
)lua"), {}};
}

}  // namespace idem::redis::detail
