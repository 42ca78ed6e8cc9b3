"""fake-gcs-server (Go; `.ci/run` builds it from the Go module proxy into the git-ignored
`tests/interop/.gcs/`) and the one thing it lacks for object_store's GCS client.

object_store writes through GCS's XML API (`PUT /bucket/object`, conditional with
`x-goog-if-generation-match: 0`, copies with `x-goog-copy-source`); fake-gcs-server 1.56.1
serves reads, deletes and listings there but uploads only through the JSON API (its issue
331, "XML support for object PUT/GET", is open). `xml_uploads_as_json` turns those two
requests into the JSON API's equivalents, carrying the condition as `ifGenerationMatch`,
which the server itself enforces, and gives the answer the `ETag` and `x-goog-generation`
headers the XML API would have sent. Its XML listing also ignores `start-after` (which
object_store's `list_with_offset` and delta-rs send), so `listing_after` drops the keys
at or before it from the answer. It runs inside fault_proxy.FaultProxy, so the same
proxy can inject faults too. Every other request passes as it came (its Host set to the
server's public host, which routes the XML API there).
"""
import json
import re
import urllib.parse

from fault_proxy import headers_of


def xml_uploads_as_json(public_host):
    public_host = public_host.encode()

    def translate(request):
        head, body = request
        lines = head.split(b"\r\n")
        method, target, version = lines[0].split(b" ", 2)
        fields = [line for line in lines[1:] if not line.lower().startswith(b"host:")]
        fields.append(b"Host: " + public_host)
        headers = headers_of(head)
        path, _, _ = target.partition(b"?")
        condition = headers.get(b"x-goog-if-generation-match")
        query = f"&ifGenerationMatch={condition.decode()}" if condition is not None else ""
        if method != b"PUT" or path.count(b"/") < 2:
            query = urllib.parse.parse_qs(target.partition(b"?")[2].decode())
            after = query.get("start-after", [None])[0] if method == b"GET" else None
            fix = listing_after(after) if after is not None else None
            return (b"\r\n".join([lines[0], *fields]), body), fix
        bucket, _, name = urllib.parse.unquote(path.decode()).lstrip("/").partition("/")
        quoted = urllib.parse.quote(name, safe="")
        if b"x-goog-copy-source" in headers:
            source = urllib.parse.unquote(headers[b"x-goog-copy-source"].decode()).lstrip("/")
            from_bucket, _, from_name = source.partition("/")
            target = (f"/storage/v1/b/{from_bucket}/o/{urllib.parse.quote(from_name, safe='')}"
                      f"/copyTo/b/{bucket}/o/{quoted}?{query.lstrip('&')}")
            fields = [f for f in fields if not f.lower().startswith(b"x-goog-copy-source")]
        else:
            target = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quoted}{query}"
        start = b" ".join([b"POST", target.encode(), version])
        return (b"\r\n".join([start, *fields]), body), with_xml_headers

    return translate


def with_xml_headers(answer):
    """A JSON API answer with the headers the XML API's answer carries."""
    head, _, body = answer.partition(b"\r\n\r\n")
    try:
        made = json.loads(body)
    except ValueError:
        return answer
    if not isinstance(made, dict) or "etag" not in made:
        return answer
    extra = f'\r\nETag: "{made["etag"]}"\r\nx-goog-generation: {made.get("generation", "")}'.encode()
    return head + extra + b"\r\n\r\n" + body


def listing_after(after):
    """A rewrite of an XML listing's answer that keeps only the keys after `after`."""

    def keep(match):
        key = re.search(rb"<Key>(.*?)</Key>", match.group(0)).group(1).decode()
        return match.group(0) if key > after else b""

    def rewrite(answer):
        head, _, body = answer.partition(b"\r\n\r\n")
        if re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
            head = re.sub(rb"(?im)^transfer-encoding:[^\r\n]*\r\n", b"", head) + b"\r\nContent-Length: 0"
            body = dechunked(body)
        body = re.sub(rb"<Contents>.*?</Contents>", keep, body, flags=re.DOTALL)
        head = re.sub(rb"(?im)^content-length:[^\r\n]*", f"Content-Length: {len(body)}".encode(), head)
        return head + b"\r\n\r\n" + body

    return rewrite


def dechunked(body):
    """The payload of a chunked body."""
    out = b""
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return out
        out, body = out + body[:size], body[size + 2:]
