#!/usr/bin/env python3
"""Runs a command and prints its peak resident memory on stderr as
"rss_of: rank R peak X MiB" (R: the mpirun rank, 0 alone). For
bench/distributed_bench.py: each rank of an mpirun job runs under it."""
import os
import resource
import subprocess
import sys

code = subprocess.call(sys.argv[1:])
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
print(f"rss_of: rank {rank} peak {peak_kib / 1024:.1f} MiB", file=sys.stderr)
sys.exit(code)
