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
local keys = {}
for i, m in ipairs(members) do
  keys[i] = base .. 'k' .. m
end
local values = {}
for s = 1, #keys, 1000 do
  local got = redis.call('MGET', unpack(keys, s, math.min(s + 999, #keys)))
  for j = 1, #got do values[s + j - 1] = got[j] end
end
local out = {}
for i, m in ipairs(members) do
  out[#out + 1] = m
  out[#out + 1] = values[i]
end
return out
"#;

/// Linked read (a lookup in one round trip): `ARGV` = base, n, then n keys, then the
/// index (0-based) of the key holding the number, its byte offset, m, then m pairs
/// `prefix, suffix`. Returns the n values, then for each pair the value of
/// `prefix .. number .. suffix` — the little-endian `u64` at the offset, turned big-endian
/// — or nil each when that value is missing or too short.
pub const LINKED: &str = r#"
local base, n = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 1, n do
  out[i] = redis.call('GET', base .. 'k' .. ARGV[2 + i])
end
local from, offset, m = tonumber(ARGV[3 + n]), tonumber(ARGV[4 + n]), tonumber(ARGV[5 + n])
local holder = out[from + 1]
local number = false
if holder and #holder >= offset + 8 then
  number = string.reverse(string.sub(holder, offset + 1, offset + 8))
end
for j = 1, m do
  local prefix, suffix = ARGV[4 + n + 2 * j], ARGV[5 + n + 2 * j]
  if number then
    out[n + j] = redis.call('GET', base .. 'k' .. prefix .. number .. suffix)
  else
    out[n + j] = false
  end
end
return out
"#;

/// Linked scan (the first entries of a readdirplus page in one round trip; `listing.rs`): `KEYS[1]` index; `ARGV` = base,
/// n, then n keys, low bound, high bound, limit (-1 = all), the byte offset of the number
/// in each entry's value, m, then m pairs `prefix, suffix`. Returns the n values, then per
/// entry its key, its value and the m values it links to (nil each when it names none).
pub const SCAN_LINKED: &str = r#"
local idx, base, n = KEYS[1], ARGV[1], tonumber(ARGV[2])
-- Values of many keys: MGET in batches (one command per thousand keys, where a GET per
-- key made the script most of the cost of a listing).
local function mget(keys)
  local values = {}
  for s = 1, #keys, 1000 do
    local got = redis.call('MGET', unpack(keys, s, math.min(s + 999, #keys)))
    for j = 1, #got do values[s + j - 1] = got[j] end
  end
  return values
end
local out = {}
for i = 1, n do
  out[i] = redis.call('GET', base .. 'k' .. ARGV[2 + i])
end
local lo, hi, limit = ARGV[3 + n], ARGV[4 + n], tonumber(ARGV[5 + n])
local offset, m = tonumber(ARGV[6 + n]), tonumber(ARGV[7 + n])
local members = redis.call('ZRANGEBYLEX', idx, lo, hi, 'LIMIT', 0, limit)
local vkeys = {}
for i, member in ipairs(members) do
  vkeys[i] = base .. 'k' .. member
end
local values = mget(vkeys)
local lkeys, named = {}, {}
for i = 1, #members do
  local v = values[i]
  if v and #v >= offset + 8 then
    local number = string.reverse(string.sub(v, offset + 1, offset + 8))
    named[i] = #lkeys
    for j = 1, m do
      lkeys[#lkeys + 1] = base .. 'k' .. ARGV[6 + n + 2 * j] .. number .. ARGV[7 + n + 2 * j]
    end
  end
end
local linked = mget(lkeys)
for i, member in ipairs(members) do
  out[#out + 1] = member
  out[#out + 1] = values[i]
  local first = named[i]
  for j = 1, m do
    if first then
      out[#out + 1] = linked[first + j]
    else
      out[#out + 1] = false
    end
  end
end
return out
"#;

/// Validated commit. `ARGV` after the base: a commit id (empty for a read-only check; when
/// set, the key `{base}c{id}` = `1` is written with the commit so a client whose answer got
/// lost can ask whether it was applied, and a commit that finds the key already there —
/// fenced by [`FENCE`] — is not applied), the change announcement published on `{base}n` when
/// the commit applies (empty for none; `kv::encode_change`), then:
/// - point reads: count, then per read `key, has ("1"/"0"), value`;
/// - range reads: count, then per read `low, high, limit, reverse, empty, n` and `n`
///   pairs `key, value` it returned;
/// - writes: count, then per write `"P", key, value`, `"D", key`, or `"F", key, n` and
///   `n` field updates `slot, op ("A" add, "M" max, "S" set), operand` — the operand is
///   an 8-byte little-endian `i64`, and the arithmetic is exact (two 32-bit halves, since
///   Lua numbers are doubles). Field updates of a missing key do nothing.
///
/// Returns 0 when a read no longer holds (nothing written); when applied, an array of 1
/// and then, per field-updated key in order, the value the updates left (nil for a key
/// that was missing), so the client keeps the records it changed.
pub const COMMIT: &str = r#"
local idx, base, commit_id, notice = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if commit_id ~= '' and redis.call('EXISTS', base .. 'c' .. commit_id) == 1 then
  return 0
end
local i = 4
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
local TWO32 = 4294967296
local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return a + b * 256 + c * 65536 + d * 16777216
end
local function bytes32(n)
  local out = {}
  for j = 1, 4 do
    local byte = n % 256
    out[j] = byte
    n = (n - byte) / 256
  end
  return string.char(out[1], out[2], out[3], out[4])
end
local function load64(s, off)
  local lo, hi = u32(s, off + 1), u32(s, off + 5)
  if hi >= 2147483648 then hi = hi - TWO32 end
  return hi, lo
end
local function store64(hi, lo)
  return bytes32(lo) .. bytes32(hi % TWO32)
end
local function apply_field(cur, slot, op, operand)
  local off = slot * 8
  if #cur < off + 8 then return cur end
  local h1, l1 = load64(cur, off)
  local h2, l2 = load64(operand, 0)
  local h, l = h1, l1
  if op == 'S' then
    h, l = h2, l2
  elseif op == 'M' then
    if h2 > h1 or (h2 == h1 and l2 > l1) then h, l = h2, l2 end
  else
    l = l1 + l2
    local carry = 0
    if l >= TWO32 then l = l - TWO32; carry = 1 end
    h = (h1 + h2 + carry) % TWO32
    if h >= 2147483648 then h = h - TWO32 end
  end
  return string.sub(cur, 1, off) .. store64(h, l) .. string.sub(cur, off + 9)
end
local applied = {1}
for _ = 1, tonumber(nxt()) do
  local kind, k = nxt(), nxt()
  if kind == 'F' then
    local cur = redis.call('GET', base .. 'k' .. k)
    local n = tonumber(nxt())
    for _ = 1, n do
      local slot, op, operand = tonumber(nxt()), nxt(), nxt()
      if cur then cur = apply_field(cur, slot, op, operand) end
    end
    if cur then redis.call('SET', base .. 'k' .. k, cur) end
    applied[#applied + 1] = cur or false
  elseif kind == 'P' then
    redis.call('SET', base .. 'k' .. k, nxt())
    redis.call('ZADD', idx, 0, k)
  else
    redis.call('DEL', base .. 'k' .. k)
    redis.call('ZREM', idx, k)
  end
end
if commit_id ~= '' then
  redis.call('SET', base .. 'c' .. commit_id, '1', 'EX', 600)
end
if notice ~= '' then
  redis.call('PUBLISH', base .. 'n', notice)
end
return applied
"#;

/// Settle a commit whose answer was lost (`KEYS[1]` = `{base}c{id}`): its marker's value
/// when there is one (`1`: the commit was applied; `0`: an earlier attempt of this fence
/// took), else write `0` there — the commit, should it still arrive, then refuses to
/// apply — and return `fenced`.
pub const FENCE: &str = r#"
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], '0', 'EX', 600)
return 'fenced'
"#;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code
    use super::*;
    use redis::Script;

    /// A commit whose id was fenced (its answer was lost and the client settled it as not
    /// applied) refuses to apply when its request reaches the server after all; an applied
    /// commit's fence reports it applied. The server is `STRATA_TEST_REDIS`.
    #[tokio::test]
    async fn a_fenced_commit_arriving_late_is_not_applied() {
        let server = std::env::var("STRATA_TEST_REDIS")
            .expect("STRATA_TEST_REDIS must name a Redis server (scripts/test.sh starts one)");
        let mut conn = redis::Client::open(server)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let base = format!("t{}:", uuid::Uuid::new_v4().simple());
        let (commit, fence) = (Script::new(COMMIT), Script::new(FENCE));
        let index = format!("{base}i");
        // ARGV: base, commit id, notice, no point reads, no range reads, one put k = v.
        let put = |id: &str| {
            let mut call = commit.key(&index);
            call.arg(&base).arg(id).arg("").arg(0).arg(0).arg(1);
            call.arg("P").arg("k").arg(id);
            call
        };
        let fenced: String = fence
            .key(format!("{base}clate"))
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(fenced, "fenced");
        let late: redis::Value = put("late").invoke_async(&mut conn).await.unwrap();
        assert_eq!(late, redis::Value::Int(0), "a fenced commit is refused");
        let value: Option<String> = redis::cmd("GET")
            .arg(format!("{base}kk"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(value, None);
        // A second fence attempt (the first one's answer lost) still says not applied.
        let again: String = fence
            .key(format!("{base}clate"))
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(again, "0");
        // An applied commit: its fence finds the marker.
        let _: redis::Value = put("ok").invoke_async(&mut conn).await.unwrap();
        let applied: String = fence
            .key(format!("{base}cok"))
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(applied, "1");
    }
}
