-- wrk script: registers patients, each under a name of its own.
--   wrk -t2 -c32 -s create_patient.lua URL   (with Authorization and X-Branch-Id headers)
local n = 0

function request()
  n = n + 1
  local body = string.format(
    '{"first_name":"Bench%d","last_name":"Writer%d","birth_date":"1980-01-02","sex":"female"}',
    n, math.random(1, 100000000))
  return wrk.format("POST", "/api/v1/patients", nil, body)
end
