// Ed25519 signature checks by libsodium (https://libsodium.org: kept since 2013, audited), called through P/Invoke.
// No cryptography is written here: .NET Standard 2.0 has no Ed25519, and this SDK carries none of its own. The
// native library is the system's or the game's: Debian and Ubuntu `libsodium23`, Fedora `libsodium`, macOS
// `brew install libsodium`, Windows `libsodium.dll` beside the game; in Unity, libsodium's build for each player
// platform as a native plugin named libsodium. Where none loads, nothing is verified here (README).

using System;
using System.Runtime.InteropServices;

namespace NpcMind
{
    /// <summary>Ed25519 verification by libsodium when one loads; <see cref="Available"/> says whether.</summary>
    public static class Ed25519
    {
        private const CallingConvention C = CallingConvention.Cdecl;

        /// <summary>libsodium by its plain name: libsodium.dll, libsodium.dylib, libsodium.so (a -dev package), a
        /// Unity plugin.</summary>
        private static class Plain
        {
            [DllImport("libsodium", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("libsodium", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }

        /// <summary>Debian's and Ubuntu's runtime package, which ships only the versioned name.</summary>
        private static class Debian
        {
            [DllImport("libsodium.so.23", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("libsodium.so.23", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }

        private delegate int VerifyDetached(byte[] sig, byte[] m, ulong mlen, byte[] pk);

        private static readonly object Gate = new object();
        private static bool tried;
        private static VerifyDetached verify;
        private static string library, unavailable;

        /// <summary>True when libsodium loaded and started: signatures are checked here.</summary>
        public static bool Available
        {
            get { Load(); return verify != null; }
        }

        /// <summary>The name libsodium loaded by, or null.</summary>
        public static string Library
        {
            get { Load(); return library; }
        }

        /// <summary>Why no libsodium loaded (null when one did): for the one line a game logs.</summary>
        public static string Unavailable
        {
            get { Load(); return unavailable; }
        }

        /// <summary>Whether <paramref name="signature"/> (64 bytes) is the Ed25519 signature of
        /// <paramref name="message"/> by <paramref name="publicKey"/> (32 bytes); false for any other length.
        /// Throws InvalidOperationException when no libsodium loaded (<see cref="Available"/>).</summary>
        public static bool Verify(byte[] signature, byte[] message, byte[] publicKey)
        {
            Load();
            if (verify == null) throw new InvalidOperationException("no Ed25519 here: " + unavailable);
            if (signature == null || signature.Length != 64 || publicKey == null || publicKey.Length != 32 || message == null)
                return false;
            return verify(signature, message, (ulong)message.Length, publicKey) == 0;
        }

        private static void Load()
        {
            lock (Gate)
            {
                if (tried) return;
                tried = true;
                var why = new System.Collections.Generic.List<string>();
                if (Start("libsodium", Plain.sodium_init, why)) verify = Plain.crypto_sign_verify_detached;
                else if (Start("libsodium.so.23", Debian.sodium_init, why)) verify = Debian.crypto_sign_verify_detached;
                unavailable = verify != null ? null : "libsodium did not load (" + string.Join("; ", why)
                    + "): install it (Debian/Ubuntu: apt-get install libsodium23; macOS: brew install libsodium; "
                    + "Windows: libsodium.dll beside the game; Unity: a libsodium native plugin)";
            }
        }

        /// <summary>sodium_init of one name: 0 started, 1 started before; a missing library or entry is said.</summary>
        private static bool Start(string name, Func<int> init, System.Collections.Generic.List<string> why)
        {
            try
            {
                int r = init();
                if (r < 0)
                {
                    why.Add(name + ": sodium_init failed");
                    return false;
                }
                library = name;
                return true;
            }
            catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException || e is BadImageFormatException)
            {
                why.Add(name + ": " + e.GetType().Name);
                return false;
            }
        }
    }
}
