"""Real catalog servers for test_catalog_servers.py and test_catalog_hms.py, started from the pinned jars of
tests/interop/.jars/ (jars.txt; fetched by .ci/jars) with Java 17 on loopback: each can be
stopped and started again on the same port and state, as a server that went down."""
import json
import os
import pathlib
import socket
import subprocess
import time
import urllib.request

JARS = pathlib.Path(__file__).resolve().parent / ".jars"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def java():
    home = os.environ.get("JAVA_HOME")
    return str(pathlib.Path(home) / "bin" / "java") if home else "java"


class Server:
    """A JVM server: `command` and `env` run it, `ready` is a URL that answers once it
    serves (or a (host, port) that accepts connections); its log is kept in `folder`."""

    def __init__(self, name, folder, command, env, ready):
        self.name, self.folder, self.command, self.env, self.ready = name, folder, command, env, ready
        self.proc = None

    def start(self, timeout=120):
        with open(self.folder / f"{self.name}.log", "ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(self.command, env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_tail()}")
            try:
                if isinstance(self.ready, tuple):  # a TCP server: ready once it accepts
                    socket.create_connection(self.ready, timeout=2).close()
                else:
                    urllib.request.urlopen(self.ready, timeout=2).close()
                return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"{self.name} did not start in {timeout} s: {self.log_tail()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self):
        path = self.folder / f"{self.name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"


def iceberg_rest(folder):
    """Apache Iceberg's REST fixture (RESTCatalogServer, iceberg-open-api 1.10.1): Iceberg's
    JdbcCatalog on a SQLite file behind the reference REST handlers; it writes table
    metadata through HadoopFileIO, here into the tables' own folders."""
    jar = JARS / "iceberg-rest-fixture-1.10.1.jar"
    assert jar.exists(), f"{jar} missing: run .ci/jars"
    port = free_port()
    env = {
        "CATALOG_URI": f"jdbc:sqlite:file:{folder}/iceberg-rest.db",
        "CATALOG_WAREHOUSE": f"file://{folder}/warehouse",
        "CATALOG_REST_PORT": str(port),
    }
    url = f"http://127.0.0.1:{port}"
    return Server("iceberg-rest", folder, [java(), "-Xmx512m", "-jar", str(jar)], env, f"{url}/v1/config"), url


def hive_metastore(folder, version="4.0.1"):
    """The Hive standalone metastore `version` (4.0.1 with Hadoop 3.3.6, or 3.1.3 with Hadoop
    3.1.0) on an embedded Derby database in `folder`, its schema created on first start;
    Thrift on a loopback port. Returns the server (ready once the port accepts) and its
    thrift:// URI."""
    jars = JARS / f"hive-metastore-{version}"
    assert (jars / ".complete").exists(), f"{jars} missing: run .ci/jars"
    port = free_port()
    conf = folder / "hms-conf"
    conf.mkdir(exist_ok=True)
    settings = {
        "metastore.thrift.bind.host": "127.0.0.1",
        "metastore.thrift.port": port,
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "metastore.warehouse.dir": f"file://{folder}/warehouse",
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        # No notification log, compactor or housekeeping threads: a quiet, quick server.
        "metastore.event.db.notification.api.auth": "false",
        "metastore.compactor.initiator.on": "false",
        "metastore.housekeeping.threads.on": "false",
    }
    if version.startswith("3."):
        # 3.x's defaults name two classes its standalone jar lacks (they live in Hive's
        # query engine): the partition expression proxy and the replication dump cleaner.
        settings["metastore.expression.proxy"] = "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"
        settings["metastore.task.threads.always"] = "org.apache.hadoop.hive.metastore.events.EventCleanerTask"
    props = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in settings.items())
    (conf / "metastore-site.xml").write_text(f"<configuration>{props}</configuration>")
    classpath = f"{conf}:{jars}/*"
    if version.startswith("3.") and not (folder / "metastore_db").exists():
        # The lock tables the move's table lock needs (4.0.1 is left without them: there
        # xlake moves by the conditional alter alone, which 4 checks).
        prep = pathlib.Path(__file__).resolve().parent / "HmsLockTables.java"
        subprocess.run([java(), "-cp", classpath, str(prep)], check=True, capture_output=True, cwd=folder)
    command = [java(), "-Xmx512m", "-cp", classpath, "org.apache.hadoop.hive.metastore.HiveMetaStore"]
    return Server("hive-metastore", folder, command, {}, ("127.0.0.1", port)), f"thrift://127.0.0.1:{port}"


# Trino 476 needs Java 24 or newer: $TRINO_JAVA_HOME, else the Temurin 25 Debian machines here have.
TRINO_JAVA = pathlib.Path(os.environ.get("TRINO_JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64")) / "bin" / "java"


