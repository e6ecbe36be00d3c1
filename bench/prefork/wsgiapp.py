# SPDX-License-Identifier: BSD-2-Clause
"""The WSGI application bench/prefork/prefork runs under gunicorn.

Each request builds some five hundred small objects (a list of dicts, each
holding a string and a short list) and a JSON body of about 6 KB from
them, and drops them all once the body is sent: the allocation profile of
a handler that renders a page or an API answer from rows.  Objects of up
to 512 bytes come from CPython's own object allocator, which takes its
arenas with mmap; the body, the lists' arrays and the encoder's buffers
come from malloc, which is what the arms change."""

import json

ROWS = 120


def app(environ, start_response):
    seed = len(environ.get("PATH_INFO", "")) + len(environ.get("QUERY_STRING", ""))
    rows = [{"id": i, "name": f"item-{i + seed}", "tags": [i % 7, i % 11, "t" * (i % 5)]}
            for i in range(ROWS)]
    index = {r["name"]: r for r in rows}
    body = json.dumps({"count": len(index), "rows": rows}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]
