"""Workloads of issue #27's table that need a program (used by scripts/workloads.sh).

python3 scripts/workloads.py files DIR N        create N empty files in DIR (one directory)
python3 scripts/workloads.py sqlite DB ROWS TX MODE
    ROWS rows in TX transactions into a new database DB, journal_mode MODE (delete or wal),
    synchronous FULL; checks the row count and `pragma integrity_check`.
python3 scripts/workloads.py names DIR PROCS N
    PROCS processes, each in a directory of its own under DIR: N times create and write a
    100-byte file, chmod it, rename it; every third removed (docs/BENCHMARKS.md "Ordered
    operations in lanes"). Prints the wall time.
python3 scripts/workloads.py make-files DIR N
    N files of 4 KiB in DIR (made by an earlier mount for `rewrite`).
python3 scripts/workloads.py rewrite DIR N ROUNDS
    ROUNDS times over the N files of DIR: open one for writing, write 4 KiB at its start,
    close it, then open, read and close it again; checks the last bytes (docs/BENCHMARKS.md
    "File delegations"). Prints the wall time.
python3 scripts/workloads.py beside-fsync DIR FILES MIB
    One process writes FILES files of MIB MiB under DIR/w, each ended by `fsync`, while
    another opens, reads and closes the N files of DIR/small (made by `make-files` from an
    earlier mount) over and over; prints the writer's time and the reader's opens and
    their latency (median, 99th percentile, longest): how long one process's `fsync`
    holds up another's operations (docs/BENCHMARKS.md "Write-back waited for without the
    mount's lock").
python3 scripts/workloads.py beside-locks DIR SECONDS
    One process takes and drops an exclusive `fcntl` lock (`F_SETLKW`, which the
    replicas decide: a waiting request is never delegated) on DIR/lockfile for SECONDS,
    while another opens, reads and closes the files of DIR/small over and over; prints the
    locker's rounds per second and the reader's opens and their latency: how long one
    process's lock round trips hold up another's operations (docs/BENCHMARKS.md "Lock
    calls without the mount's lock").
Prints nothing else on success; exits non-zero with a message otherwise.
"""
import fcntl
import multiprocessing
import os
import sqlite3
import sys
import time


def files(d, n):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        with open(os.path.join(d, "f%06d" % i), "wb"):
            pass


def sqlite(db, rows, tx, mode):
    c = sqlite3.connect(db)
    c.execute("pragma journal_mode=%s" % mode)
    c.execute("pragma synchronous=full")
    c.execute("create table t (k integer primary key, v text)")
    per = rows // tx
    k = 0
    for _ in range(tx):
        with c:
            for _ in range(per):
                c.execute("insert into t values (?, ?)", (k, "row %d of the workload" % k))
                k += 1
    (count,) = c.execute("select count(*) from t").fetchone()
    (check,) = c.execute("pragma integrity_check").fetchone()
    c.close()
    if count != k or check != "ok":
        sys.exit("sqlite: %d rows of %d, integrity %s" % (count, k, check))


def make_files(d, n):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        with open(os.path.join(d, "f%04d" % i), "wb") as h:
            h.write(b"-" * 4096)


def rewrite(d, n, rounds):
    began = time.monotonic()
    for r in range(rounds):
        block = (b"round %06d " % r) * 315 + b"."
        for i in range(n):
            p = os.path.join(d, "f%04d" % i)
            with open(p, "r+b") as h:
                h.write(block)
            with open(p, "rb") as h:
                if h.read(4096) != block:
                    sys.exit("rewrite: %s does not read back round %d" % (p, r))
    print("%.3f" % (time.monotonic() - began))


def names_one(root, n):
    os.mkdir(root)
    for f in range(n):
        p = os.path.join(root, "f%d" % f)
        with open(p, "wb") as h:
            h.write(b"x" * 100)
        os.chmod(p, 0o600)
        q = os.path.join(root, "g%d" % f)
        os.rename(p, q)
        if f % 3 == 0:
            os.remove(q)


def names(d, procs, n):
    tag = "names-%d-%d" % (os.getpid(), time.time_ns())
    began = time.monotonic()
    ps = [
        multiprocessing.Process(target=names_one, args=(os.path.join(d, "%s-%d" % (tag, k)), n))
        for k in range(procs)
    ]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            sys.exit("names: a process failed")
    print("names: %d processes x %d files: %.3f s" % (procs, n, time.monotonic() - began))


def beside_reader(d, stop, out):
    names = sorted(os.listdir(d))
    lat = []
    while not stop.is_set():
        for n in names:
            t = time.monotonic()
            with open(os.path.join(d, n), "rb") as h:
                if len(h.read()) != 4096:
                    sys.exit("a short read")
            lat.append(time.monotonic() - t)
    out.put(lat)


class Beside:
    """A reader of the files of DIR/small, in a process of its own, beside a workload."""

    def __init__(self, d):
        self.stop = multiprocessing.Event()
        self.out = multiprocessing.Queue()
        self.reader = multiprocessing.Process(
            target=beside_reader, args=(os.path.join(d, "small"), self.stop, self.out)
        )

    def start(self):
        self.reader.start()

    def report(self, name, what):
        """Stops the reader; prints `name: what; reader N opens, latencies`."""
        self.stop.set()
        lat = sorted(self.out.get())
        self.reader.join()
        if self.reader.exitcode != 0 or not lat:
            sys.exit("%s: the reader failed" % name)
        ms = lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))]
        print(
            "%s: %s; reader %d opens, median %.2f ms, p99 %.2f ms, longest %.1f ms"
            % (name, what, len(lat), ms(0.5), ms(0.99), 1000 * lat[-1])
        )


def beside_fsync(d, files, mib):
    w = os.path.join(d, "w-%d-%d" % (os.getpid(), time.time_ns()))
    os.mkdir(w)
    beside = Beside(d)
    beside.start()
    block = bytes(range(256)) * 4096
    began = time.monotonic()
    for f in range(files):
        with open(os.path.join(w, "f%d" % f), "wb") as h:
            for _ in range(mib):
                h.write(block)
            os.fsync(h.fileno())
    beside.report("beside-fsync", "writer %.3f s" % (time.monotonic() - began))


def beside_locks(d, seconds):
    path = os.path.join(d, "lockfile")
    with open(path, "wb") as h:
        h.write(b"l" * 4096)
    beside = Beside(d)
    beside.start()
    rounds = 0
    began = time.monotonic()
    with open(path, "r+b") as h:
        while time.monotonic() - began < seconds:
            fcntl.lockf(h, fcntl.LOCK_EX)
            fcntl.lockf(h, fcntl.LOCK_UN)
            rounds += 1
    took = time.monotonic() - began
    beside.report("beside-locks", "locker %.0f rounds/s" % (rounds / took))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "files":
        files(sys.argv[2], int(sys.argv[3]))
    elif what == "names":
        names(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "make-files":
        make_files(sys.argv[2], int(sys.argv[3]))
    elif what == "rewrite":
        rewrite(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "beside-fsync":
        beside_fsync(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "beside-locks":
        beside_locks(sys.argv[2], float(sys.argv[3]))
    elif what == "sqlite":
        sqlite(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("unknown workload %s" % what)
