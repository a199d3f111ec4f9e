"""Starts kiln-server on a free loopback port for the script tests."""
import re
import subprocess


def start_server(server, args, log):
    """Runs `server args --port 0` with its output going to `log` (an open
    file); returns (process, port), port None when it never said where it
    listens. The caller kills the process."""
    proc = subprocess.Popen([server] + args + ["--port", "0"], stdout=log, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        log.write(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, m.group(1)
    return proc, None
