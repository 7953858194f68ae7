"""Run in a fresh interpreter for test_vllm_exit.py: start the real engine, serve a request, keep a failed
request's exception alive (its traceback pins frames that saw the engine), then end the process without closing
the backend, as an actor does when Ray ends it. The engine must be shut down by the backend's exit hook, with
nothing on stderr that looks like a traceback.

    python tests/engine/engine_exit_check.py MODEL_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys

KEPT: list[BaseException] = []


async def main(model_dir: str) -> dict:
    from chunker.backends.base import GenerationRequest
    from chunker.backends.errors import BackendRequestError
    from chunker.backends.vllm_backend import VllmBackend
    from engine_support import MAX_IMAGES, MAX_SIDE_PX, png, tiny_model_config

    backend = VllmBackend(tiny_model_config(model_dir), max_images=MAX_IMAGES, max_side_px=MAX_SIDE_PX)
    res = await backend.generate(GenerationRequest(system="S", user="Convert.", images=[png((140, 196))],
                                                   max_tokens=4, request_id="exit-check"))
    try:
        await backend.generate(GenerationRequest(system="S", user="word " * 5000, max_tokens=4))
    except BackendRequestError as exc:
        KEPT.append(exc)
    globals()["BACKEND"] = backend  # alive until interpreter exit, never closed explicitly
    return {"input_tokens": res.input_tokens, "output_tokens": res.output_tokens, "kept": len(KEPT)}


if __name__ == "__main__":  # vLLM spawns its engine core: the spawned interpreter re-imports this file
    print(json.dumps(asyncio.run(main(sys.argv[1]))), flush=True)
