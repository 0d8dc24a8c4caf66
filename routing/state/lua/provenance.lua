-- Remember which target produced an assistant turn (routing.continuity.provenance).
-- KEYS[1] hash  fingerprint -> target key        KEYS[2] list of fingerprints, oldest first
-- KEYS[3] set   targets seen in the scope         KEYS[4] response-id key ("" = none)
-- ARGV[1] fingerprint ("" = none)   ARGV[2] target key   ARGV[3] turns limit   ARGV[4] TTL ms
local ttl = ARGV[4]
if ARGV[1] ~= '' then
  if redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[1])
  end
  local limit = tonumber(ARGV[3])
  local n = redis.call('LLEN', KEYS[2])
  while n > limit do
    redis.call('HDEL', KEYS[1], redis.call('LPOP', KEYS[2]))
    n = n - 1
  end
  redis.call('SADD', KEYS[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if KEYS[4] ~= '' then
  redis.call('SET', KEYS[4], ARGV[2], 'PX', ttl)
end
return 0
