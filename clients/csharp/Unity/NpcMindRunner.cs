// The one component a Unity game adds: it owns the DecideClient, sends over UnityWebRequest (WebGL included, no
// thread), ticks it once a frame and closes it with the scene. Other scripts read `NpcMindRunner.Client`.
using NpcMind;
using UnityEngine;

namespace NpcMind.Unity
{
    /// <summary>A DecideClient ticked once a frame over UnityWebRequest; closed when the component is destroyed.</summary>
    public sealed class NpcMindRunner : MonoBehaviour
    {
        /// <summary>The npcmind service, e.g. http://127.0.0.1:8080.</summary>
        public string serviceUrl = "http://127.0.0.1:8080";
        /// <summary>The game's name for itself.</summary>
        public string clientId = "my-game";

        /// <summary>The client of this runner (null before Awake and after OnDestroy).</summary>
        public DecideClient Client { get; private set; }

        private void Awake()
        {
            Client = new DecideClient(serviceUrl, clientId, new DecideClientOptions { Http = new UnityWebRequestSender() });
        }

        private void Update()
        {
            if (Client != null) Client.Tick(); // applies what came; never blocks, allocates nothing when idle
        }

        private void OnDestroy()
        {
            if (Client != null) Client.Close(); // aborts the requests still running
            Client = null;
        }
    }
}
