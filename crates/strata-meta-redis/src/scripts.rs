//! The Lua scripts the Redis engine runs on the server. Redis runs a script atomically, so
//! a commit's validation and writes see no other client in between.
//!
//! Arguments are binary-safe strings. Value keys are `ARGV[1] .. "k" .. key`; the sorted
//! set of all keys is `KEYS[1]`.

/// Ordered range scan with values: `KEYS[1]` index; `ARGV` = base, low bound (`[start`),
/// high bound (`(end`), limit (-1 = all), reverse (`"1"`). Returns key, value, key, ...
pub const SCAN: &str = r#"
local idx, base = KEYS[1], ARGV[1]
local members
if ARGV[5] == '1' then
  members = redis.call('ZREVRANGEBYLEX', idx, ARGV[3], ARGV[2], 'LIMIT', 0, tonumber(ARGV[4]))
else
  members = redis.call('ZRANGEBYLEX', idx, ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
end
local out = {}
for _, m in ipairs(members) do
  out[#out + 1] = m
  out[#out + 1] = redis.call('GET', base .. 'k' .. m)
end
return out
"#;

/// Validated commit. `ARGV` after the base:
/// - point reads: count, then per read `key, has ("1"/"0"), value`;
/// - range reads: count, then per read `low, high, limit, reverse, empty, n` and `n`
///   pairs `key, value` it returned;
/// - writes: count, then per write `"P", key, value` or `"D", key`.
///
/// Returns 1 when applied, 0 when a read no longer holds (nothing written).
pub const COMMIT: &str = r#"
local idx, base = KEYS[1], ARGV[1]
local i = 2
local function nxt()
  local v = ARGV[i]
  i = i + 1
  return v
end
for _ = 1, tonumber(nxt()) do
  local k, has, v = nxt(), nxt(), nxt()
  local cur = redis.call('GET', base .. 'k' .. k)
  if has == '1' then
    if cur ~= v then return 0 end
  elseif cur then
    return 0
  end
end
for _ = 1, tonumber(nxt()) do
  local lo, hi, limit, rev, empty, n = nxt(), nxt(), tonumber(nxt()), nxt(), nxt(), tonumber(nxt())
  local members = {}
  if empty ~= '1' then
    if rev == '1' then
      members = redis.call('ZREVRANGEBYLEX', idx, hi, lo, 'LIMIT', 0, limit)
    else
      members = redis.call('ZRANGEBYLEX', idx, lo, hi, 'LIMIT', 0, limit)
    end
  end
  if #members ~= n then return 0 end
  for j = 1, n do
    local k, v = nxt(), nxt()
    if members[j] ~= k then return 0 end
    if redis.call('GET', base .. 'k' .. k) ~= v then return 0 end
  end
end
for _ = 1, tonumber(nxt()) do
  local kind, k = nxt(), nxt()
  if kind == 'P' then
    redis.call('SET', base .. 'k' .. k, nxt())
    redis.call('ZADD', idx, 0, k)
  else
    redis.call('DEL', base .. 'k' .. k)
    redis.call('ZREM', idx, k)
  end
end
return 1
"#;
