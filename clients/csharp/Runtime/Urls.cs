// Checking a service's address once, where a game gives it: a wrong one is said in the first line, by name.

using System;

namespace NpcMind
{
    /// <summary>The service URLs a game passes to the SDK's constructors.</summary>
    internal static class Urls
    {
        /// <summary>An absolute http(s) URL without its trailing slashes; an ArgumentException naming
        /// <paramref name="name"/> otherwise.</summary>
        public static string Http(string url, string name)
        {
            Uri uri;
            if (url == null || !Uri.TryCreate(url, UriKind.Absolute, out uri)
                || (uri.Scheme != "http" && uri.Scheme != "https") || string.IsNullOrEmpty(uri.Host))
                throw new ArgumentException(name + ": " + Errors.Quote(url ?? "null")
                    + " is not an http(s) URL (e.g. http://127.0.0.1:8080)", name);
            return url.TrimEnd('/');
        }
    }
}
