"""``caveman-engine proxy [--listen HOST:PORT] [--level LEVEL] [--config FILE]``."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

from .config import LEVELS


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"caveman-engine proxy: {message}", err=True)
    sys.exit(code)


@click.command(
    "proxy",
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Run a local HTTP proxy in front of the Anthropic and OpenAI APIs that shrinks each "
        "request's tool catalog (originals kept in the recovery store), keeps prompt caches warm "
        "and turns itself off for a session it would hurt. Point ANTHROPIC_BASE_URL at "
        "http://HOST:PORT, OpenAI SDKs at http://HOST:PORT/v1. See docs/proxy.md."
    ),
)
@click.option("--listen", default=None, metavar="HOST:PORT",
              help="Loopback address to listen on (default 127.0.0.1:8787).")
@click.option("--level", default=None, metavar="LEVEL",
              help=f"Catalog rewrite: {'|'.join(LEVELS)} (overrides the config; "
                   "any other value is an error).")
@click.option("--config", "config_file", default=None, metavar="FILE",
              help="YAML config, - for stdin (default $CAVEMAN_CONFIG, else "
                   "$CAVEMAN_HOME/caveman.yaml).")
def proxy_command(listen: str | None, level: str | None, config_file: str | None) -> None:
    from .config import ConfigError, load

    try:
        cfg = load(config_file, level=level, listen=listen)
    except ConfigError as exc:
        _fail(str(exc), exc.exit_code)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="caveman-engine proxy: %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.ERROR)
    engine = None
    if cfg.level != "off":
        from ..engine import Engine
        from ..store import StoreError, open_store

        try:
            engine = Engine(open_store())
        except StoreError as exc:
            _fail(f"cannot open recovery store: {exc}")
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            stopped_by = runner.run(serve(cfg, engine))
    except OSError as exc:
        _fail(f"listen {cfg.host}:{cfg.port}: {exc.strerror or exc}")
    # Ctrl-C is an interruption (130, as for every other command); SIGTERM a normal stop
    sys.exit(130 if stopped_by == signal.SIGINT else 0)


def _loop_factory():
    """uvloop's event loop when it is installed (a dependency where it builds), else None:
    asyncio's own. Same behaviour, less CPU per request in the event loop and transports."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def serve(cfg, engine, *, started=None) -> int | None:
    """Run until SIGINT/SIGTERM, and return that signal. ``started(port)`` is called once the
    socket is listening."""
    from aiohttp import web

    from .server import Proxy

    proxy = Proxy(cfg, engine)
    runner = proxy.runner()
    await runner.setup()
    stop = asyncio.Event()
    got: list[int] = []
    loop = asyncio.get_running_loop()

    def stop_on(sig: int) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop_on, sig)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        site = web.TCPSite(runner, cfg.host, cfg.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        click.echo(f"caveman-engine proxy: listening on http://{host}:{port} "
                   f"(level {cfg.level})", err=True)
        if engine is not None:  # load the tokenizer now, not on the first request
            await asyncio.to_thread(engine.count, b"warm up")
        if started is not None:
            started(port)
        await stop.wait()
    finally:
        await runner.cleanup()
    return got[0] if got else None
