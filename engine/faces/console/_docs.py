"""``/docs`` and ``/redoc`` from the package's own copies of Swagger UI and
ReDoc, so the API's documentation shows on a machine with no internet
(FastAPI's defaults load both from a CDN)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

REDOC_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - ReDoc</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/static/favicon.png"></head>
<body><redoc spec-url="{openapi_url}"></redoc>
<script src="/static/redoc.standalone.js"></script></body></html>"""


# the pages may run their own inline set-up, but fetch nothing from another
# host: ReDoc's "powered by" logo is on a CDN, and stays there
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)


def install_docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url="/static/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger-ui.css",
            swagger_favicon_url="/static/favicon.png",
        )
        page.headers["Content-Security-Policy"] = CSP
        return page

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        page = HTMLResponse(REDOC_PAGE.format(title=app.title, openapi_url=app.openapi_url or "/openapi.json"))
        page.headers["Content-Security-Policy"] = CSP
        return page
