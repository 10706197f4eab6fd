"""Checks Triad's OpenAPI document with openapi-core, a strict validator (PyPI `openapi-core`).

    python3 test/helpers/openapi_core_check.py DOCUMENT.json EXCHANGES.json

The document must load (openapi-core validates it against the OpenAPI 3.1 schema first); each
recorded exchange, `{method, url, request: {headers, content_type, body}?, status, content_type,
headers, body, operation}`, is then checked: the request against its operation (and that the URL
resolves to `operation`), the response against what that operation declares. Prints one JSON
object `{"problems": [...]}`: empty when everything fits. Run by test/integration/openapi-tools.test.ts.
"""

import json
import sys
from urllib.parse import parse_qs, urlsplit

from openapi_core import OpenAPI
from openapi_core.templating.paths.finders import APICallPathFinder
from openapi_core.testing import MockRequest, MockResponse


def main() -> None:
    doc = json.load(open(sys.argv[1], encoding="utf-8"))
    exchanges = json.load(open(sys.argv[2], encoding="utf-8"))
    problems = []
    try:
        api = OpenAPI.from_dict(doc)
    except Exception as e:  # the document itself is refused
        print(json.dumps({"problems": [f"document: {type(e).__name__}: {e}"]}))
        return
    host = doc["servers"][0]["url"]
    finder = APICallPathFinder(api.spec)
    for x in exchanges:
        where = f"{x['method']} {x['url']} -> {x['status']}"
        url = urlsplit(x["url"])
        req = x.get("request") or {}
        request = MockRequest(
            host,
            x["method"],
            url.path,
            args={k: v[0] for k, v in parse_qs(url.query).items()},
            headers=req.get("headers") or {},
            data=(req.get("body") or "").encode("utf-8"),
            content_type=req.get("content_type") or "application/json",
        )
        try:
            found = finder.find(x["method"].lower(), x["url"])
            operation = found.operation["operationId"]
            if operation != x["operation"]:
                problems.append(f"{where}: resolves to {operation}, not {x['operation']}")
        except Exception as e:
            problems.append(f"{where}: no operation: {type(e).__name__}: {e}")
            continue
        if x.get("check_request", False):
            try:
                api.validate_request(request)
            except Exception as e:
                problems.append(f"{where}: request: {type(e).__name__}: {e} {getattr(e, '__cause__', '')}")
        response = MockResponse(
            (x.get("body") or "").encode("utf-8"),
            status_code=x["status"],
            headers=x.get("headers") or {},
            content_type=x.get("content_type") or "application/json",
        )
        try:
            api.validate_response(request, response)
        except Exception as e:
            detail = getattr(e, "__cause__", None)
            errors = getattr(detail, "schema_errors", None) or []
            problems.append(
                f"{where}: response: {type(e).__name__}: {e}; {detail}; "
                + "; ".join(str(err.message) for err in errors)
            )
    print(json.dumps({"problems": problems}))


if __name__ == "__main__":
    main()
