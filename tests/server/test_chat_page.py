#!/usr/bin/python3
"""kiln-server's chat page in headless Chromium (Debian's chromium, driven
over the DevTools protocol by chat_page_browser.mjs with Node): a typed
message gets the streamed reply the API gives; Stop ends a reply and frees
its slot. The screenshot goes to LOG_DIR/chat_page.png.

usage: test_chat_page.py KILN_SERVER MODEL LOG_DIR
Skipped (exit status 77, with the reason) when chromium or node is missing.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import start_server  # noqa: E402
import time
import urllib.request

SERVER, MODEL, LOG_DIR = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main():
    chromium = shutil.which("chromium")
    if chromium is None or shutil.which("node") is None:
        print("SKIP: the chat page test needs Debian's chromium and node")
        return 77
    os.makedirs(LOG_DIR, exist_ok=True)
    log = open(os.path.join(LOG_DIR, "server.log"), "w")
    proc, port = start_server(SERVER, ["-m", MODEL, "-np", "2", "-c", "2048", "-t", "2"], log)
    try:
        if port is None:
            print("FAIL: kiln-server did not start")
            return 1
        expected = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story"}],
                                                       "max_tokens": 16, "temperature": 0})
        text = expected["choices"][0]["message"]["content"]
        screenshot = os.path.join(LOG_DIR, "chat_page.png")
        browser = subprocess.run(["node", os.path.join(HERE, "chat_page_browser.mjs"), chromium,
                                  "http://127.0.0.1:%s/" % port, text, screenshot], timeout=180)
        if browser.returncode != 0:
            return 1
        # The stopped reply's slot is free again.
        with urllib.request.urlopen("http://127.0.0.1:%s/slots" % port, timeout=10) as r:
            deadline = time.monotonic() + 10
            slots = json.loads(r.read())
            while any(s["state"] == "busy" for s in slots) and time.monotonic() < deadline:
                time.sleep(0.1)
                with urllib.request.urlopen("http://127.0.0.1:%s/slots" % port, timeout=10) as again:
                    slots = json.loads(again.read())
        if any(s["state"] == "busy" for s in slots):
            print("FAIL: a slot is still busy after Stop")
            return 1
        print("screenshot:", screenshot)
        return 0
    finally:
        proc.kill()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
