-- The hot path of a successful call, in one round trip: fold the time-to-first-token
-- sample into the moving average, then return the target's health state (nil when the
-- target is healthy and never failed — the common case, which then needs no write).
-- KEYS[1]  latency key          KEYS[2]  target state key
-- ARGV[1]  ttft sample in ms ('' = none)   ARGV[2]  EMA weight of the new sample
-- ARGV[3]  latency key TTL in seconds
if ARGV[1] ~= '' then
  local value = tonumber(ARGV[1])
  local old = redis.call('GET', KEYS[1])
  if old then
    old = tonumber(old)
    value = old + tonumber(ARGV[2]) * (value - old)
  end
  redis.call('SET', KEYS[1], string.format('%.17g', value), 'EX', ARGV[3])
end
return redis.call('GET', KEYS[2])
