#!/usr/bin/env python3
"""Runs devbench jobs side by side, each pinned to its own physical cores.

    python3 bench/device/sched.py JOBS_FILE OUT_DIR SLOTS BUDGET HARD BW_LIMIT

JOBS_FILE: one job per line, "NAME<TAB>THREADS<TAB>CLASS<TAB>COMMAND..." (CLASS bw or cpu),
in priority order. SLOTS: "2,3 4,5 ..." (a slot's first core serves 1-thread jobs).
No job starts after BUDGET seconds; every job still running at HARD seconds is killed.
At most BW_LIMIT jobs of class bw (generation: memory bound) run at once, so that the
memory bandwidth each one sees stays close to what it would see alone.
Each job's stdout goes to OUT_DIR/json/NAME.json, stderr to OUT_DIR/logs/NAME.txt.
The engines' libraries: LD_LIBRARY_PATH as given in the environment (DEVBENCH_LIBS).
"""
import os
import subprocess
import sys
import time


def main():
    jobs_file, out, slots_arg, budget, hard, bw_limit = sys.argv[1:7]
    budget, hard, bw_limit = float(budget), float(hard), int(bw_limit)
    slots = [s.split(",") for s in slots_arg.split()]
    jobs = []
    for line in open(jobs_file):
        line = line.rstrip("\n")
        if line and not line.startswith("#"):
            name, threads, cls, cmd = line.split("\t", 3)
            jobs.append((name, int(threads), cls, cmd))
    env = dict(os.environ)
    if os.environ.get("DEVBENCH_LIBS"):
        env["LD_LIBRARY_PATH"] = os.environ["DEVBENCH_LIBS"]
    start = float(os.environ.get("DEVBENCH_T0", time.time()))
    free = list(range(len(slots)))
    running = {}  # slot -> (Popen, name, cls, started)
    log = open(os.path.join(out, "sched.log"), "a")

    def say(msg):
        line = "[%4ds] %s" % (time.time() - start, msg)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    pending = list(jobs)
    while pending or running:
        now = time.time() - start
        for slot, (proc, name, cls, t0) in list(running.items()):
            rc = proc.poll()
            if rc is None and now >= hard:
                proc.kill()
                rc = proc.wait()
                say("killed %s at the hard limit" % name)
            if rc is not None:
                say("done %s rc=%d in %.0fs" % (name, rc, time.time() - t0))
                del running[slot]
                free.append(slot)
        if now >= budget and pending:
            for name, _, _, _ in pending:
                say("skip %s (past %ds)" % (name, budget))
            pending = []
        bw_running = sum(1 for (_, _, cls, _) in running.values() if cls == "bw")
        started = False
        if free and pending:
            for i, (name, threads, cls, cmd) in enumerate(pending):
                if cls == "bw" and bw_running >= bw_limit:
                    continue
                slot = free.pop(0)
                cores = ",".join(slots[slot][:max(1, threads)])
                stdout = open(os.path.join(out, "json", name + ".json"), "w")
                stderr = open(os.path.join(out, "logs", name + ".txt"), "w")
                pin = [] if os.environ.get("DEVBENCH_NOPIN") == "1" else ["taskset", "-c", cores]
                proc = subprocess.Popen(pin + ["bash", "-c", cmd], stdout=stdout,
                                        stderr=stderr, env=env)
                running[slot] = (proc, name, cls, time.time())
                say("start %s on cores %s" % (name, cores))
                del pending[i]
                started = True
                break
        if not started:
            time.sleep(0.2)
    say("all jobs finished")


if __name__ == "__main__":
    main()
