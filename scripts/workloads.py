"""Workloads of issue #27's table that need a program (used by scripts/workloads.sh).

python3 scripts/workloads.py files DIR N        create N empty files in DIR (one directory)
python3 scripts/workloads.py sqlite DB ROWS TX MODE
    ROWS rows in TX transactions into a new database DB, journal_mode MODE (delete or wal),
    synchronous FULL; checks the row count and `pragma integrity_check`.
Prints nothing on success; exits non-zero with a message otherwise.
"""
import os
import sqlite3
import sys


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


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "files":
        files(sys.argv[2], int(sys.argv[3]))
    elif what == "sqlite":
        sqlite(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("unknown workload %s" % what)
