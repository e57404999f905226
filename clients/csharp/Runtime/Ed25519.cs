// Ed25519 signature checks by libsodium (https://libsodium.org: kept since 2013, audited), called through P/Invoke.
// No cryptography is written here: .NET Standard 2.0 has no Ed25519, and this SDK carries none of its own. The
// native library is the system's or the game's: Debian and Ubuntu `libsodium23`, macOS `brew install libsodium`,
// Windows `libsodium.dll` beside the game; in Unity, libsodium's build for each player platform as a native plugin
// named libsodium (linked statically on iOS and WebGL: `__Internal`, with the scripting define
// NPCMIND_SODIUM_INTERNAL). Only the Linux names are tried on this project's machines. Where none loads, nothing is verified here (README).

using System;
using System.Collections.Generic;
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

        /// <summary>The runtime package of libsodium 1.0.19 and later, which ships only the versioned name.</summary>
        private static class So26
        {
            [DllImport("libsodium.so.26", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("libsodium.so.26", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }

        /// <summary>Debian 12's and Ubuntu's runtime package (libsodium23), which ships only the versioned name.</summary>
        private static class So23
        {
            [DllImport("libsodium.so.23", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("libsodium.so.23", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }

        /// <summary>Homebrew on Apple silicon, outside the default search of the loader.</summary>
        private static class Homebrew
        {
            [DllImport("/opt/homebrew/lib/libsodium.dylib", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("/opt/homebrew/lib/libsodium.dylib", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }

#if NPCMIND_SODIUM_INTERNAL
        /// <summary>A libsodium linked into the player itself: Unity's iOS and WebGL players (IL2CPP) reach a static
        /// plugin as __Internal. Behind a define the game sets once it links one: IL2CPP resolves __Internal when it
        /// links the player, so without libsodium in it the player would not build.</summary>
        private static class Static
        {
            [DllImport("__Internal", CallingConvention = C)] public static extern int sodium_init();
            [DllImport("__Internal", CallingConvention = C)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
        }
#endif

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
                var why = new List<string>();
                var candidates = new List<Candidate>
                {
                    new Candidate("libsodium", Plain.sodium_init, Plain.crypto_sign_verify_detached),
                    new Candidate("libsodium.so.26", So26.sodium_init, So26.crypto_sign_verify_detached),
                    new Candidate("libsodium.so.23", So23.sodium_init, So23.crypto_sign_verify_detached),
                    new Candidate("/opt/homebrew/lib/libsodium.dylib", Homebrew.sodium_init, Homebrew.crypto_sign_verify_detached),
                };
#if NPCMIND_SODIUM_INTERNAL
                candidates.Add(new Candidate("__Internal", Static.sodium_init, Static.crypto_sign_verify_detached));
#endif
                foreach (var c in candidates)
                    if (Start(c, why))
                    {
                        verify = c.Check;
                        library = c.Name;
                        break;
                    }
                unavailable = verify != null ? null : "libsodium did not load (" + string.Join("; ", why)
                    + "): install it (Debian/Ubuntu: apt-get install libsodium23; macOS: brew install libsodium; "
                    + "Windows: libsodium.dll beside the game; Unity: libsodium's build for each player platform as a "
                    + "native plugin named libsodium; on iOS and WebGL linked statically, with the scripting define "
                    + "NPCMIND_SODIUM_INTERNAL), or leave the check to a game "
                    + "server (CheckSignatures = false)";
                tried = true;
            }
        }

        /// <summary>One name libsodium may load by, and its two entry points under that name.</summary>
        private sealed class Candidate
        {
            public readonly string Name;
            public readonly Func<int> Init;
            public readonly VerifyDetached Check;

            public Candidate(string name, Func<int> init, VerifyDetached check)
            {
                Name = name;
                Init = init;
                Check = check;
            }
        }

        /// <summary>One name: sodium_init (0 started, 1 started before), then a check that must fail (the zero key
        /// is refused), so that both entry points are resolved now, not at the first outcome.</summary>
        private static bool Start(Candidate c, List<string> why)
        {
            try
            {
                if (c.Init() < 0)
                {
                    why.Add(c.Name + ": sodium_init failed");
                    return false;
                }
                if (c.Check(new byte[64], new byte[0], 0, new byte[32]) == 0)
                {
                    why.Add(c.Name + ": verified a signature of the zero key (not libsodium)");
                    return false;
                }
                return true;
            }
            catch (Exception e)
            {
                why.Add(c.Name + ": " + e.GetType().Name + (string.IsNullOrEmpty(e.Message) ? "" : " (" + e.Message + ")"));
                return false;
            }
        }
    }
}