def trino(folder, catalogs):
    """Trino 476 (the trino-server tarball, unpacked by .ci/trino; it needs Java 24 or newer:
    TRINO_JAVA, whose absence test_trino.py reports as a skip), one coordinator on loopback with only the plugins
    its catalogs use, and one catalog per entry of `catalogs` (name -> connector properties;
    `connector.name` is `iceberg` unless they say otherwise). Returns
    the server and its HTTP URL; query it with trino_query."""
    home = JARS / "trino-server-476"
    assert (home / ".complete").exists(), f"{home} missing: run .ci/trino"
    port = free_port()
    etc = folder / "trino-etc"
    (etc / "catalog").mkdir(parents=True, exist_ok=True)
    plugins = folder / "trino-plugins"
    plugins.mkdir(exist_ok=True)
    connectors = {properties.get("connector.name", "iceberg") for properties in catalogs.values()}
    for plugin in (c.replace("_", "-") for c in connectors):  # delta_lake lives in plugin/delta-lake
        if not (plugins / plugin).exists():
            (plugins / plugin).symlink_to(home / "plugin" / plugin)
    config = {
        "coordinator": "true",
        "node-scheduler.include-coordinator": "true",
        "http-server.http.port": port,
        "discovery.uri": f"http://127.0.0.1:{port}",
        "plugin.dir": plugins,
        "catalog.config-dir": etc / "catalog",
        "query.max-memory": "512MB",
        "query.max-memory-per-node": "512MB",
    }
    (etc / "config.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    for name, properties in catalogs.items():
        text = "".join(f"{k}={v}\n" for k, v in {"connector.name": "iceberg", **properties}.items())
        (etc / "catalog" / f"{name}.properties").write_text(text)
    command = [
        str(TRINO_JAVA), "-Xmx2g", "-XX:+UseG1GC", "-Djdk.attach.allowAttachSelf=true",
        "--enable-native-access=ALL-UNNAMED", "-Dnode.environment=test", "-Dnode.id=xlake-test",
        f"-Dnode.data-dir={folder / 'trino-data'}", f"-Dconfig={etc / 'config.properties'}",
        "-cp", f"{home}/lib/*", "io.trino.server.TrinoServer",
    ]
    url = f"http://127.0.0.1:{port}"
    return Server("trino", folder, command, {}, f"{url}/v1/info"), url


def trino_query(url, sql, timeout=120):
    """The rows of `sql` through Trino's client protocol (POST /v1/statement, then nextUri)."""
    request = urllib.request.Request(f"{url}/v1/statement", data=sql.encode(), method="POST",
                                     headers={"X-Trino-User": "xlake"})
    deadline, rows, columns = time.time() + timeout, [], None
    while True:
        with urllib.request.urlopen(request, timeout=60) as reply:
            body = json.loads(reply.read())
        if "error" in body:
            raise RuntimeError(f"{sql}: {body['error'].get('message')}")
        columns = columns or [c["name"] for c in body.get("columns", [])] or None
        rows += body.get("data", [])
        if "nextUri" not in body:
            return [dict(zip(columns or [], r)) for r in rows]
        if time.time() > deadline:
            raise RuntimeError(f"{sql}: no answer in {timeout} s")
        request = urllib.request.Request(body["nextUri"], headers={"X-Trino-User": "xlake"})


def trino_ready(url, timeout=180):
    """Wait until Trino has finished starting (its /v1/info says so)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not http_json("GET", f"{url}/v1/info").get("starting", True):
            return
        time.sleep(0.5)
    raise RuntimeError(f"Trino did not finish starting in {timeout} s")


def http_json(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read() or b"null")


class CutProxy:
    """A loopback TCP proxy in front of a server that passes the first `allow` HTTP
    requests (or, with per="connection", connections: xlake's metastore client opens one per
    call) and then goes away as a stopped server does: it closes every connection and its
    listening socket, so the next request is refused. (What a server that dies between two
    requests of one sync looks like, at a point a test can choose.)"""

    def __init__(self, port, allow, per="request"):
        import threading

        self.target, self.allow, self.seen, self.per = port, allow, 0, per
        self.lock = threading.Lock()
        self.sockets = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.per == "connection":
                with self.lock:
                    self.seen += 1
                    if self.seen > self.allow:
                        self.sockets.append(client)
                        self.cut()
                        return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, upstream]
            forward = self.pipe if self.per == "connection" else self.requests
            threading.Thread(target=forward, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self.pipe, args=(upstream, client), daemon=True).start()

    def requests(self, client, upstream):
        """Client to server, one request at a time (head, then Content-Length bytes)."""
        reader = client.makefile("rb")
        try:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                with self.lock:
                    self.seen += 1
                    if self.seen > self.allow:
                        self.cut()
                        return
                upstream.sendall(head + reader.read(length))
        except OSError:
            return

    def pipe(self, src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def cut(self):
        for s in [self.listener, *self.sockets]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
