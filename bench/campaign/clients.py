"""The campaign's clients and the postgres monitor. They run in the clients' namespace.

- careful: one INSERT per operation through a multi-host libpq URL with
  target_session_attrs=read-write; an operation that takes longer than 1 s is abandoned by
  closing the connection and counts as not acknowledged.
- hostile: the same, after SET synchronous_commit = local.
- monitor: polls every peer's postgres (writable? a streaming sync standby? streaming itself?).

An operation is never cancelled (a cancelled wait for synchronous replication returns success
with a warning): the watchdog shuts the socket down, which is what closing the connection does.
"""
import socket
import threading
import time

import psycopg2

OP_TIMEOUT = 1.0
CAREFUL_BASE = 0
HOSTILE_BASE = 1_000_000_000


def now():
    return time.time()


class Watchdog:
    """Shuts down a connection's socket when its operation outlives its deadline."""

    def __init__(self):
        self._lock = threading.Lock()
        self._fd = None
        self._deadline = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def arm(self, fd, seconds):
        with self._lock:
            self._fd, self._deadline = fd, time.monotonic() + seconds

    def disarm(self):
        with self._lock:
            self._fd = self._deadline = None

    def stop(self):
        self._stop = True

    def _run(self):
        while not self._stop:
            time.sleep(0.02)
            with self._lock:
                if self._fd is not None and time.monotonic() > self._deadline:
                    try:
                        s = socket.socket(fileno=self._fd)
                        try:
                            s.shutdown(socket.SHUT_RDWR)
                        finally:
                            s.detach()
                    except OSError:
                        pass
                    self._fd = self._deadline = None


class WritingClient(threading.Thread):
    """Writes rows with increasing ids; records (id, ack time, host, timeline) per acknowledgement."""

    def __init__(self, name, url, sync_local, interval, id_base):
        super().__init__(daemon=True, name=name)
        self.client = name
        self.url = url
        self.sync_local = sync_local
        self.interval = interval
        self.next_id = id_base + 1
        self.acks = []            # (id, t, host, tli)
        self.failures = 0
        self.stopping = False
        self.paused = False
        self._dog = Watchdog()

    def _connect(self):
        conn = psycopg2.connect(self.url, connect_timeout=2)
        conn.autocommit = True
        if self.sync_local:
            self._dog.arm(conn.fileno(), OP_TIMEOUT)
            try:
                with conn.cursor() as c:
                    c.execute("SET synchronous_commit = local")
            finally:
                self._dog.disarm()
        return conn

    def run(self):
        conn = None
        while not self.stopping:
            if self.paused:
                if conn is not None:
                    conn.close()
                    conn = None
                time.sleep(0.1)
                continue
            if conn is None:
                try:
                    conn = self._connect()
                except Exception:
                    conn = None
                    self.failures += 1
                    time.sleep(self.interval)
                    continue
            i = self.next_id
            self.next_id += 1
            ok = False
            try:
                self._dog.arm(conn.fileno(), OP_TIMEOUT)
                with conn.cursor() as c:
                    c.execute("INSERT INTO acks (id, client) VALUES (%s, %s) "
                              "RETURNING substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)", (i, self.client))
                    tli = int(c.fetchone()[0], 16)
                ok = True
            except Exception:
                ok = False
            finally:
                self._dog.disarm()
            if ok:
                self.acks.append((i, now(), conn.info.host, tli))
            else:
                self.failures += 1
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
            time.sleep(self.interval)
        if conn is not None:
            conn.close()
        self._dog.stop()

    def acks_between(self, t0, t1):
        return [a for a in self.acks if t0 <= a[1] < t1]


MONITOR_SQL = """SELECT pg_is_in_recovery(),
  current_setting('synchronous_standby_names'),
  (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')),
  (SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming')"""


class Sample:
    __slots__ = ("t", "up", "writable", "sync_names", "sync_streaming", "streaming")

    def __init__(self, t, up, writable=False, sync_names="", sync_streaming=0, streaming=False):
        self.t, self.up, self.writable = t, up, writable
        self.sync_names, self.sync_streaming, self.streaming = sync_names, sync_streaming, streaming

    def unprotected(self):
        """A writable postgres that acknowledges commits with no synchronous standby configured.
        (With one configured but not streaming, commits wait: they are not acknowledged.)"""
        return self.up and self.writable and self.sync_names.strip() == "" and self.sync_streaming == 0


class PeerMonitor(threading.Thread):
    def __init__(self, host, port, user, interval=0.5):
        super().__init__(daemon=True, name=f"monitor-{host}")
        self.host, self.port, self.user, self.interval = host, port, user, interval
        self.samples = []
        self.stopping = False
        self._dog = Watchdog()

    def run(self):
        conn = None
        while not self.stopping:
            t = now()
            try:
                if conn is None:
                    conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, dbname="postgres",
                                            connect_timeout=2)
                    conn.autocommit = True
                self._dog.arm(conn.fileno(), OP_TIMEOUT)
                with conn.cursor() as c:
                    c.execute(MONITOR_SQL)
                    rec, names, nsync, nrecv = c.fetchone()
                self.samples.append(Sample(t, True, not rec, names, int(nsync), int(nrecv) > 0))
            except Exception:
                self.samples.append(Sample(t, False))
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                conn = None
            finally:
                self._dog.disarm()
            time.sleep(self.interval)
        if conn is not None:
            conn.close()
        self._dog.stop()

    def latest(self):
        return self.samples[-1] if self.samples else None

    def at(self, t):
        """The last sample taken at or before t."""
        lo, hi = 0, len(self.samples)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.samples[mid].t <= t:
                lo = mid + 1
            else:
                hi = mid
        return self.samples[lo - 1] if lo > 0 else None


def query(host, port, user, sql, params=None, timeout=5):
    """One query on one postgres; returns all rows (raises on failure)."""
    conn = psycopg2.connect(host=host, port=port, user=user, dbname="postgres", connect_timeout=2,
                            options=f"-c statement_timeout={int(timeout * 1000)}", tcp_user_timeout=3000,
                            keepalives_idle=2, keepalives_interval=1, keepalives_count=3)
    try:
        conn.autocommit = True
        with conn.cursor() as c:
            c.execute(sql, params)
            return c.fetchall() if c.description else []
    finally:
        conn.close()
