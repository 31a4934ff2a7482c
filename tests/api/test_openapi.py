"""The OpenAPI document: valid, served, and describing exactly the routes the server has."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate
from starlette.routing import Route
from starlette.testclient import TestClient

from cllm_ollama.api.openapi import document
from cllm_ollama.api.routes import ROUTES
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings


def test_the_document_is_valid_openapi() -> None:
    validate(document())


def _served() -> set[tuple[str, str]]:
    out = set()
    for route in ROUTES:
        assert isinstance(route, Route) and route.methods
        # Starlette's {name:converter} is OpenAPI's {name}.
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        out |= {(path, method.lower()) for method in route.methods}  # GET routes also answer HEAD
    return out


def _described() -> set[tuple[str, str]]:
    return {(path, method) for path, item in document()["paths"].items() for method in item}


def test_every_route_is_described_and_nothing_else() -> None:
    served, described = _served(), _described()
    assert served - described == set(), "routes the document does not describe"
    assert described - served == set(), "operations the server does not have"


def test_every_operation_documents_its_error_shape() -> None:
    for path, item in document()["paths"].items():
        for method, op in item.items():
            error = (
                "AnthropicError"
                if path.startswith("/v1/messages")
                else "OpenAIError"
                if path.startswith("/v1/")
                else "Error"
            )
            for code, response in op["responses"].items():
                if int(code) >= 400 and code != "403" and method != "head":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": f"#/components/schemas/{error}"}, (path, method, code)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_served_at_openapi_json(store_settings: Settings, method: str) -> None:
    with TestClient(create_app(store_settings), base_url="http://localhost") as client:
        r = client.request(method, "/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    if method == "GET":
        assert r.json() == document()


def test_the_api_key_is_described() -> None:
    doc = document()
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "`Authorization: Bearer <key>`, a CLLM_API_KEY key",
    }
    assert doc["security"] == [{"bearer": []}, {"apiKey": []}, {}]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            public = path == "/"
            assert (op.get("security") == []) is public, (path, method)
            assert ("401" in op["responses"]) is not public, (path, method)


def test_the_document_says_which_models_take_images_and_audio() -> None:
    """cllm serves vision and audio models: the ``images`` fields say so, and for which models."""
    described = [
        schema["properties"]["images"]["description"]
        for schema in document()["components"]["schemas"].values()
        if "images" in schema.get("properties", {})
    ]
    assert described
    for text in described:
        assert "no vision" not in text and "vision capability" in text and "audio" in text
