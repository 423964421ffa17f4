-- wrk script: completes the pharmacy transactions FIRST..LAST, each exactly once, shared out
-- over wrk's threads (thread t takes FIRST + t, FIRST + t + THREADS, ...). A thread stops when
-- its share is done; the per-status counts are printed at the end.
--   wrk -t2 -c16 -s complete.lua URL -- FIRST LAST THREADS
local threads = {}
local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  first, last, step = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  current = first + tid - step
  completed, refused, other = 0, 0, 0
end

function request()
  current = current + step
  if current > last then
    finished = true
    wrk.thread:stop()
    return wrk.format("GET", "/api/v1/public/health")
  end
  return wrk.format("POST", "/api/v1/transactions/" .. current .. "/complete", nil, "{}")
end

function response(status)
  if finished then return end
  if status == 200 then completed = completed + 1
  elseif status == 409 then refused = refused + 1
  else other = other + 1 end
end

function done()
  local c, r, o = 0, 0, 0
  for _, t in ipairs(threads) do
    c, r, o = c + t:get("completed"), r + t:get("refused"), o + t:get("other")
  end
  io.write(string.format("answers: %d completed (200), %d refused (409), %d other\n", c, r, o))
end
