-- wrk script: creates draft pharmacy transactions of one unit of ITEM at BRANCH.
--   wrk -t2 -c16 -s create_transaction.lua URL -- BRANCH ITEM
function init(args)
  body = string.format('{"branch_id":%s,"lines":[{"pharmacy_item_id":%s,"quantity":"1"}]}', args[1], args[2])
end

function request()
  return wrk.format("POST", "/api/v1/transactions", nil, body)
end
