"""`npcmind replay`'s flags checked, its one target made, the kept calls replayed and the report written: every
bad flag is one line naming it, exit code 2; nothing is sent before every flag has been checked."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from typing import Any

import msgspec

from npcmind.config import Settings
from npcmind.manifest import Manifest, ManifestError
from npcmind.manifest import load as load_manifest
from npcmind.providers.base import Provider
from npcmind.providers.select import make_provider
from npcmind.replay import report
from npcmind.replay.flags import FlagError
from npcmind.replay.kept import Loaded, load
from npcmind.replay.run import PolicyTarget, Progress, ProviderTarget, Target, replay_all
from npcmind.storage import Store, open_store
from npcmind_client.policy import Policy, PolicyError


def check_target(args: argparse.Namespace) -> None:
    """Exactly one target: --provider with --model (and --manifest), or --policy."""
    if args.policy:
        flags = (("--provider", args.provider), ("--model", args.model), ("--manifest", args.manifest))
        given = [f for f, v in flags if v]
        if given:
            raise FlagError(f"--policy replays the published learned policy and sends nothing: leave out {given[0]}")
        return
    if args.provider is None:
        raise FlagError(
            "--provider: say what to replay against: --provider openai|anthropic --model NAME (with --manifest FILE "
            "for prompts rendered again), or --policy"
        )
    if not args.model:
        raise FlagError(f"--model: name the {args.provider} model to replay against (replay never picks one for you)")


def make_target_provider(args: argparse.Namespace) -> Provider:
    """The one provider replay may send to: the one the flags name, with its key from the environment."""
    settings = Settings(provider=args.provider, base_url=args.base_url, model=args.model, api_key_env=args.api_key_env)
    try:
        provider = make_provider(settings)
    except ValueError as e:
        raise FlagError(str(e)) from None
    if not provider.ready:
        var = args.api_key_env or ("OPENAI_API_KEY" if args.provider == "openai" else "ANTHROPIC_API_KEY")
        raise FlagError(f"--provider {args.provider}: no API key in {var} (--api-key-env names another variable)")
    return provider


def main(args: argparse.Namespace) -> int:
    """Run `npcmind replay`; 0 when the report was written, 1 when most calls failed (the report is written still),
    2 for a flag or store that cannot be used."""
    try:
        check_target(args)
        manifest = _manifest(args.manifest) if args.manifest else None
        provider = make_target_provider(args) if args.provider else None
        return asyncio.run(_replay(args, manifest, provider))
    except FlagError as e:
        print(f"npcmind replay: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:  # a store that cannot be read, an --out that cannot be written
        print(f"npcmind replay: {e}", file=sys.stderr)
        return 2


def _manifest(path: str) -> Manifest:
    try:
        return load_manifest(path)
    except ManifestError as e:
        raise FlagError(f"--manifest {e}") from None


async def _replay(args: argparse.Namespace, manifest: Manifest | None, provider: Provider | None) -> int:
    try:
        report_out = await _report(args, manifest, provider)
    finally:
        if provider is not None:
            await provider.close()
    text = msgspec.json.format(msgspec.json.encode(report_out), indent=2)
    if args.out:
        with open(args.out, "wb") as f:
            f.write(text + b"\n")
        print(_summary(report_out, args.out), file=sys.stderr)
    else:
        sys.stdout.buffer.write(text + b"\n")
    return _failed(report_out)


def _failed(out: dict[str, Any]) -> int:
    """1, said with the reason, when most calls failed: the agreement is then of fallbacks, not of the model."""
    failed, calls = out["calls_failed"], out["calls"]
    if not calls or 2 * failed <= calls:
        return 0
    which = f"all {calls} calls" if failed == calls else f"{failed} of {calls} calls"
    so = "compares nothing" if failed == calls else "compares mostly fallbacks"
    reason = next(iter(out["failures"]))  # the most frequent
    print(f"npcmind replay: {which} failed, so the report {so}: {reason}", file=sys.stderr)
    return 1


async def _report(args: argparse.Namespace, manifest: Manifest | None, provider: Provider | None) -> dict[str, Any]:
    """The kept calls read, replayed against the target, and the report of it."""
    since = time.time() - args.since * 3600 if args.since else 0.0
    store = open_store(args.store, read_only=True)
    await store.open()
    try:
        loaded = await load(store, args.client, since, args.type, args.sample)
        calls, left_out = _renderable(loaded)
        if not calls:
            what = f" of type {args.type}" if args.type else ""
            where = f"--client {args.client}: no kept decision{what} to replay in {args.store}"
            raise FlagError(where + _why(left_out, loaded.fresh, args.client))
        target: Target = (
            ProviderTarget(provider, manifest, args.timeout)
            if provider is not None
            else await _policy(store, args.client, list(loaded.manifests))
        )
    finally:
        await store.close()
    progress = Progress(len(calls))
    results = await replay_all(calls, target, args.rate, args.in_flight, progress.add)
    return report.build(_describe(args, provider, manifest), results, left_out, args.price_in, args.price_out)


def _renderable(loaded: Loaded) -> tuple[list[tuple[Any, Manifest]], dict[str, int]]:
    """The calls whose manifest is kept, with it; the rest counted as left out, by why."""
    left: Counter[str] = Counter(loaded.left_out)
    out = []
    for c in loaded.calls:
        m = loaded.manifests.get(c.manifest_version)
        if m is None:
            left["decisions whose manifest is not kept"] += len(c.decisions)
        elif c.decisions:
            out.append((c, m))
    return out, dict(left)


def _why(left_out: dict[str, int], fresh: int, client: str) -> str:
    """Why nothing is replayed: no model decided anything (the quick start's service, with no provider), decisions
    kept before what the model read was, or rows left out."""
    if not left_out and not fresh:
        return (
            f" (no decision of client {client} was made by a model there: a service with no provider (as `serve` "
            "without an API key) answers every decision with a fallback and keeps nothing to replay; decide through "
            "one with a provider)"
        )
    if not left_out:
        return " (no call was kept there: npcmind keeps what the model read since schema version 4)"
    return " (left out: " + ", ".join(f"{n} {why}" for why, n in sorted(left_out.items())) + ")"


async def _policy(store: Store, client: str, versions: list[str]) -> PolicyTarget:
    """The policy published for each manifest version the calls were rendered with (none: `no_policy`)."""
    policies: dict[str, Policy | None] = {}
    for version in versions:
        kept = await store.policies.get(client, version)
        try:
            policies[version] = Policy.load(kept.data, manifest_version=version) if kept is not None else None
        except PolicyError:
            policies[version] = None
    if not any(policies.values()):
        raise FlagError(f"--policy: no learned policy is published for client {client} (npcmind distill --publish)")
    return PolicyTarget(policies)


def _describe(args: argparse.Namespace, provider: Provider | None, manifest: Manifest | None) -> dict[str, Any]:
    """What the report was replayed against, and on what."""
    out: dict[str, Any] = {
        "client": args.client,
        "store": args.store,
        "since_h": args.since,
        "type": args.type,
        "sample": args.sample,
    }
    if provider is None:
        return {**out, "kind": "policy"}
    out |= {"kind": "manifest" if manifest else "provider", "provider": provider.name, "model": provider.model}
    if manifest is not None:
        out |= {"manifest": args.manifest, "manifest_version": manifest.version}
    return out


def _summary(out: dict[str, Any], path: str) -> str:
    agreement = out["agreement"]
    shown = f"{agreement:.1%}" if agreement is not None else "n/a"
    return (
        f"replay: {out['decisions']} decisions in {out['calls']} calls, agreement {shown}, "
        f"{out['situations_differing']} situations differ; report in {path} (open it at GET /replay)"
    )
