"""A small Iceberg REST catalog server for the tests, written from the REST OpenAPI document
(https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml) and backed
by pyiceberg's SqlCatalog on SQLite. No REST catalog server installs from the registries the
suite may use, so this stands in; it is a TEST server.

Implements: GET /v1/config (with a prefix), POST /v1/oauth/tokens (client credentials),
namespaces (create, load, list), tables (load, exists, list) and
POST /v1/{prefix}/namespaces/{ns}/register with `overwrite` (an atomic pointer swap, as
Polaris and Gravitino do). Every request but /v1/config's token endpoint needs the bearer
token.

    python rest_server.py <sqlite path> <port file>   # writes the bound port, serves forever
"""
import base64
import json
import pathlib
import re
import sqlite3
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "test-wh"
CLIENT_ID, CLIENT_SECRET, TOKEN = "xlake-client", "xlake-secret", "token-for-tests"
UNIT = "\x1f"


class Handler(BaseHTTPRequestHandler):
    catalog = None
    db_path = None
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, kind, message):
        self.reply(status, {"error": {"message": message, "type": kind, "code": status}})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return dict(urllib.parse.parse_qsl(raw.decode()))
        try:
            return json.loads(raw or b"{}")
        except ValueError:  # a form sent without its content type
            return dict(urllib.parse.parse_qsl(raw.decode()))

    def route(self, method):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        if path == "/v1/oauth/tokens" and method == "POST":
            form = self.body()
            # RFC 6749 2.3.1: the client's id and secret in the form or as HTTP Basic (DuckDB).
            basic = self.headers.get("Authorization", "")
            if basic.startswith("Basic "):
                pair = base64.b64decode(basic[6:]).decode().split(":", 1)
                form["client_id"], form["client_secret"] = (urllib.parse.unquote(x) for x in pair)
            if form.get("client_id") == CLIENT_ID and form.get("client_secret") == CLIENT_SECRET:
                return self.reply(200, {"access_token": TOKEN, "token_type": "bearer", "expires_in": 3600, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
            return self.reply(401, {"error": "invalid_client"})
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.error(401, "NotAuthorizedException", "missing or wrong bearer token")
        if path == "/v1/config":
            return self.reply(200, {"defaults": {}, "overrides": {"prefix": PREFIX}})
        m = re.fullmatch(rf"/v1/{PREFIX}/namespaces(?:/([^/]+))?(?:/(tables|register)(?:/([^/]+))?)?", path)
        if not m:
            return self.error(404, "NoSuchEndpointException", path)
        ns_raw, kind, name = m.groups()
        ns = tuple(urllib.parse.unquote(ns_raw).split(UNIT)) if ns_raw else None
        name = urllib.parse.unquote(name) if name else None
        with self.lock:
            return self.dispatch(method, ns, kind, name)

    def dispatch(self, method, ns, kind, name):
        from pyiceberg.exceptions import (
            NamespaceAlreadyExistsError,
            NoSuchNamespaceError,
            NoSuchTableError,
        )

        c = self.catalog
        if ns is None and kind is None:
            if method == "POST":
                body = self.body()
                try:
                    c.create_namespace(tuple(body["namespace"]), body.get("properties") or {})
                except NamespaceAlreadyExistsError:
                    return self.error(409, "AlreadyExistsException", f"namespace {body['namespace']} exists")
                return self.reply(200, {"namespace": body["namespace"], "properties": body.get("properties") or {}})
            return self.reply(200, {"namespaces": [list(n) for n in c.list_namespaces()]})
        if kind is None:
            try:
                props = c.load_namespace_properties(ns)
            except NoSuchNamespaceError:
                return self.error(404, "NoSuchNamespaceException", f"namespace {ns}")
            return self.reply(200 if method == "GET" else 204, {"namespace": list(ns), "properties": props} if method == "GET" else None)
        if kind == "register" and method == "POST":
            return self.register(ns, self.body())
        if kind == "tables" and name is None:
            return self.reply(200, {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in c.list_tables(ns)]})
        try:
            table = c.load_table(ns + (name,))
        except NoSuchTableError:
            return self.error(404, "NoSuchTableException", f"table {'.'.join(ns)}.{name}")
        if method == "HEAD":
            return self.reply(204)
        metadata = json.loads(pathlib.Path(table.metadata_location.removeprefix("file://")).read_text())
        return self.reply(200, {"metadata-location": table.metadata_location, "metadata": metadata, "config": {}})

    def register(self, ns, body):
        from pyiceberg.exceptions import (
            NoSuchNamespaceError,
            NoSuchTableError,
            TableAlreadyExistsError,
        )

        c = self.catalog
        ident = ns + (body["name"],)
        location = body["metadata-location"]
        try:
            c.load_namespace_properties(ns)
        except NoSuchNamespaceError:
            return self.error(404, "NoSuchNamespaceException", f"namespace {ns}")
        try:
            c.register_table(ident, location)
        except TableAlreadyExistsError:
            if not body.get("overwrite"):
                return self.error(409, "AlreadyExistsException", f"table {'.'.join(ident)} exists")
            # Overwrite: swap the pointer in the catalog's own table (SqlCatalog has no
            # overwrite), keeping the previous location as JdbcCatalog does.
            with sqlite3.connect(self.db_path) as db:
                db.execute(
                    "UPDATE iceberg_tables SET previous_metadata_location = metadata_location, metadata_location = ? "
                    "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                    (location, c.name, ".".join(ns), body["name"]),
                )
        try:
            table = c.load_table(ident)
        except NoSuchTableError:
            return self.error(500, "ServerError", "registered table vanished")
        metadata = json.loads(pathlib.Path(location.removeprefix("file://")).read_text())
        return self.reply(200, {"metadata-location": table.metadata_location, "metadata": metadata, "config": {}})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_HEAD(self):
        self.route("HEAD")


def main(db_path, port_file):
    from pyiceberg.catalog.sql import SqlCatalog

    Handler.db_path = db_path
    Handler.catalog = SqlCatalog("rest", uri=f"sqlite:///{db_path}", warehouse=f"file://{pathlib.Path(db_path).parent}/wh")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    pathlib.Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:3])
