-- Check every rule of a call's plan, then take them all, or nothing (routing.limits.rules).
-- KEYS: the counters. ARGV[1]: the request body's digest (loop guard); then per rule
-- kind, limit, ttl (kinds: 1 COUNT, 2 GAUGE, 3 CAP, 4 LOOP).
-- Returns 0 (taken) or the 1-based index of the first rule that refuses.
local digest = ARGV[1]
local function loop_state(raw)
  if not raw then return nil, 0 end
  local sep = string.find(raw, ':', 1, true)
  return string.sub(raw, 1, sep - 1), tonumber(string.sub(raw, sep + 1))
end
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 3
  local kind, limit = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
  local raw = redis.call('GET', KEYS[i])
  if kind == 4 then
    local last, streak = loop_state(raw)
    if last == digest and streak >= limit then return i end
  else
    local value = tonumber(raw) or 0
    if kind == 3 then
      if value >= limit then return i end
    elseif value + 1 > limit then
      return i
    end
  end
end
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 3
  local kind, ttl = tonumber(ARGV[base]), tonumber(ARGV[base + 2])
  if kind == 4 then
    local last, streak = loop_state(redis.call('GET', KEYS[i]))
    if last ~= digest then streak = 0 end
    redis.call('SET', KEYS[i], digest .. ':' .. (streak + 1), 'EX', ttl)
  elseif kind ~= 3 then
    redis.call('INCR', KEYS[i])
    redis.call('EXPIRE', KEYS[i], ttl)
  end
end
return 0
