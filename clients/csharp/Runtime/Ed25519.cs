// Ed25519 signature checks (RFC 8032) by Bouncy Castle for .NET (https://www.bouncycastle.org: kept since 2000,
// audited), vendored unchanged as Runtime/Plugins/BouncyCastle.Crypto.dll with its licence. Pure managed code, so
// every platform a game ships to verifies the same way: Unity's players (IL2CPP on iOS, Android, consoles and
// WebGL, Mono on desktop), Godot 4 .NET, a plain .NET server. No cryptography is written here, and no native
// library is loaded (libsodium, which this file called before, is in no Unity player: most platforms skipped the
// check). .NET Standard 2.0 has no Ed25519 of its own.

namespace NpcMind
{
    /// <summary>Ed25519 verification by the vendored Bouncy Castle; available on every platform.</summary>
    internal static class Ed25519
    {
        /// <summary>What checks signatures: for the one line a game logs.</summary>
        public const string Library = "BouncyCastle.Crypto 1.9.0 (managed)";

        /// <summary>Whether <paramref name="signature"/> (64 bytes) is the Ed25519 signature of
        /// <paramref name="message"/> by <paramref name="publicKey"/> (32 bytes); false for any other length, and for
        /// a key or a signature that is not a valid encoding (RFC 8032 section 5.1.7).</summary>
        public static bool Verify(byte[] signature, byte[] message, byte[] publicKey)
        {
            if (signature == null || signature.Length != 64 || publicKey == null || publicKey.Length != 32 || message == null)
                return false;
            return Org.BouncyCastle.Math.EC.Rfc8032.Ed25519.Verify(signature, 0, publicKey, 0, message, 0, message.Length);
        }
    }
}
