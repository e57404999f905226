// A stand-in of the few UnityEngine types the README's MonoBehaviour example touches, so that build.sh compiles
// the example here (there is no Unity on this machine) and it cannot rot. Not Unity: only the shapes it uses, and
// the two behaviours the engine tests (Tests/Engines~) need of them: `name` makes a new string at each read, as
// Unity's does, and a UnityWebRequest ends (`completed`) when it is aborted.
namespace UnityEngine
{
    public class Object
    {
        private string named = "";
        /// <summary>Unity's getter copies the name out of the engine: a new string at every read.</summary>
        public string name { get { return new string(named.ToCharArray()); } set { named = value ?? ""; } }
    }
    public class Component : Object { public Transform transform = new Transform(); }
    public class Behaviour : Component { }
    public class MonoBehaviour : Behaviour { }
    public class Transform { public Vector3 position; }

    public struct Vector3
    {
        public float x, y, z;
        public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; }
        public static Vector3 right { get { return new Vector3(1, 0, 0); } }
        public static Vector3 back { get { return new Vector3(0, 0, -1); } }
        public static Vector3 forward { get { return new Vector3(0, 0, 1); } }
        public static Vector3 operator +(Vector3 a, Vector3 b) { return new Vector3(a.x + b.x, a.y + b.y, a.z + b.z); }
        public static Vector3 operator *(Vector3 a, float d) { return new Vector3(a.x * d, a.y * d, a.z * d); }
    }

    public static class Debug
    {
        public static void LogWarning(object message) { System.Console.Error.WriteLine(message); }
    }

    public static class Time
    {
        public static float deltaTime = 1f / 60;
        public static int frameCount;
    }
}

// The UnityWebRequest types Unity/UnityWebRequestSender.cs touches (UnityEngine.Networking), as their shapes are.
namespace UnityEngine
{
    public class AsyncOperation
    {
        private System.Action<AsyncOperation> done;
        public event System.Action<AsyncOperation> completed { add { done += value; } remove { done -= value; } }

        /// <summary>The stand-in's end of an operation (Unity calls `completed` on the main thread).</summary>
        internal void Complete()
        {
            var d = done;
            done = null;
            if (d != null) d(this);
        }
    }
}

namespace UnityEngine.Networking
{
    public class DownloadHandler : System.IDisposable
    {
        public byte[] data { get { return null; } }
        public void Dispose() { }
    }

    public sealed class DownloadHandlerBuffer : DownloadHandler { }

    public class UploadHandler : System.IDisposable
    {
        public void Dispose() { }
    }

    public sealed class UploadHandlerRaw : UploadHandler
    {
        public UploadHandlerRaw(byte[] data) { }
    }

    public sealed class UnityWebRequestAsyncOperation : AsyncOperation { }

    public class UnityWebRequest : System.IDisposable
    {
        private UnityWebRequestAsyncOperation sent;
        private string failed;
        public UnityWebRequest(string url, string method, DownloadHandler downloadHandler, UploadHandler uploadHandler) { }
        public int timeout { get; set; }
        public long responseCode { get { return 0; } }
        public string error { get { return failed; } }
        public DownloadHandler downloadHandler { get { return null; } }
        public void SetRequestHeader(string name, string value) { }
        public System.Collections.Generic.Dictionary<string, string> GetResponseHeaders() { return null; }
        public UnityWebRequestAsyncOperation SendWebRequest() { return sent = new UnityWebRequestAsyncOperation(); }
        /// <summary>Requests aborted so far (the stand-in's count, for the engine tests; Unity has none).</summary>
        public static int aborted;

        /// <summary>Ends a request under way as aborted (the stand-ins never answer one otherwise).</summary>
        public void Abort()
        {
            if (sent == null || failed != null) return;
            aborted++;
            failed = "Request aborted";
            sent.Complete();
        }
        public void Dispose() { }
    }
}
