-- SPDX-License-Identifier: BSD-2-Clause
-- wrk script for bench/ab.  With an argument D > 1 (`wrk ... -- 16`) every
-- request slot carries D pipelined GETs of the URL's path, as the
-- TechEmpower pipelined plaintext test does.  In all cases done() prints
-- one machine-readable line, because `wrk --latency` stops at p99 and the
-- harness also wants p99.9 and the error counters in one place.

-- request() is defined only for pipelining: without it wrk sends its
-- static request and spends no Lua call per request on the client CPU.
function init(args)
   local depth = tonumber(args[1] or "1") or 1
   if depth > 1 then
      local batch = string.rep(wrk.format(nil, wrk.path), depth)
      request = function() return batch end
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "AB requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
      "p50_us=%d p99_us=%d p999_us=%d mean_us=%.1f\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
      latency.mean))
end
