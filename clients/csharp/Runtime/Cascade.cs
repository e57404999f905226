// The cascade's local policy (no I/O): the game's own, or the one the service distilled from the model's
// decisions (GET /v1/policy), so a game gets better without a release. The rules are the other SDKs'
// (clients/conformance/README.md): asked once the manifest's version is known, again every policyRefreshMs (with
// If-None-Match) and at once when the manifest version changes; a policy for another manifest version is never
// used; a fetched policy, while usable, decides in place of the game's own.

using System;
using System.Collections.Generic;
using System.Text.RegularExpressions;

namespace NpcMind
{
    /// <summary>What a game may give as its local policy: a distilled file or a function (one of the two).</summary>
    public sealed class LocalPolicy
    {
        public readonly Policy File;
        public readonly PolicyFunction Function;

        private LocalPolicy(Policy file, PolicyFunction function)
        {
            File = file;
            Function = function;
        }

        public static LocalPolicy Of(Policy file) { return file == null ? null : new LocalPolicy(file, null); }

        public static LocalPolicy Of(PolicyFunction function) { return function == null ? null : new LocalPolicy(null, function); }
    }

    /// <summary>Which local policy decides before the service, and when to ask the service for its own.</summary>
    internal sealed class Cascade
    {
        /// <summary>A minute: a new policy comes at most every --distill-every hours; a 304 a minute costs the
        /// service nothing, and a game session of a few minutes still picks up a new one.</summary>
        public const double DefaultPolicyRefreshMs = 60000;
        private static readonly Regex Kind = new Regex(@"sha256:[0-9a-f]+|\d+");

        public LocalPolicy Own;
        public readonly bool Fetch;
        public Policy Fetched;
        public string ManifestVersion;
        /// <summary>A policy for another version came: the manifest may have changed, ask it again.</summary>
        public bool RecheckManifest;
        /// <summary>The largest policy body read (the transport stops one byte past it).</summary>
        public readonly int MaxBytes;
        private readonly string clientId;
        private readonly double refreshMs;
        private readonly SayOnce say;
        private string etag;
        private double next = double.NegativeInfinity;
        private bool asking;

        public Cascade(string clientId, LocalPolicy policy, bool? fetch, double refreshMs, SayOnce say,
            string manifestVersion = null, int maxBytes = Policy.MaxBytes)
        {
            this.clientId = clientId;
            Own = policy;
            Fetch = fetch ?? policy == null;
            this.refreshMs = refreshMs;
            this.say = say;
            ManifestVersion = manifestVersion;
            MaxBytes = maxBytes;
        }

        /// <summary>The policy that decides now: the service's while one is usable, else the game's own (a Policy of
        /// the game's only for the manifest version it was distilled for, once that is known).</summary>
        public LocalPolicy Active()
        {
            if (Fetched != null) return LocalPolicy.Of(Fetched);
            var own = Own;
            if (own != null && own.File != null && ManifestVersion != null && own.File.ManifestVersion != ManifestVersion)
            {
                say.Say("own-policy:" + ManifestVersion, "the game's policy was distilled for manifest version "
                    + own.File.ManifestVersion + ", and the service runs " + ManifestVersion
                    + ": a policy for another manifest version is never used (distill again)");
                return null;
            }
            return own;
        }

        /// <summary>The active policy's choice for <paramref name="e"/>, or null: ask the service.</summary>
        public PolicyChoice Choose(NpcEntity e, IDictionary<string, object> world, IDictionary<string, object> scopeState)
        {
            if (Fetched != null)
                return Fetched.Choose(e.Type, e.Observation, e.LegalActions, world, scopeState, e.Trigger, e.Profile);
            var policy = Active();
            if (policy == null) return null;
            if (policy.File != null)
                return policy.File.Choose(e.Type, e.Observation, e.LegalActions, world, scopeState, e.Trigger, e.Profile);
            var got = policy.Function(e);
            // ["", 0]: the function's way of saying "ask the service"
            return got == null || string.IsNullOrEmpty(got.Action) ? null : got;
        }

        /// <summary>Whether GET /v1/policy goes out now (fetching on, the manifest version known, none in flight).</summary>
        public bool Due(double now)
        {
            return Fetch && ManifestVersion != null && !asking && now >= next;
        }

        /// <summary>The path and the extra headers of GET /v1/policy; the next is due refreshMs later.</summary>
        public string Request(double now, out Dictionary<string, string> headers)
        {
            asking = true;
            next = now + refreshMs;
            headers = new Dictionary<string, string>();
            if (etag != null) headers["if-none-match"] = etag;
            return "/v1/policy?client_id=" + Uri.EscapeDataString(clientId);
        }

        /// <summary>Take the answer to GET /v1/policy: <paramref name="body"/> is the <see cref="Policy"/> the SDK's
        /// transport loaded off the frame (or the <see cref="PolicyException"/> that refused it), raw bytes (at most
        /// one byte past MaxBytes: loaded here), or a parsed object (a game's own HTTP); false for an answer the
        /// scheduler deals with (401, 429, 5xx).</summary>
        public bool Answered(int status, object body, IDictionary<string, string> headers)
        {
            asking = false;
            if (status == 304) return true;
            if (status == 404)
            {
                Drop();
                return true;
            }
            if (status != 200) return false;
            var bytes = body as byte[];
            var doc = body as IDictionary<string, object>;
            Policy loaded = body as Policy;
            try
            {
                if (body is Exception) throw (Exception)body; // refused by the transport, off the frame
                if (loaded == null)
                {
                    if (bytes != null && bytes.Length > MaxBytes)
                        throw new PolicyException("GET /v1/policy: the body is larger than " + Limits.Bytes(MaxBytes)
                            + " bytes (policyMaxBytes), not read past that");
                    loaded = bytes != null ? Policy.Load(bytes, null, MaxBytes) : Policy.Load(doc ?? new Dictionary<string, object>());
                }
                if (ManifestVersion != null) loaded.Check(ManifestVersion);
                Fetched = loaded;
                string tag;
                etag = headers != null && headers.TryGetValue("etag", out tag) ? tag : null;
            }
            catch (Exception e)
            {
                // a PolicyException, or a file this SDK cannot read at all: never into the game loop
                Drop();
                object version = loaded != null ? loaded.ManifestVersion : doc != null ? Json.Get(doc, "manifest_version") : null;
                RecheckManifest = (loaded != null || doc != null) && !Equals(version, ManifestVersion);
                say.Say("policy:" + Kind.Replace(e.Message, "#"), "the service's local policy is not used: " + e.Message, false);
            }
            return true;
        }

        /// <summary>GET /v1/policy got no answer: asked again on its period.</summary>
        public void Failed() { asking = false; }

        /// <summary>The manifest version the service runs now: on a change the policy for the old one goes, and the
        /// service's is asked at once.</summary>
        public void Manifest(string version)
        {
            RecheckManifest = false;
            if (version == null || version == ManifestVersion) return;
            ManifestVersion = version;
            Drop();
            next = double.NegativeInfinity;
        }

        private void Drop()
        {
            Fetched = null;
            etag = null;
        }
    }
}
