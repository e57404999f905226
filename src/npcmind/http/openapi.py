"""The OpenAPI 3.1 document of an app's routes, from its route table and the msgspec wire types that decode requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Litestar
from litestar.routes import HTTPRoute

from npcmind import __version__
from npcmind.http.routes import Route
from npcmind.protocol.errors import ErrorResponse

if TYPE_CHECKING:
    from litestar._kwargs.parameter_definition import ParameterDefinition
    from litestar.handlers import HTTPRouteHandler

_ERROR_TEXT = {
    304: "Not modified: If-None-Match holds the current ETag",
    400: "Malformed JSON",
    401: "No or bad token",
    403: "Token of another client",
    404: "Unknown id or route",
    406: "Accept names only text/event-stream: a streamed answer is application/x-ndjson",
    409: "Stale or conflicting state",
    413: "Body over the limit",
    415: "Not JSON: content-type must be application/json or application/<name>+json",
    421: "A Host that does not name this machine (local profile; NPCMIND_ALLOWED_HOSTS)",
    422: "Well-formed but invalid: every problem by path",
    429: "Over the client's request rate",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def openapi_document(app: Litestar) -> bytes:
    """The document of an app's routes as JSON bytes, read from what Litestar routes: each handler's method,
    path and the query parameters its signature declares, with the wire types of its route in the table."""
    operations = [
        (route, method, handler, kwargs)
        for route in app.routes
        if isinstance(route, HTTPRoute)
        for method, (handler, kwargs) in route.route_handler_map.items()
        if isinstance(handler.opt.get("route"), Route)
    ]
    specs: list[Route] = [handler.opt["route"] for _, _, handler, _ in operations]
    types: list[Any] = [ErrorResponse]
    types += [r.request for r in specs if r.request] + [r.response for r in specs if r.response]
    types += [line for r in specs if r.streamed for line in r.streamed.lines if line not in types]
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    for component in components.values():  # a tagged union's tag (source, type) is msgspec's, not a field of ours
        for prop in component.get("properties", {}).values():
            if "description" not in prop and len(prop.get("enum", ())) == 1:
                prop["description"] = f"Always {prop['enum'][0]}: says which of the shapes this object has."
    by_type = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for route, method, handler, kwargs in operations:
        op = _operation(handler.opt["route"], by_type)
        params = [_path_parameter(name) for name in route.path_parameters]
        params += [_query_parameter(handler, q) for q in sorted(kwargs.expected_query_params)]
        if params:
            op["parameters"] = params
        paths.setdefault(route.path_format, {})[method.lower()] = op
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "npcmind", "version": __version__, "description": "A2G 0.1 decisions and NPC dialogue steps"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    return msgspec.json.encode(doc)


def _operation(r: Route, by_type: dict[Any, Any]) -> dict[str, Any]:
    """One operation's summary, body and answers."""
    op: dict[str, Any] = {"summary": r.summary, "operationId": r.method + r.path.replace("/", "_")}
    if r.request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": by_type[r.request]}}}
    ok: dict[str, Any] = {"description": "OK"}
    if r.method == "head":
        pass  # no body
    elif r.response is not None:
        ok["content"] = {r.media: {"schema": by_type[r.response]}}
        if r.streamed is not None:  # the same 200, asked for with Accept: one JSON document a line
            lines = [by_type[line] for line in r.streamed.lines]
            ok["description"] = f"OK: {r.media}, or {r.streamed.media} when the request's Accept asks for it"
            ok["content"][r.streamed.media] = {"schema": {"description": r.streamed.description, "anyOf": lines}}
    else:
        ok["content"] = {r.media: {"schema": {"type": "string"} if r.media != "application/json" else {}}}
    responses: dict[str, Any] = {"200": ok}
    for status in (*r.errors, 421):  # any route, when the Host is checked
        responses[str(status)] = {"description": _ERROR_TEXT.get(status, "Error")}
        if status >= 400:  # a 304 has no body
            responses[str(status)]["content"] = {"application/json": {"schema": _ref("ErrorResponse")}}
    op["responses"] = responses
    if not r.public:
        op["security"] = [{"bearer": []}, {}]
    return op


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query_parameter(handler: HTTPRouteHandler, q: ParameterDefinition) -> dict[str, Any]:
    """A query parameter as the endpoint's signature declares it: its type (without None) and description."""
    field = handler.parsed_fn_signature.parameters[q.field_name]
    kinds = [a for a in field.args if a is not type(None)] if field.is_optional else [field.annotation]
    out: dict[str, Any] = {"name": q.field_alias, "in": "query", "required": q.is_required}
    out["schema"] = msgspec.json.schema(kinds[0] if len(kinds) == 1 else Any)
    description = getattr(field.kwarg_definition, "description", None)
    if description:
        out["description"] = description
    return out
