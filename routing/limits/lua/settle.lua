-- A call ended: give its gauges back (floored at 0), add its usage to the charges.
-- KEYS: the gauges, then the charged counters. ARGV[1]: how many gauges; then per
-- charged counter: amount, ttl (the expiry only ever grows).
local gauges = tonumber(ARGV[1])
for i = 1, gauges do
  if redis.call('DECR', KEYS[i]) < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
end
for i = gauges + 1, #KEYS do
  local base = 2 + (i - gauges - 1) * 2
  local ttl = tonumber(ARGV[base + 1])
  redis.call('INCRBYFLOAT', KEYS[i], ARGV[base])
  if redis.call('TTL', KEYS[i]) < ttl then redis.call('EXPIRE', KEYS[i], ttl) end
end
return 0
