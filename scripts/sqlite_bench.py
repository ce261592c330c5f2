"""SQLite insert transactions through one or two mounts (used by scripts/sqlite-bench.sh).

python3 scripts/sqlite_bench.py DIR [DIR2]
  one writer in DIR; with DIR2, then one writer in each of DIR and DIR2 on one database
  file (two mounts of one cluster see the same file). Each transaction is one INSERT
  (journal mode DELETE, synchronous FULL: several locks and two syncs per transaction).
  N (environment, default 200) transactions per writer. Prints tx/s, the row count and
  `pragma integrity_check`.
"""
import multiprocessing
import os
import sqlite3
import sys
import time

N = int(os.environ.get("N", "200"))


def worker(path, tag, n, q):
    c = sqlite3.connect(path, timeout=120)
    t = time.time()
    for i in range(n):
        with c:
            c.execute("insert into t values (?, ?)", (tag, i))
    q.put(time.time() - t)


def run(paths):
    p0 = paths[0]
    for suffix in ("", "-journal"):
        if os.path.exists(p0 + suffix):
            os.remove(p0 + suffix)
    c = sqlite3.connect(p0)
    c.execute("create table t (tag text, i int)")
    c.commit()
    c.close()
    q = multiprocessing.Queue()
    t = time.time()
    ps = [multiprocessing.Process(target=worker, args=(p, str(k), N, q)) for k, p in enumerate(paths)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    el = time.time() - t
    c = sqlite3.connect(p0)
    rows = c.execute("select count(*) from t").fetchone()[0]
    ok = c.execute("pragma integrity_check").fetchone()[0]
    return len(paths) * N / el, rows, ok


if __name__ == "__main__":
    one = run([sys.argv[1] + "/db1.sqlite"])
    two = run([sys.argv[1] + "/db2.sqlite", sys.argv[2] + "/db2.sqlite"]) if len(sys.argv) > 2 else None
    print("one writer: %.0f tx/s (rows %d, %s)" % one, end="")
    if two:
        print("; two writers on two mounts: %.0f tx/s (rows %d, %s)" % two)
    else:
        print()
