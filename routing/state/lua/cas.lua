-- Compare-and-set one JSON state value (a target's or a provider's health).
-- KEYS[1]  the state key
-- ARGV[1]  the value the caller read ('' = the key was absent)
-- ARGV[2]  the value to write ('' = delete: the default state is stored as no key)
-- Returns 1 if written, 0 if someone else changed the key since it was read.
local current = redis.call('GET', KEYS[1])
if (current or '') ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
