# SPDX-License-Identifier: BSD-2-Clause
"""Servers and clients: poold started cold on the server CPUs, what /stats
and /proc say about it, and the wrk and nreq clients on the client CPUs."""

import http.client
import json
import os
import re
import signal
import subprocess
import time

from .cells import WORKLOADS
from .common import HERE, AbError, run

STARTED = re.compile(r"poold\[(?P<master>\d+)\]: info: started allocator=(?P<allocator>\S+) "
                     r"workers=\d+(?: threads=(?P<threads>\d+))? pids=(?P<pids>[\d,]+) "
                     r"listen=[\d.]+:(?P<port>\d+)")


class Server:
    """One poold master started cold on the server CPUs, its workers and port."""

    def __init__(self, a, arm, tmpdir, tag, valgrind_out=None):
        """arm: an arms.Resolved."""
        self.errpath = os.path.join(tmpdir, f"poold-{tag}.err")
        self.bad_stats = 0
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if arm.preload:
            env["LD_PRELOAD"] = arm.preload
        env.update(arm.arm.env)
        cmd = [arm.binary, "-w", str(a.workers), "-p", "0", "--shutdown-timeout", "60"] \
            + list(arm.arm.flags)
        if valgrind_out:
            cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
                   f"--callgrind-out-file={valgrind_out}"] + cmd
        cmd = ["taskset", "-c", ",".join(map(str, a.server_cpus))] + cmd
        self.err = open(self.errpath, "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        deadline = time.monotonic() + (120 if valgrind_out else 15)
        m = None
        while time.monotonic() < deadline:
            with open(self.errpath) as f:
                m = STARTED.search(f.read())
            if m or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not m:
            self.stop()
            with open(self.errpath) as f:
                tail = f.read().strip().splitlines()[-3:]
            raise AbError(f"poold ({tag}) did not start: {' | '.join(tail)}")
        self.master = int(m.group("master"))
        self.allocator = m.group("allocator")
        self.pids = [int(x) for x in m.group("pids").split(",")]
        self.port = int(m.group("port"))
        # The arm must be what it claims: its workers threads or processes,
        # its thread-cache setting taken (a rejected one is one line).
        threads = m.group("threads") and int(m.group("threads"))
        with open(self.errpath) as f:
            rejected = [x for x in f.read().splitlines() if "SHMPOOL_TCACHE=" in x]
        if threads != arm.arm.threads or rejected:
            self.stop()
            raise AbError(f"poold ({tag}) started with threads={threads} for "
                          f"{arm.arm.threads}: {' '.join(rejected)}")
        if arm.preload:
            for pid in self.pids:
                with open(f"/proc/{pid}/maps") as f:
                    if arm.preload not in f.read():
                        self.stop()
                        raise AbError(f"{arm.preload} is not mapped into worker {pid} ({tag})")
        # The arm must be what it claims: /stats says whether /heavy runs on
        # a region.  Asked once, before any measured request.
        want = arm.arm.region
        try:
            got = self.stats().get("request_region")
        except AbError:
            self.stop()
            raise
        if got is not want and (want or got is not None):
            self.stop()
            raise AbError(f"poold ({tag}) reports request_region={got} in /stats, "
                          f"expected {want}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()

    def stats(self):
        """/stats as JSON.  A body that does not parse is asked for again:
        poold renders the allocator section twice (size, then text) and the
        two can differ when the counters grow a digit in between."""
        for _ in range(5):
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                c.request("GET", "/stats")
                r = c.getresponse()
                body = r.read()
            finally:
                c.close()
            if r.status != 200:
                raise AbError(f"/stats answered {r.status}")
            try:
                return json.loads(body)
            except ValueError:
                self.bad_stats += 1
        raise AbError("/stats returned invalid JSON five times in a row")

    def requests(self):
        return sum(w["requests"] for w in self.stats()["workers"])

    def proc_sample(self):
        """utime+stime ticks, scheduler run time in ns and minor faults,
        summed over the worker processes and all their threads."""
        ticks = ns = minflt = 0
        for pid in self.pids:
            # The process's stat counts all its threads; schedstat is a
            # thread's own, so with --threads it is summed over the tasks.
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Fields after "(comm)": state is 3, minflt 10, utime 14, stime 15.
            minflt += int(fields[10 - 3])
            ticks += int(fields[14 - 3]) + int(fields[15 - 3])
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ns += int(f.read().split()[0])
        return ticks, ns, minflt


def client_cmd(a, cmd):
    return ["taskset", "-c", ",".join(map(str, a.client_cpus))] + cmd


WRK_AB = re.compile(r"^AB (.*)$", re.M)


def wrk(a, server, workload, conc, seconds):
    path, depth = WORKLOADS[workload]
    cmd = client_cmd(a, ["wrk", "-t", str(a.wrk_threads), "-c", str(conc), "-d", f"{seconds}s",
                         "--latency", "-s", os.path.join(HERE, "ab-wrk.lua"),
                         f"http://127.0.0.1:{server.port}{path}", "--", str(depth)])
    r = run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if r.returncode != 0:
        raise AbError(f"wrk failed: {r.stderr.strip()}")
    m = WRK_AB.search(r.stdout)
    rps = re.search(r"Requests/sec:\s*([\d.]+)", r.stdout)
    if not m or not rps:
        raise AbError(f"cannot read wrk's output: {r.stdout[-300:]}")
    res = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", r.stdout)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                     r.stdout)
    res["rps"] = float(rps.group(1))
    res["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    res["socket_errors"] = sum(int(x) for x in sock.groups()) if sock else 0
    res["valid"] = int(res["non2xx"] == 0 and res["socket_errors"] == 0 and res["status"] == 0
                       and res["requests"] > 0)
    return res


def nreq(a, server, workload, conc, n, nreq_bin):
    path, depth = WORKLOADS[workload]
    cmd = client_cmd(a, [nreq_bin, "-c", str(conc), "-d", str(depth), "-t", "300", "-n", str(n),
                         f"127.0.0.1:{server.port}", path])
    r = run(cmd, capture_output=True, text=True, timeout=330)
    if r.returncode != 0:
        raise AbError(f"nreq {workload} -c {conc} -n {n} failed: "
                      f"{(r.stdout + r.stderr).strip()}")


def cpu_jiffies(cpus):
    """Busy and total jiffies of the given CPUs, from /proc/stat."""
    busy = total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                v = [int(x) for x in vals[:8]]
                busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
                total += sum(v)
    return busy, total


def busy_share(j0, j1):
    """Percent of the CPUs' time spent busy between two cpu_jiffies()."""
    return f"{100 * (j1[0] - j0[0]) / (j1[1] - j0[1]):.1f}" if j1[1] > j0[1] else ""
