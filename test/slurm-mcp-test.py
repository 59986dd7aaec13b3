#!/usr/bin/env python3
"""E-8, E-10, E-12..E-14: uvtasks-mcp --slurm against the suite's cluster.

submit_job answers with slurm-N and the Slurm job id once the controller
took the job, or with Slurm's reason when it refused; task_output,
task_list and task_kill work on it; the job sees no credential of the
server's environment; cluster_info shows the partitions and the fake GPU;
a server started again on the same journal takes a running job back under
its id.  Run by test/slurm-suite.sh (SLURM_CONF and UVT_SLURM_DIR set).
usage: slurm-mcp-test.py UVTASKS_MCP
"""
import json
import os
import subprocess
import sys

mcp = sys.argv[1]
base = os.environ["UVT_SLURM_DIR"]
journal = os.path.join(base, "mcp.journal")
env = dict(os.environ, UVTASKS_SLURM_OUT=os.path.join(base, "mcp-out"),
           AWS_SECRET_ACCESS_KEY="fake-aws-mcp-4711",
           GITHUB_TOKEN="fake-gh-mcp-4711",
           UVT_OK_TOKEN="passed-on-purpose")


class Server:
    def __init__(self, extra=(), journal_path=None):
        self.p = subprocess.Popen(
            [mcp, "--slurm", "--slurm-journal", journal_path or journal,
             "--no-guardian", "--pass-env", "UVT_OK_TOKEN", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.n = 0
        r = self.rpc("initialize", {"protocolVersion": "2025-06-18",
                                    "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        assert "serverInfo" in r, r
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method,
                   "params": params})
        while True:
            line = self.p.stdout.readline()
            assert line, "server closed its output"
            msg = json.loads(line)
            if msg.get("id") == self.n:
                assert "result" in msg, msg
                return msg["result"]

    def call(self, tool, args):
        r = self.rpc("tools/call", {"name": tool, "arguments": args})
        return r["content"][0]["text"], r.get("isError", False)

    def stop(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=120) == 0

    def crash(self):
        self.p.kill()
        self.p.wait(timeout=120)


# E-8: the tool is listed and submits; E-12: the answer names the job.
s = Server()
names = [t["name"] for t in s.rpc("tools/list", {})["tools"]]
assert "submit_job" in names and "cluster_info" in names, names
text, err = s.call("submit_job", {"command": "echo hi-from-slurm; exit 4",
                                  "label": "greeting"})
assert not err and "slurm-1" in text and "Slurm job " in text, text
text, err = s.call("task_output", {"task_id": "slurm-1", "wait": True,
                                   "timeout_ms": 60000})
assert "hi-from-slurm" in text and "exit code: 4" in text, text
text, err = s.call("submit_job", {"cpus": 2})
assert err, text
# E-12: a refusal, with Slurm's reason, at once.
text, err = s.call("submit_job", {"command": "true",
                                  "partition": "no-such-partition"})
assert err and "refused" in text and "partition" in text, text
# E-13: no extra sbatch option unless the server allows it.
text, err = s.call("submit_job", {"command": "true",
                                  "sbatch_args": ["constraint=x"]})
assert err and "not valid" in text, text
# E-10: the job sees the server's environment without its credentials.
text, err = s.call("submit_job", {"command": "env"})
assert not err, text
tid = text.split("task ")[1].split(" ")[0]
text, err = s.call("task_output", {"task_id": tid, "wait": True,
                                   "timeout_ms": 60000})
assert "fake-aws-mcp" not in text and "fake-gh-mcp" not in text, text
assert "UVT_OK_TOKEN=passed-on-purpose" in text, text
# E-14: what the cluster offers.
text, err = s.call("cluster_info", {})
assert not err and "debug" in text and "gpu" in text, text
# E-5: a second server on the journal in use says which journal and
# exits (it would adopt this one's jobs and report their ends too); this
# one goes on.
p = subprocess.run([mcp, "--slurm", "--slurm-journal", journal,
                    "--no-guardian"], stdin=subprocess.DEVNULL,
                   capture_output=True, env=env, text=True, timeout=120)
assert p.returncode != 0, p
assert "--slurm-journal %s is in use" % journal in p.stderr, p.stderr
text, err = s.call("cluster_info", {})
assert not err, text
# A running job outlives the server (journal) ...
text, err = s.call("submit_job", {"command": "echo started; sleep 300"})
assert not err and "Submitted as task slurm-" in text, text
run = text.split("task ")[1].split(" ")[0]
while True:
    text, err = s.call("task_output", {"task_id": run, "wait": True,
                                       "timeout_ms": 200})
    if "started" in text:
        break
text, err = s.call("task_list", {})
assert run in text and "slurm job " in text, text
s.stop()
# E-12: a server killed right after "Submitted" loses nothing.
s = Server()
text, err = s.call("submit_job", {"command": "echo second; sleep 300"})
assert not err and "Slurm job " in text, text
run2 = text.split("task ")[1].split(" ")[0]
s.crash()
# ... and the next server takes both back under their ids (only them: the
# others' ends were delivered).
s = Server()
text, err = s.call("task_list", {})
assert run in text and run2 in text and "slurm-1 " not in text, text
text, err = s.call("task_kill", {"task_id": run2})
assert not err, text
text, err = s.call("task_kill", {"task_id": run})
assert not err, text
text, err = s.call("task_output", {"task_id": run, "wait": True,
                                   "timeout_ms": 60000})
assert "killed" in text, text
s.stop()

# L-LIM-3: the server's limits are a job's --mem and CPUs by default, and
# ceilings a call's mem_mb and cpus may only lower; submit_job's
# description says so.
s = Server(("--limit-memory", "300M", "--limit-cpu", "150"),
           os.path.join(base, "mcp-limits-journal"))
desc = [t["description"] for t in s.rpc("tools/list", {})["tools"]
        if t["name"] == "submit_job"][0]
assert "at most 300 MiB of memory (--mem) and 2 CPUs" in desc, desc
text, err = s.call("submit_job", {"command": "sleep 300"})
assert not err and "Slurm job " in text, text
lim = text.split("task ")[1].split(" ")[0]
job = text.split("Slurm job ")[1].split(" ")[0].rstrip(".,:;)")
show = subprocess.run(["scontrol", "show", "job", job], env=env,
                      capture_output=True, text=True).stdout
assert "MinMemoryNode=300M" in show and "NumCPUs=2" in show, show
text, err = s.call("submit_job", {"command": "true", "mem_mb": 100,
                                  "cpus": 1})
assert not err, text
job2 = text.split("Slurm job ")[1].split(" ")[0].rstrip(".,:;)")
show = subprocess.run(["scontrol", "show", "job", job2], env=env,
                      capture_output=True, text=True).stdout
assert "MinMemoryNode=100M" in show and "NumCPUs=1" in show, show
text, err = s.call("submit_job", {"command": "true", "mem_mb": 301})
assert err and "above this server's memory limit of 300 MiB" in text, text
text, err = s.call("submit_job", {"command": "true", "cpus": 3})
assert err and "above this server's CPU limit of 150%" in text, text
text, err = s.call("task_kill", {"task_id": lim})
assert not err, text
# A command of 128 KiB or more cannot run as bash -c's argument: refused
# with the reason, nothing submitted (a fresh user's finding).
text, err = s.call("submit_job", {"command": "echo " + "x" * (128 * 1024)})
assert err and "128 KiB or more" in text, text[:300]
s.stop()

# Start-up failures name the files (a fresh user saw only "no such file
# or directory").
r = subprocess.run([mcp, "--slurm", "--slurm-journal",
                    os.path.join(base, "no-such-dir", "j"), "--no-guardian"],
                   stdin=subprocess.DEVNULL, capture_output=True, env=env,
                   text=True, timeout=60)
assert r.returncode != 0, r
assert os.path.join(base, "no-such-dir", "j") in r.stderr, r.stderr
print("slurm-mcp-test: ok")
