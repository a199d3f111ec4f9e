#!/usr/bin/python3
"""The official `openai` npm package against kiln-server on loopback.

usage: test_openai_client.py KILN_SERVER MODEL SCRATCH_DIR
Installs openai from npm into SCRATCH_DIR (once); when that fails (no
network, no npm) the test is skipped with exit status 77 and says why.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import start_server  # noqa: E402

SERVER, MODEL, SCRATCH = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "openai-test-key"


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    if not os.path.isdir(os.path.join(SCRATCH, "node_modules", "openai")):
        npm = shutil.which("npm")
        if npm is None:
            print("SKIP: npm is not installed, so the openai package cannot be installed")
            return 77
        try:
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", SCRATCH, "openai@4"],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode != 0:
            print("SKIP: npm install openai failed:", done.stderr[-500:] if done else "timed out after 300 s")
            return 77
    shutil.copy(os.path.join(HERE, "openai_client.mjs"), SCRATCH)
    log = open(os.path.join(SCRATCH, "server.log"), "w")
    proc, port = start_server(SERVER, ["-m", MODEL, "-np", "2", "-c", "1024", "-t", "2",
                             "--api-key", KEY], log)
    try:
        if port is None:
            print("FAIL: kiln-server did not start")
            return 1
        client = subprocess.run(["node", os.path.join(SCRATCH, "openai_client.mjs"),
                                 "http://127.0.0.1:%s/v1" % port, KEY], timeout=180)
        return client.returncode
    finally:
        proc.kill()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
