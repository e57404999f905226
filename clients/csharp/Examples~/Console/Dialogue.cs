// One dialogue NPC through a real service, run by tests/test_csharp.py (the TypeScript SDK's npc tests are its
// twins). Prints one JSON line: the outcome as a game gets it (verified and applied by the SDK), and what a game
// server would check.
//   mono NpcMindDialogue.exe SERVICE CORTEX turn [RULESET]   Mara answers a traveller (twice: her state goes back)
//   mono NpcMindDialogue.exe SERVICE CORTEX tamper           the game changes its tape after the prompt was built
//   mono NpcMindDialogue.exe SERVICE CORTEX forge            Mara's signed line changed on its way to the game
//   mono NpcMindDialogue.exe - CORTEX cortex                 one completion with every constraint, twice: the text and
//                                                            the parameters the model refused
//   mono NpcMindDialogue.exe numbers SEED COUNT              Jcs.Number of random doubles (checked against Python)
//   mono NpcMindDialogue.exe read < LITERALS                 Json.Parse of each line's number, as its bits in hex

using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using NpcMind;

public static class Dialogue
{
    /// <summary>HttpClient, with the tape of the last step changed on the way out (the game lying about Mara's
    /// state after the service built the prompt from it).</summary>
    sealed class Tampering : IHttpSender
    {
        readonly HttpClientSender inner = new HttpClientSender();

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            var body = call.Body == null ? null : Json.Parse(Encoding.UTF8.GetString(call.Body)) as IDictionary<string, object>;
            if (Json.Get(Json.Get(body, "lastResult"), "type") as string == "ExecuteInferenceResult")
            {
                var tape = (IDictionary<string, object>)body["tape"];
                tape["npcState"] = new Dictionary<string, object> { { "turns", 99 }, { "gold", 1000000 } };
                call.Body = Encoding.UTF8.GetBytes(Json.Write(body));
            }
            inner.Send(call, done);
        }

