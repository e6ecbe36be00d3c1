-- wrk script for bench/kill-soak's random mode: one request in 50 asks for
-- /stats, whose heap check (debug builds) takes every pool lock, so that
-- deaths at crash points land with many locks held as well as one.
local n = 0
local main, stats

function init(args)
   main = wrk.format(nil, wrk.path)
   stats = wrk.format(nil, "/stats")
end

function request()
   n = n + 1
   if n % 50 == 0 then return stats end
   return main
end
