-- SPDX-License-Identifier: BSD-2-Clause
-- wrk script for bench/kill-soak's random mode: one request in 50 asks for
-- /stats, whose heap check (debug builds) takes every pool lock, so that
-- deaths at crash points land with many locks held as well as one; one in
-- 25 asks for /heavy?n=600, whose map's buckets (300 KiB) and response
-- buffers are big blocks, so that deaths land in the page heap too.
local n = 0
local main, stats, big

function init(args)
   main = wrk.format(nil, wrk.path)
   stats = wrk.format(nil, "/stats")
   big = wrk.format(nil, "/heavy?n=600")
end

function request()
   n = n + 1
   if n % 50 == 0 then return stats end
   if n % 25 == 0 then return big end
   return main
end