        public void CancelAll() { inner.CancelAll(); }
    }

    /// <summary>HttpClient, with the Finalize's line changed on its way back (a proxy between the service and the
    /// game): its signature no longer covers it.</summary>
    sealed class Forging : IHttpSender
    {
        readonly HttpClientSender inner = new HttpClientSender();

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            inner.Send(call, got =>
            {
                var body = got.Body == null || got.Status != 200 ? null : Json.Parse(Encoding.UTF8.GetString(got.Body)) as IDictionary<string, object>;
                var instruction = Json.Get(body, "instruction") as IDictionary<string, object>;
                if (instruction != null && instruction["type"] as string == "Finalize" && instruction["valid"] as bool? == true)
                {
                    instruction["dialogue"] = instruction["dialogue"] + " And the room is free.";
                    got.Body = Encoding.UTF8.GetBytes(Json.Write(body));
                }
                done(got);
            });
        }

        public void CancelAll() { inner.CancelAll(); }
    }

    static Dictionary<string, object> Shown(NpcOutcome o)
    {
        return new Dictionary<string, object>
        {
            { "valid", o.Valid }, { "verified", o.Verified }, { "applied", o.Applied }, { "dialogue", o.Dialogue },
            { "action", o.Action }, { "steps", o.Steps.Select(s => (object)Wire.Text(s)).ToList() }, { "state", o.State }, { "remembered", o.Remembered },
            { "signature", o.Signature }, { "signed_payload", o.SignedPayload }, { "for_server", Json.Parse(o.ForServer()) },
            { "audit", o.Audit },
        };
    }

    static byte[] Hex(string s)
    {
        var b = new byte[s.Length / 2];
        for (int i = 0; i < b.Length; i++) b[i] = Convert.ToByte(s.Substring(2 * i, 2), 16);
        return b;
    }

    /// <summary>Two completions asking maxTokens, temperature and stop of a real chat-completions server: what it
    /// answered, what it refused (and this cortex no longer sends), or the CortexException with its status and code.</summary>
    static int Cortex(string url)
    {
        var said = new List<object>();
        var cortex = new OpenAICortex(url, "scripted", log: m => said.Add(m));
        var asked = new PromptConstraints { MaxTokens = 60, Temperature = 0.7, Stop = new List<string> { "\n\n" } };
        var report = new Dictionary<string, object>();
        try
        {
            report["first"] = cortex.Complete("Greet the traveller.", asked).GetAwaiter().GetResult();
            report["second"] = cortex.Complete("Greet her again.", asked).GetAwaiter().GetResult();
        }
        catch (CortexException e)
        {
            report["error"] = new Dictionary<string, object> { { "message", e.Message }, { "status", e.Status }, { "code", e.Code } };
        }
        report["refused"] = cortex.Refused.Cast<object>().ToList();
        report["said"] = said;
        Console.WriteLine(Json.Write(report));
        return 0;
    }

    static int Main(string[] args)
    {
        if (args[0] == "numbers")
        {
            var random = new Random(int.Parse(args[1]));
            var bytes = new byte[8];
            for (int i = 0; i < int.Parse(args[2]); i++)
            {
                random.NextBytes(bytes);
                if (i % 4 == 1) bytes[7] &= 0x80; // a subnormal (or a tiny normal)
                if (i % 4 == 2) { bytes[6] = 0x43; bytes[7] = 0x3f; } // an integer around 2^53
                double x = BitConverter.ToDouble(bytes, 0);
                if (!double.IsNaN(x) && !double.IsInfinity(x))
                    Console.WriteLine(BitConverter.DoubleToInt64Bits(x).ToString("x16") + " " + Jcs.Number(x));
            }
            return 0;
        }
        if (args[0] == "verify") // lines "publicKey signature message" in hex: 1 when Ed25519.Verify accepts
        {
            string line;
            while ((line = Console.ReadLine()) != null)
            {
                var f = line.Split(' ');
                Console.WriteLine(Ed25519.Verify(Hex(f[1]), Hex(f.Length > 2 ? f[2] : ""), Hex(f[0])) ? "1" : "0");
            }
            return 0;
        }
        if (args[0] == "read")
        {
            string line;
            while ((line = Console.ReadLine()) != null)
                Console.WriteLine(BitConverter.DoubleToInt64Bits(Json.ToDouble(Json.Parse(line))).ToString("x16"));
            return 0;
        }
        string service = args[0], mode = args[2];
        if (mode == "cortex") return Cortex(args[1]);
        var npcs = new InMemoryNpcs();
        npcs.Register("mara", "Mara, the innkeeper of the Silver Stag. Warm, nosy, afraid of the old mine.",
            new Dictionary<string, object> { { "inn", "Silver Stag" }, { "gold", 12 } });
        var options = new DialogueClientOptions
        {
            Http = mode == "tamper" ? new Tampering() : mode == "forge" ? (IHttpSender)new Forging() : null,
            CheckSignatures = true, // the default: the vendored Bouncy Castle, on every platform
        };
        using (var mind = new DialogueClient(service, new OpenAICortex(args[1], "scripted"), npcs, options))
        {
            var report = new Dictionary<string, object> { { "library", Ed25519.Library } };
            try
            {
                string ruleset = args.Length > 3 ? args[3] : null;
                var first = mind.Process("mara", "A traveller with a lantern asks about the old mine.", null, ruleset).GetAwaiter().GetResult();
                report["first"] = Shown(first); // verified and applied by the SDK when valid
                if (first.Valid)
                {
                    var second = mind.Process("mara", "The traveller asks again about the mine.", null, ruleset).GetAwaiter().GetResult();
                    report["second"] = Shown(second);
                }
            }
            catch (NpcMindException e)
            {
                report["refused"] = e.Message;
                report["error"] = new Dictionary<string, object> { { "kind", e.GetType().Name }, { "status", e.Status }, { "code", e.Code } };
            }
            report["memories"] = npcs.Remembered("mara").Count;
            report["state"] = npcs.Get("mara").State;
            Console.WriteLine(Json.Write(report));
        }
        return 0;
    }
}
