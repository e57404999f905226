// The package's engine code (Unity/: NpcMindRunner, UnityWebRequestSender) and the Unity sample (Samples~/HelloNpc)
// run here against the stand-ins of the Unity types they touch (Examples~/Engines/UnityEngine.cs). In a folder whose
// name ends in ~: Unity does not import it (a real Unity has no stand-ins); build.sh builds it as its own assembly
// (NpcMind.EngineTests) and nunit-console runs it beside NpcMind.Tests. Only the SDK's public surface is used here.

using System;
using System.Collections.Generic;
using System.Reflection;
using System.Text;
using NpcMind;
using NpcMind.Unity;
using NUnit.Framework;

namespace NpcMind.Tests
{
    /// <summary>A service that answers at once: every decide with "chase" for the one bee, anything else with {}.</summary>
    internal sealed class ChasingService : IHttpSender
    {
        public int Decides;

        public void Send(HttpCall call, Action<HttpResult> done)
        {
            string body = "{}";
            if (call.Url.EndsWith("/v1/decide", StringComparison.Ordinal))
            {
                Decides++;
                body = "{\"a2g\": \"0.1\", \"epoch\": 0, \"latency_ms\": 1, \"decisions\": [{\"source\": \"AI\", \"id\": \"bee-1\","
                    + " \"action\": \"chase\", \"label\": \"Chase\", \"confidence\": 0.9, \"ttl_ms\": 12000,"
                    + " \"decision_id\": \"d-1\", \"cached\": false}]}";
            }
            done(new HttpResult { Status = 200, Body = Encoding.UTF8.GetBytes(body) });
        }

        public void CancelAll() { }
    }

    [TestFixture]
    public class EngineTests
    {
        /// <summary>A MonoBehaviour's message (Awake, Start, Update, OnDestroy: private, as Unity finds them) as a
        /// delegate, so that calling it allocates nothing of its own.</summary>
        private static Action Message(object behaviour, string name)
        {
            var m = behaviour.GetType().GetMethod(name, BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public);
            Assert.IsNotNull(m, behaviour.GetType().Name + "." + name);
            return (Action)Delegate.CreateDelegate(typeof(Action), behaviour, m);
        }

        private static NpcMindRunner Runner(DecideClient client)
        {
            var runner = new NpcMindRunner();
            Message(runner, "Awake")(); // its own client over UnityWebRequestSender, replaced here by one over a service
            runner.Client.Close();
            typeof(NpcMindRunner).GetProperty("Client").GetSetMethod(true).Invoke(runner, new object[] { client });
            return runner;
        }

        [Test]
        public void TheSampleBeeAllocatesNothingPerFrameOnceItsDecisionCame()
        {
            double now = 0;
            var options = new DecideClientOptions { Http = new ChasingService(), Clock = () => now };
            options.Scheduler.Log = m => { };
            options.Scheduler.FetchPolicy = false;
            options.Scheduler.Manifest = new Dictionary<string, object>
            {
                { "types", new Dictionary<string, object> { { "bee", new Dictionary<string, object> { { "refresh_ms", 4000L }, { "ttl_ms", 12000L } } } } },
            };
            var runner = Runner(new DecideClient("http://svc:1", "my-game", options));
            var bee = new BeeBrain { npcmind = runner, name = "bee-1" };
            Action tick = Message(runner, "Update"), update = Message(bee, "Update");
            Message(bee, "Start")();
            for (int f = 0; f < 60; f++) // the first second: the bee is asked, its decision comes, telemetry goes
            {
                now = f * 16.0;
                tick();
                update();
            }
            var before = bee.transform.position;
            Assert.AreEqual(1, runner.Client.Stats.Ai, "the bee's decision came");
            int requests = runner.Client.Stats.Requests;
            long allocated = GC.GetAllocatedBytesForCurrentThread();
            for (int f = 0; f < 300; f++) // then frames in which nothing is due: the clock held within the refresh
            {
                tick();
                update();
            }
            allocated = GC.GetAllocatedBytesForCurrentThread() - allocated;
            Assert.AreEqual(requests, runner.Client.Stats.Requests, "nothing was due: no request went");
            Assert.AreEqual(0, allocated, "bytes allocated in 300 frames of the runner's Tick and the bee's Update");
            Assert.Greater(bee.transform.position.z, before.z + 4, "it chased, every frame");
            bee.hp = 0.5f;
            update(); // a change is told (one boxed number), and the frames after it allocate nothing again
            allocated = GC.GetAllocatedBytesForCurrentThread();
            for (int f = 0; f < 100; f++) { tick(); update(); }
            Assert.AreEqual(0, GC.GetAllocatedBytesForCurrentThread() - allocated);
            Message(bee, "OnDestroy")();
            Message(runner, "OnDestroy")();
        }

        [Test]
        public void TheRunnerClosesItsClientWhenDestroyedAndAbortsWhatItsSenderRuns()
        {
            var runner = new NpcMindRunner();
            Message(runner, "Awake")();
            var client = runner.Client;
            client.Track("bee-1", "bee", new Dictionary<string, object>(), new List<string> { "flee" });
            Message(runner, "Update")(); // a request goes out over UnityWebRequestSender; the stand-in never answers it
            int sent = client.Stats.Requests, aborted = UnityEngine.Networking.UnityWebRequest.aborted;
            Assert.Greater(sent, 0);
            Message(runner, "OnDestroy")();
            Assert.IsNull(runner.Client);
            Assert.GreaterOrEqual(UnityEngine.Networking.UnityWebRequest.aborted - aborted, sent, "the requests under way were aborted");
            client.Event("bee-1", "hit"); // due at once, but the client is closed: nothing more goes
            client.Tick(1e9);
            Assert.AreEqual(sent, client.Stats.Requests);
        }

        [Test]
        public void UnityWebRequestSenderAbortsARequestWhenItsTokenFires()
        {
            var sender = new UnityWebRequestSender();
            using (var cancel = new System.Threading.CancellationTokenSource())
            {
                HttpResult got = null;
                var call = new HttpCall
                {
                    Method = "GET", Url = "http://svc:1/v1/keys", Headers = new Dictionary<string, string>(), TimeoutMs = 60000,
                    CancellationToken = cancel.Token,
                };
                sender.Send(call, r => got = r);
                Assert.IsNull(got, "the stand-in answers nothing on its own");
                cancel.Cancel();
                Assert.IsNotNull(got, "aborted: Unity calls completed, and the sender done");
                Assert.AreEqual(0, got.Status);
                Assert.AreEqual("Request aborted", got.Error);
                got = null;
                sender.Send(call, r => got = r);
                Assert.AreEqual("cancelled by the caller", got.Error, "a call whose token fired is not sent");
            }
        }
    }
}
