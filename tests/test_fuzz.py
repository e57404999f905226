"""Property-based fuzzing of every route from the OpenAPI document: no input may give a 5xx."""

from __future__ import annotations

from typing import Any

import msgspec
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import Running, bee, decide_body
from npcmind.http.openapi import openapi_document

schema = schemathesis.openapi.from_dict(msgspec.json.decode(openapi_document()))


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gives_a_5xx(case: Any, svc: Running) -> None:
    response = case.call(base_url=svc.server.url)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert "error" in response.json()
    # A schema-valid body can still break the manifest (an unknown type): a 422 there is right, so the
    # positive-data check is left out; every answer must still match the documented shapes and statuses.
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def near_valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A valid forest request with a few leaves replaced by arbitrary JSON: deep paths, not just the envelope."""
    body = decide_body(bee("a", position=[1.0, 2.0], parent="swarm-1", trigger="hit"), bee("b"))
    paths = _paths(body)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node: Any = body
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    return body


@given(body=near_valid_bodies())
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_near_valid_decide_bodies_never_give_a_5xx(body: dict[str, Any], svc: Running) -> None:
    r = svc.decide(body)
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code == 422:
        assert all(d["path"] is not None for d in r.json()["error"]["details"])
        assert r.json()["error"]["details"]
