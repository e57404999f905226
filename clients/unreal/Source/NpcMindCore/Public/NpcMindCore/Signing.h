// What an outcome's Ed25519 signature covers, rebuilt exactly as the service signs it, and its check through
// OpenSSL (EVP_PKEY_ED25519, EVP_DigestVerify: Unreal ships OpenSSL as a module); no cryptography is written here.
#pragma once

#include <map>
#include <string>

#include "NpcMindCore/Jcs.h"

namespace npcmind {

/// The signed payload of a Finalize (docs/protocol.md, Signatures), and its check.
struct Signing {
    /// The payload's kind: a ruleset's verdict, never the origin of an inference.
    static constexpr const char* Attests = "npcmind/ruleset-verdict/v1";

    /// Exactly what the signature covers: the Finalize as sent (its `signature` left out), for the path's NPC, by
    /// the ruleset its `ruleAudit.preset` names, over the returned tape's digest; false for a tape with no
    /// canonical form.
    static bool SignedPayload(const std::string& npcId, const Value& finalize, const Value& tape, Value& out,
                              NotCanonical* error = nullptr);
    /// Whether `signature` (`kid.base64url`) is a valid signature of the canonical payload by the key of its kid
    /// (kid -> base64url, as GET /v1/keys lists them): one encoding per signature, an unknown kid is false.
    static bool Verify(const std::string& signature, const std::string& payloadCanonical,
                       const std::map<std::string, std::string>& keys);
    /// Base64url without padding: the form of keys and signatures on the wire.
    static std::string B64(const std::string& raw);
    /// The bytes of a base64url text without padding; false when it is not one.
    static bool Unb64(const std::string& text, std::string& out);
};

}  // namespace npcmind
