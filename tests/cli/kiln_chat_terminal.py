#!/usr/bin/env python3
"""kiln -cnv on a terminal (a pseudo-terminal here): Ctrl-C stops the reply
being generated and kiln asks for the next message; a Ctrl-C at the prompt
ends kiln with status 130. Prints what went wrong and exits 1 on failure.

usage: kiln_chat_terminal.py KILN MODEL
"""
import os
import pty
import select
import sys
import time

kiln, model = sys.argv[1], sys.argv[2]
# A reply that would run for a long time: no length limit, end-of-turn tokens never sampled.
pid, fd = pty.fork()
if pid == 0:
    os.execv(kiln, ["kiln", "-m", model, "-cnv", "-n", "-1", "--ignore-eos", "-c", "60000", "-t", "1", "-s", "7"])

out = b""
seen = 0  # how much of `out` the markers found so far have used


def read_until(marker, seconds):
    """Reads the terminal until `marker` appears after the previous marker, or fails."""
    global out, seen
    end = time.time() + seconds
    while time.time() < end:
        at = out.find(marker, seen)
        if at >= 0:
            seen = at + len(marker)
            return
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    sys.exit(f"did not see {marker!r} within {seconds} s; the terminal showed: {out[-300:]!r}")


def fail(message):
    os.kill(pid, 9)
    sys.exit(message)


read_until(b"> ", 20)
os.write(fd, b"Hello\n")
read_until(b"Hello\r\n", 5)
read_until(b" ", 5)  # the reply has started
os.write(fd, b"\x03")
read_until(b"[stopped]", 10)
read_until(b"> ", 10)
os.write(fd, b"\x03")
deadline = time.time() + 10
while time.time() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    fail("kiln did not exit after Ctrl-C at the prompt")
if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 130:
    sys.exit(f"kiln ended with status {status}, expected exit 130")
print("ok")
