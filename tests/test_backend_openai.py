"""The openai backend against a real HTTP server on 127.0.0.1 that records what it receives."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chunker.backends.base import BackendUnavailable, GenerationRequest
from chunker.backends.openai_backend import BackendRequestError, OpenAIBackend
from chunker.config import ModelConfig


class Stub:
    """What the server answers next (``mode``) and every request body it saw."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            with stub.lock:
                stub.requests.append({"path": self.path, **json.loads(raw)})
                stub.headers.append(dict(self.headers))
                stub.in_flight += 1
                stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
            try:
                self._answer()
            finally:
                with stub.lock:
                    stub.in_flight -= 1

        def _answer(self) -> None:
            mode = stub.mode
            if mode == "slow":
                time.sleep(1.0)
            if mode == "500":
                return self._send(500, b'{"error": "boom"}')
            if mode == "429":
                return self._send(429, b'{"error": "busy"}')
            if mode == "401":
                return self._send(401, b'{"error": "bad key"}')
            if mode == "400":
                return self._send(400, b'{"error": "prompt too long"}')
            if mode == "garbled":
                return self._send(200, b"{not json")
            if mode == "nochoices":
                return self._send(200, json.dumps({"object": "chat.completion", "choices": []}).encode())
            if mode == "concurrent":
                time.sleep(0.2)
            reply = {
                "model": "served-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "# Title\n\nBody."},
                             "finish_reason": "length" if mode == "length" else "stop"}],
                "usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290},
            }
            self._send(200, json.dumps(reply).encode())

    return Handler


@pytest.fixture()
def server():
    stub = Stub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield stub, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _request(**kw: Any) -> GenerationRequest:
    base = dict(
        system="You convert pages.",
        user="Convert these pages.",
        images=[b"\xff\xd8page-one-bytes", b"\xff\xd8page-two-bytes\x00\x01"],
        image_mime="image/jpeg",
        temperature=0.3,
        max_tokens=777,
        request_id="doc:0",
    )
    base.update(kw)
    return GenerationRequest(**base)


def _run(base_url: str, request: GenerationRequest, **cfg: Any):
    async def go():
        backend = OpenAIBackend(ModelConfig(name="my-model", base_url=base_url, **cfg))
        try:
            return await backend.generate(request)
        finally:
            await backend.close()

    return asyncio.run(go())


def test_request_shape_and_result(server, monkeypatch):
    stub, url = server
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test")
    req = _request()
    result = _run(url, req, api_key_env="TEST_OPENAI_KEY")

    assert result.text == "# Title\n\nBody."
    assert (result.input_tokens, result.output_tokens, result.finish_reason) == (1234, 56, "stop")
    assert result.model == "served-model"

    body = stub.requests[0]
    assert body["path"] == "/v1/chat/completions"
    assert body["model"] == "my-model"
    assert body["temperature"] == 0.3 and body["max_tokens"] == 777
    assert "response_format" not in body
    system, user = body["messages"]
    assert system == {"role": "system", "content": "You convert pages."}
    assert user["role"] == "user"
    parts = user["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert parts[-1]["text"] == "Convert these pages."
    for part, sent in zip(parts[:2], req.images):
        url_ = part["image_url"]["url"]
        prefix = "data:image/jpeg;base64,"
        assert url_.startswith(prefix)
        assert base64.b64decode(url_[len(prefix):]) == sent
    assert stub.headers[0].get("Authorization") == "Bearer sk-test"


def test_no_key_sends_no_auth_header_and_json_schema_is_forwarded(server, monkeypatch):
    stub, url = server
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    schema = {"type": "object", "properties": {"markdown": {"type": "string"}}}
    _run(url, _request(json_schema=schema, image_mime="image/png"), api_key_env="NO_SUCH_KEY_VAR")
    assert "Authorization" not in stub.headers[0]
    body = stub.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert body["messages"][1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


def test_length_finish_reason(server):
    stub, url = server
    stub.mode = "length"
    assert _run(url, _request()).finish_reason == "length"


def test_timeout_is_retryable(server):
    stub, url = server
    stub.mode = "slow"
    with pytest.raises(BackendRequestError, match="timed out") as info:
        _run(url, _request(), request_timeout_s=0.2)
    assert info.value.retryable


@pytest.mark.parametrize("mode,status", [("500", 500), ("429", 429)])
def test_server_errors_are_retryable(server, mode, status):
    stub, url = server
    stub.mode = mode
    with pytest.raises(BackendRequestError) as info:
        _run(url, _request())
    assert info.value.retryable and info.value.status == status
    assert str(status) in str(info.value)


def test_bad_request_is_not_retryable_as_sent(server):
    stub, url = server
    stub.mode = "400"
    with pytest.raises(BackendRequestError) as info:
        _run(url, _request())
    assert not info.value.retryable and "prompt too long" in str(info.value)


@pytest.mark.parametrize("mode,words", [("garbled", "malformed JSON"), ("nochoices", "no choices")])
def test_malformed_replies_are_retryable(server, mode, words):
    stub, url = server
    stub.mode = mode
    with pytest.raises(BackendRequestError, match=words) as info:
        _run(url, _request())
    assert info.value.retryable


def test_auth_error_is_fatal_and_names_url_and_env(server):
    stub, url = server
    stub.mode = "401"
    with pytest.raises(BackendUnavailable) as info:
        _run(url, _request(), api_key_env="MY_KEY_VAR")
    assert "MY_KEY_VAR" in str(info.value) and url in str(info.value)


def test_connection_refused_is_retryable():
    # A port nothing listens on: bind one, note it, close it.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BackendRequestError, match="cannot reach"):
        _run(f"http://127.0.0.1:{port}/v1", _request(), request_timeout_s=2)


def test_concurrency_is_bounded(server):
    stub, url = server
    stub.mode = "concurrent"

    async def go():
        backend = OpenAIBackend(ModelConfig(name="m", base_url=url, max_concurrency=2))
        try:
            return await asyncio.gather(*(backend.generate(_request(request_id=str(i))) for i in range(6)))
        finally:
            await backend.close()

    results = asyncio.run(go())
    assert len(results) == 6 and len(stub.requests) == 6
    assert stub.max_in_flight <= 2
