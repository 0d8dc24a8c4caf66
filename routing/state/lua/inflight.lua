-- Add to an in-flight counter, never below zero. The TTL is a safety net: a process that
-- died mid-call leaves its increments behind, and they vanish once the key sits idle.
-- KEYS[1]  counter key    ARGV[1]  delta    ARGV[2]  TTL in seconds
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if value <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return value
